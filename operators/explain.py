"""Planning text read from the target: the statement guard and the one generic-plan EXPLAIN.

Statement texts come from pg_stat_statements (normalised, with $1, $2 ... for constants) and from
pg_stat_activity (literal). They are data: PostgreSQL's own parser (pglast) decides whether a text
is exactly one statement of the kinds a caller may plan before anything reaches the server, the
statement may call only pg_catalog's code (planning folds IMMUTABLE functions, so it can run
code), and it is planned, never executed (no EXPLAIN ANALYZE). The index advisor (hypothetical
indexes) and the diagnosis's statement analysis both plan through `generic_plan`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import psycopg
from pglast import ast, parse_sql
from pglast.parser import ParseError
from pglast.visitors import Visitor

from dbcrew.errors import DbcrewError
from operators.sql import execute, fetch, quote_ident, scalar

FOREIGN_CODE = "calls code outside pg_catalog"


class Unplannable(DbcrewError, ValueError):
    """The text may not be planned here (the message says why; FOREIGN_CODE starts a refusal of its code)."""


@dataclass
class _Names(Visitor):
    """The functions, operators, types and relations a statement names (qualified or not)."""

    functions: set[tuple[str, ...]] = field(default_factory=set)
    operators: set[tuple[str, ...]] = field(default_factory=set)
    types: set[tuple[str, ...]] = field(default_factory=set)
    relations: set[tuple[str, ...]] = field(default_factory=set)

    def visit_FuncCall(self, _ancestors: Any, node: ast.FuncCall) -> None:
        self.functions.add(tuple(n.sval for n in node.funcname or ()))

    def visit_A_Expr(self, _ancestors: Any, node: ast.A_Expr) -> None:
        name = tuple(n.sval for n in node.name or ())
        # BETWEEN and its kin are spelled as keywords but planned as the comparison operators.
        self.operators.update({("<=",), (">=",)} if "BETWEEN" in name[-1] else {name})

    def visit_TypeName(self, _ancestors: Any, node: ast.TypeName) -> None:
        self.types.add(tuple(n.sval for n in node.names or ()))

    def visit_RangeVar(self, _ancestors: Any, node: ast.RangeVar) -> None:
        assert node.relname is not None  # the parser names every relation it reads
        self.relations.add((node.schemaname, node.relname) if node.schemaname else (node.relname,))


# Names used unqualified that some schema other than pg_catalog also defines (an overload there
# could win the resolution), and relations whose planning adds code the text does not show: views
# (their definition is inlined) and tables under row-level security (their policies are).
_FOREIGN_SQL = """
SELECT 'function ' || n.nspname || '.' || p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE p.proname = ANY(%(functions)s) AND n.nspname <> 'pg_catalog'
UNION ALL
SELECT 'operator ' || n.nspname || '.' || o.oprname FROM pg_operator o JOIN pg_namespace n ON n.oid = o.oprnamespace
 WHERE o.oprname = ANY(%(operators)s) AND n.nspname <> 'pg_catalog'
UNION ALL
SELECT 'type ' || n.nspname || '.' || t.typname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
 WHERE t.typname = ANY(%(types)s) AND n.nspname <> 'pg_catalog' AND t.typrelid = 0
UNION ALL
SELECT CASE WHEN c.relkind = 'v' THEN 'view ' ELSE 'row-level security on ' END || c.oid::regclass::text
  FROM unnest(%(relations)s::text[]) AS r(name) JOIN pg_class c ON c.oid = to_regclass(r.name)
 WHERE c.relkind = 'v' AND c.relnamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace)
    OR c.relrowsecurity
LIMIT 1
"""


def _parsed(query: str, kinds: tuple[type, ...]) -> tuple[_Names | None, str | None]:
    """The names `query` uses and what is wrong with its text alone (None when nothing)."""
    try:
        parsed = parse_sql(query)
    except ParseError as exc:
        return None, f"not parsable: {exc}"
    if len(parsed) != 1:
        return None, f"{len(parsed)} statements in one text"
    stmt = parsed[0].stmt
    if stmt is None or not isinstance(stmt, kinds):
        return None, f"utility statement ({type(stmt).__name__}) has no plan"
    names = _Names()
    names(stmt)
    for kind, found in (
        ("function", names.functions),
        ("operator", names.operators),
        ("type", names.types),
    ):
        outside = sorted(".".join(n) for n in found if len(n) > 1 and n[0] != "pg_catalog")
        if outside:
            return None, f"{FOREIGN_CODE}: {kind} {outside[0]}"
    return names, None


def refused_text(query: str, kinds: tuple[type, ...]) -> str | None:
    """Why the text alone already rules `query` out of an EXPLAIN (None when it does not)."""
    return _parsed(query, kinds)[1]


def unplannable(conn: psycopg.Connection[Any], query: str, kinds: tuple[type, ...]) -> str | None:
    """Why `query` may not be planned (None when it may): the guard in front of every EXPLAIN of
    text read from the target.

    PostgreSQL's own parser (pglast) decides that the text is exactly one statement of `kinds`, so
    it can never smuggle a second one or a utility command. Planning is not harmless either: the
    planner folds IMMUTABLE functions with constant arguments, so `EXPLAIN ... WHERE id = evil()`
    runs `evil()` with the review's privileges. Only code from pg_catalog may be planned: every
    function, operator and type the statement names must be pg_catalog's (qualified, or unqualified
    with no namesake elsewhere in the database, which an overload could make win), and no relation
    may bring code the text does not show (a view's definition, a row-level security policy).
    """
    names, why = _parsed(query, kinds)
    if names is None:
        return why
    row = fetch(
        conn,
        _FOREIGN_SQL,
        {
            "functions": sorted(n[-1] for n in names.functions),
            "operators": sorted(n[-1] for n in names.operators),
            "types": sorted(n[-1] for n in names.types),
            "relations": sorted(".".join(quote_ident(p) for p in n) for n in names.relations),
        },
    )[1]
    return f"{FOREIGN_CODE}: {row[0][0]}" if row else None


def generic_plan(
    conn: psycopg.Connection[Any], query: str, server_version_num: int, kinds: tuple[type, ...]
) -> dict[str, Any]:
    """The root node of the statement's generic plan (EXPLAIN FORMAT JSON), valid for texts with or without $n.

    PostgreSQL 16+ plans it with EXPLAIN (GENERIC_PLAN). Before 16, as Dexter does: PREPARE, force
    the generic plan, EXPLAIN EXECUTE with NULL for every parameter (the generic plan does not look
    at the values), DEALLOCATE. Raises Unplannable for a text the guard refuses (`unplannable`), and the server's
    error (psycopg.Error) when it cannot plan the statement.
    """
    why = unplannable(conn, query, kinds)
    if why is not None:
        raise Unplannable(why)
    if server_version_num >= 160000:
        plan: list[dict[str, dict[str, Any]]] = scalar(
            conn, f"EXPLAIN (GENERIC_PLAN, FORMAT JSON) {query}"
        )
    else:
        plan = _prepared_generic_plan(conn, query)
    return plan[0]["Plan"]


_PREPARED = itertools.count()


def _prepared_generic_plan(conn: psycopg.Connection[Any], query: str) -> Any:
    name = f"dbcrew_generic_{next(_PREPARED)}"
    prepared = False
    try:
        with conn.transaction():
            execute(conn, "SET LOCAL plan_cache_mode = force_generic_plan")
            execute(conn, f"PREPARE {name} AS {query}")
            prepared = True
            params = scalar(
                conn,
                "SELECT cardinality(parameter_types) FROM pg_prepared_statements WHERE name = %s",
                [name],
            )
            args = f"({', '.join(['NULL'] * params)})" if params else ""
            return scalar(conn, f"EXPLAIN (FORMAT JSON) EXECUTE {name}{args}")
    finally:
        if prepared:  # prepared statements outlive the transaction, even a rolled-back one
            execute(conn, f"DEALLOCATE {name}")
