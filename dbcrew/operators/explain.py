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
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import psycopg
from pglast import ast, parse_sql
from pglast.parser import ParseError
from pglast.visitors import Visitor
from psycopg import errors

from dbcrew.errors import DbcrewError
from dbcrew.operators.sql import execute, fetch, quote_ident, scalar
from dbcrew.targets.postgres import first_line

FOREIGN_CODE = "calls code outside pg_catalog"


class Unplannable(DbcrewError, ValueError):
    """The text may not be planned here (the message says why; FOREIGN_CODE starts a refusal of its code)."""


@dataclass
class _Names(Visitor):
    """The functions, operators, types and relations a statement names (qualified or not), where each
    unqualified relation is written (text offset, name), and the names its WITH clauses define."""

    functions: set[tuple[str, ...]] = field(default_factory=set)
    operators: set[tuple[str, ...]] = field(default_factory=set)
    types: set[tuple[str, ...]] = field(default_factory=set)
    relations: set[tuple[str, ...]] = field(default_factory=set)
    unqualified: list[tuple[int, str]] = field(default_factory=list)
    ctes: set[str] = field(default_factory=set)

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
        if not node.schemaname:
            assert node.location is not None  # the parser places every name it reads
            self.unqualified.append((node.location, node.relname))

    def visit_CommonTableExpr(self, _ancestors: Any, node: ast.CommonTableExpr) -> None:
        assert node.ctename is not None  # every WITH item has its name
        self.ctes.add(node.ctename)


# What planning the statement would run outside pg_catalog, each with the schema that defines it:
# an unqualified function, operator or type name that pg_catalog does not define (the plan is made
# with pg_catalog alone on the search_path, so pg_catalog's namesake is the only candidate when
# there is one), and relations whose planning adds code the text does not show: views (their
# definition is inlined) and tables under row-level security (their policies are). With
# `namesakes`, every definition of the names outside pg_catalog instead: what the server could
# have meant when pg_catalog had no version of a name for the argument types the text gives.
_FOREIGN_SQL = """
WITH named(kind, name, nspname) AS (
    SELECT 'function', p.proname::text, n.nspname::text
      FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE p.proname = ANY(%(functions)s)
    UNION SELECT 'operator', o.oprname::text, n.nspname::text
      FROM pg_operator o JOIN pg_namespace n ON n.oid = o.oprnamespace WHERE o.oprname = ANY(%(operators)s)
    UNION SELECT 'type', t.typname::text, n.nspname::text
      FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE t.typname = ANY(%(types)s)
       AND t.typrelid = 0
)
SELECT string_agg(what, ', ' ORDER BY what) FROM (
    SELECT DISTINCT kind || ' ' || quote_ident(nspname) || '.' || name AS what FROM named f
     WHERE nspname <> 'pg_catalog'
       AND (%(namesakes)s OR NOT EXISTS (
            SELECT 1 FROM named c WHERE c.kind = f.kind AND c.name = f.name AND c.nspname = 'pg_catalog'))
    UNION
    SELECT CASE WHEN c.relkind = 'v' THEN 'view ' ELSE 'row-level security on ' END
           || quote_ident(c.relnamespace::regnamespace::text) || '.' || quote_ident(c.relname)
      FROM unnest(%(relations)s::text[]) AS r(name) JOIN pg_class c ON c.oid = to_regclass(r.name)
     WHERE NOT %(namesakes)s
       AND (c.relkind = 'v' AND c.relnamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace)
            OR c.relrowsecurity)
) AS foreign_code
"""
# The schema each unqualified relation name resolves to through the review's own search_path.
_SCHEMAS_SQL = """
SELECT r.name, n.nspname::text FROM unnest(%(names)s::text[]) AS r(name)
  JOIN pg_class c ON c.oid = to_regclass(quote_ident(r.name)) JOIN pg_namespace n ON n.oid = c.relnamespace
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


def not_explained(reasons: Iterable[str], kind: str = "statement(s)") -> str:
    """The guard's refusals among `reasons`, counted, with each refused name and the schema that
    defines it (`function public.evil`): what the reader needs to see why a heavy statement went
    unexplained. Empty when none was refused."""
    refused = [why for why in reasons if why.startswith(FOREIGN_CODE)]
    if not refused:
        return ""
    what = sorted({why.removeprefix(FOREIGN_CODE).lstrip(": ") for why in refused})
    return f"{len(refused)} {kind} not explained: they call code outside pg_catalog ({'; '.join(what)})"


def refused_text(query: str, kinds: tuple[type, ...]) -> str | None:
    """Why the text alone already rules `query` out of an EXPLAIN (None when it does not)."""
    return _parsed(query, kinds)[1]


def _foreign_code(conn: psycopg.Connection[Any], names: _Names, *, namesakes: bool) -> str | None:
    """The code outside pg_catalog the names would call, as `kind schema.name, ...` (None when none)."""
    found: str | None = scalar(
        conn,
        _FOREIGN_SQL,
        {
            "functions": sorted(n[-1] for n in names.functions),
            "operators": sorted(n[-1] for n in names.operators),
            "types": sorted(n[-1] for n in names.types),
            "relations": sorted(".".join(quote_ident(p) for p in n) for n in names.relations),
            "namesakes": namesakes,
        },
    )
    return found


def unplannable(conn: psycopg.Connection[Any], query: str, kinds: tuple[type, ...]) -> str | None:
    """Why `query` may not be planned (None when it may): the guard in front of every EXPLAIN of
    text read from the target.

    PostgreSQL's own parser (pglast) decides that the text is exactly one statement of `kinds`, so
    it can never smuggle a second one or a utility command. Planning is not harmless either: the
    planner folds IMMUTABLE functions with constant arguments, so `EXPLAIN ... WHERE id = evil()`
    runs `evil()` with the review's privileges. Only code from pg_catalog may be planned: a
    qualified name must be pg_catalog's, an unqualified one must be a name pg_catalog defines (the
    plan is made with pg_catalog alone on the search_path, `generic_plan`, so no namesake elsewhere
    can win the resolution, whatever overloads an extension adds: citext's or pgvector's `=` leave
    `tracking = md5($1)` plannable), and no relation may bring code the text does not show (a
    view's definition, a row-level security policy). A refusal names each function, operator, type
    or relation it refused, with the schema that defines it.
    """
    names, why = _parsed(query, kinds)
    if names is None:
        return why
    found = _foreign_code(conn, names, namesakes=False)
    return f"{FOREIGN_CODE}: {found}" if found else None


# The tables (schema, name) the review's role may not SELECT.
_UNREADABLE_SQL = """
SELECT DISTINCT n.nspname::text, c.relname::text
  FROM unnest(%(relations)s::text[]) AS r(name) JOIN pg_class c ON c.oid = to_regclass(r.name)
  JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE NOT has_table_privilege(c.oid, 'SELECT')
 ORDER BY 1, 2
"""


def unreadable_relations(
    conn: psycopg.Connection[Any], query: str, kinds: tuple[type, ...]
) -> list[tuple[str, str]]:
    """The relations `query` reads that the review's role may not SELECT: EXPLAIN needs that
    privilege (`permission denied for table`), and `GRANT SELECT ON` each (or pg_read_all_data)
    gives it."""
    names, _why = _parsed(query, kinds)
    if names is None:
        return []
    relations = sorted(
        ".".join(quote_ident(p) for p in n) for n in names.relations if n[-1] not in names.ctes
    )
    return [(row[0], row[1]) for row in fetch(conn, _UNREADABLE_SQL, {"relations": relations})[1]]


def generic_plan(
    conn: psycopg.Connection[Any], query: str, server_version_num: int, kinds: tuple[type, ...]
) -> dict[str, Any]:
    """The root node of the statement's generic plan (EXPLAIN FORMAT JSON), valid for texts with or without $n.

    Planned with pg_catalog alone on the search_path and the statement's relations qualified (see
    `unplannable`). PostgreSQL 16+ plans it with EXPLAIN (GENERIC_PLAN). Before 16, as Dexter does:
    PREPARE, force the generic plan, EXPLAIN EXECUTE with NULL for every parameter (the generic plan
    does not look at the values), DEALLOCATE. Raises Unplannable for a text the guard refuses (and
    for a call pg_catalog has no version of, naming the definitions elsewhere), and the server's
    error (psycopg.Error) when it cannot plan the statement.
    """
    names, why = _parsed(query, kinds)
    if names is None:
        raise Unplannable(why)
    found = _foreign_code(conn, names, namesakes=False)
    if found:
        raise Unplannable(f"{FOREIGN_CODE}: {found}")
    pinned = _qualified_relations(conn, query, names)
    try:
        with _catalog_search_path(conn):
            if server_version_num >= 160000:
                plan: list[dict[str, dict[str, Any]]] = scalar(
                    conn, f"EXPLAIN (GENERIC_PLAN, FORMAT JSON) {pinned}"
                )
            else:
                plan = _prepared_generic_plan(conn, pinned)
    except errors.UndefinedFunction as exc:  # functions and operators alike (42883)
        elsewhere = _foreign_code(conn, names, namesakes=True)
        if not elsewhere:
            raise
        raise Unplannable(
            f"{FOREIGN_CODE}: {first_line(exc)} in pg_catalog; defined outside it: {elsewhere}"
        ) from None
    return plan[0]["Plan"]


def _qualified_relations(conn: psycopg.Connection[Any], query: str, names: _Names) -> str:
    """`query` with each unqualified relation name prefixed by the schema it resolves to in the
    review's session (a WITH item's name is left alone, and so is a name nothing resolves: the
    server then says it does not exist). Spliced at the parser's offsets: the rest of the text is
    planned as it was written."""
    wanted = sorted({name for _, name in names.unqualified if name not in names.ctes})
    if not wanted:
        return query
    schemas = dict(fetch(conn, _SCHEMAS_SQL, {"names": wanted})[1])
    text = query
    for location, name in sorted(names.unqualified, reverse=True):
        if name in schemas and name not in names.ctes:
            text = f"{text[:location]}{quote_ident(schemas[name])}.{text[location:]}"
    return text


@contextmanager
def _catalog_search_path(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """One transaction whose search_path is pg_catalog alone (SET LOCAL ends with it)."""
    with conn.transaction():
        execute(conn, "SET LOCAL search_path = pg_catalog")
        yield


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
        # PostgreSQL keeps a prepared statement past a rollback, but psycopg's rollback sends DEALLOCATE
        # ALL when it holds automatic prepared statements of its own (a query run prepare_threshold
        # times on this connection): after a refused EXPLAIN the name may be gone already.
        if prepared and scalar(conn, _PREPARED_ALIVE_SQL, [name]):
            execute(conn, f"DEALLOCATE {name}")


_PREPARED_ALIVE_SQL = "SELECT EXISTS (SELECT 1 FROM pg_prepared_statements WHERE name = %s)"
