"""Running catalogue SQL on a target and landing the rows, typed, in the workspace."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from pglast import ast, parse_sql
from pglast.keywords import RESERVED_KEYWORDS, TYPE_FUNC_NAME_KEYWORDS
from pglast.parser import ParseError
from pglast.visitors import Visitor

from dbcrew.workspace import PG_TYPE_TO_DUCKDB, Workspace


def fetch(conn: psycopg.Connection[Any], sql: str, params: Sequence[Any] | None = None) -> tuple[list[tuple[str, str]], list[tuple[Any, ...]]]:
    """Rows as tuples plus (column, DuckDB type) pairs taken from the result's type OIDs."""
    with conn.cursor(row_factory=psycopg.rows.tuple_row) as cur:
        cur.execute(sql, params)  # type: ignore[arg-type]
        columns = [(d.name, PG_TYPE_TO_DUCKDB.get(d.type_code, "VARCHAR")) for d in cur.description or []]
        rows = cur.fetchall()
    return columns, [tuple(_plain(v) for v in row) for row in rows]


def _plain(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value)
    return value


def land(ws: Workspace, name: str, columns: list[tuple[str, str]], rows: list[tuple[Any, ...]]) -> int:
    return ws.write_table(name, columns, rows)


def quote_ident(name: str) -> str:
    """Quote an identifier the way PostgreSQL's quote_ident does, for generated fix SQL."""
    plain = name and (name[0].isalpha() or name[0] == "_") and all(c.islower() or c.isdigit() or c == "_" for c in name)
    if plain and name not in RESERVED_KEYWORDS and name not in TYPE_FUNC_NAME_KEYWORDS:
        return name
    return '"' + name.replace('"', '""') + '"'


def quote_literal(value: str) -> str:
    """A string literal for generated fix SQL (standard_conforming_strings: only quotes double)."""
    return "'" + value.replace("'", "''") + "'"


def qualified(schema: str, name: str) -> str:
    return f"{quote_ident(schema)}.{quote_ident(name)}"


FOREIGN_CODE = "calls code outside pg_catalog"


@dataclass
class _Names(Visitor):  # type: ignore[misc]
    """The functions, operators, types and relations a statement names (qualified or not)."""

    functions: set[tuple[str, ...]] = field(default_factory=set)
    operators: set[tuple[str, ...]] = field(default_factory=set)
    types: set[tuple[str, ...]] = field(default_factory=set)
    relations: set[tuple[str, ...]] = field(default_factory=set)

    def visit_FuncCall(self, _ancestors: Any, node: ast.FuncCall) -> None:
        self.functions.add(tuple(n.sval for n in node.funcname))

    def visit_A_Expr(self, _ancestors: Any, node: ast.A_Expr) -> None:
        name = tuple(n.sval for n in node.name)
        # BETWEEN and its kin are spelled as keywords but planned as the comparison operators.
        self.operators.update({("<=",), (">=",)} if "BETWEEN" in name[-1] else {name})

    def visit_TypeName(self, _ancestors: Any, node: ast.TypeName) -> None:
        self.types.add(tuple(n.sval for n in node.names))

    def visit_RangeVar(self, _ancestors: Any, node: ast.RangeVar) -> None:
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


def _parsed(query: str, kinds: tuple[type, ...]) -> tuple[Any, str | None]:
    """The statement of `query` and what is wrong with its text alone (None when nothing)."""
    try:
        parsed = parse_sql(query)
    except ParseError as exc:
        return None, f"not parsable: {exc}"
    if len(parsed) != 1:
        return None, f"{len(parsed)} statements in one text"
    stmt = parsed[0].stmt
    if not isinstance(stmt, kinds):
        return None, f"utility statement ({type(stmt).__name__}) has no plan"
    names = _Names()
    names(stmt)
    for kind, found in (("function", names.functions), ("operator", names.operators), ("type", names.types)):
        outside = sorted(".".join(n) for n in found if len(n) > 1 and n[0] != "pg_catalog")
        if outside:
            return None, f"{FOREIGN_CODE}: {kind} {outside[0]}"
    return names, None


def refused_text(query: str, kinds: tuple[type, ...]) -> str | None:
    """Why the text alone already rules `query` out of an EXPLAIN (None when it does not)."""
    return _parsed(query, kinds)[1]


def unplannable(conn: psycopg.Connection[Any], query: str, kinds: tuple[type, ...]) -> str | None:
    """Why `query` may not be explained (None when it may): the guard in front of every EXPLAIN
    of text read from the target.

    PostgreSQL's own parser (pglast) decides that the text is exactly one statement of `kinds`, so
    it can never smuggle a second one or a utility command. Planning is not harmless either: the
    planner folds IMMUTABLE functions with constant arguments, so `EXPLAIN ... WHERE id = evil()`
    runs `evil()` with the review's privileges. Only code from pg_catalog may be planned: every
    function, operator and type the statement names must be pg_catalog's (qualified, or unqualified
    with no namesake elsewhere in the database, which an overload could make win), and no relation
    may bring code the text does not show (a view's definition, a row-level security policy).
    """
    names, why = _parsed(query, kinds)
    if why is not None:
        return why
    with conn.cursor(row_factory=psycopg.rows.tuple_row) as cur:
        row = cur.execute(_FOREIGN_SQL, {
            "functions": sorted(n[-1] for n in names.functions), "operators": sorted(n[-1] for n in names.operators),
            "types": sorted(n[-1] for n in names.types), "relations": sorted(".".join(quote_ident(p) for p in n) for n in names.relations),
        }).fetchone()
    return f"{FOREIGN_CODE}: {row[0]}" if row else None
