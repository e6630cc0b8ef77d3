"""Planning text read from the target: the statement guard and the one generic-plan EXPLAIN.

Statement texts come from pg_stat_statements (normalised, with $1, $2 ... for constants) and from
pg_stat_activity (literal). They are data: PostgreSQL's own parser (pglast) decides whether a text
is exactly one statement of the kinds a caller may plan before anything reaches the server, and
the statement is planned, never executed (no EXPLAIN ANALYZE). The index advisor (hypothetical
indexes) and the diagnosis's statement analysis both plan through `generic_plan`.
"""

from __future__ import annotations

import itertools
from typing import Any

import psycopg
from pglast import parse_sql
from pglast.parser import ParseError

from operators.sql import execute, scalar


class Unplannable(ValueError):
    """The text is not exactly one statement of the kinds the caller may plan (the message says why)."""


def unplannable(query: str, kinds: tuple[type, ...]) -> str | None:
    """Why `query` is not exactly one statement of `kinds` (None when it is).

    The guard in front of every EXPLAIN of text read from the target: a statement can never
    smuggle a second one or a utility command.
    """
    try:
        parsed = parse_sql(query)
    except ParseError as exc:
        return f"not parsable: {exc}"
    if len(parsed) != 1:
        return f"{len(parsed)} statements in one text"
    stmt = parsed[0].stmt
    if not isinstance(stmt, kinds):
        return f"utility statement ({type(stmt).__name__}) has no plan"
    return None


def generic_plan(conn: psycopg.Connection[Any], query: str, server_version_num: int, kinds: tuple[type, ...]) -> dict[str, Any]:
    """The root node of the statement's generic plan (EXPLAIN FORMAT JSON), valid for texts with or without $n.

    PostgreSQL 16+ plans it with EXPLAIN (GENERIC_PLAN). Before 16, as Dexter does: PREPARE, force
    the generic plan, EXPLAIN EXECUTE with NULL for every parameter (the generic plan does not look
    at the values), DEALLOCATE. Raises Unplannable for a text outside `kinds`, and the server's
    error (psycopg.Error) when it cannot plan the statement.
    """
    why = unplannable(query, kinds)
    if why is not None:
        raise Unplannable(why)
    if server_version_num >= 160000:
        plan = scalar(conn, f"EXPLAIN (GENERIC_PLAN, FORMAT JSON) {query}")
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
            params = scalar(conn, "SELECT cardinality(parameter_types) FROM pg_prepared_statements WHERE name = %s", [name])
            args = f"({', '.join(['NULL'] * params)})" if params else ""
            return scalar(conn, f"EXPLAIN (FORMAT JSON) EXECUTE {name}{args}")
    finally:
        if prepared:  # prepared statements outlive the transaction, even a rolled-back one
            execute(conn, f"DEALLOCATE {name}")
