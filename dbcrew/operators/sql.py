"""Running catalogue SQL on a target and landing the rows, typed, in the workspace."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import psycopg
from pglast.keywords import RESERVED_KEYWORDS, TYPE_FUNC_NAME_KEYWORDS
from psycopg.abc import Params
from psycopg.rows import tuple_row

from dbcrew.artifacts import Artifact
from dbcrew.workspace import PG_TYPE_TO_DUCKDB, Workspace


def fetch(
    conn: psycopg.Connection[Any], sql: str, params: Params | None = None
) -> tuple[list[tuple[str, str]], list[tuple[Any, ...]]]:
    """Rows as tuples plus (column, DuckDB type) pairs taken from the result's type OIDs."""
    with conn.cursor(row_factory=tuple_row) as cur:
        cur.execute(sql, params)
        columns = [
            (d.name, PG_TYPE_TO_DUCKDB.get(d.type_code, "VARCHAR")) for d in cur.description or []
        ]
        rows = cur.fetchall()
    return columns, [tuple(_plain(v) for v in row) for row in rows]


def scalar(conn: psycopg.Connection[Any], sql: str, params: Params | None = None) -> Any:
    """The first column of the one row `sql` returns, whatever the connection's row factory."""
    with conn.cursor(row_factory=tuple_row) as cur:
        row = cur.execute(sql, params).fetchone()
    assert row is not None, sql
    return row[0]


def execute(conn: psycopg.Connection[Any], sql: str, params: Params | None = None) -> None:
    """Run a statement whose result nobody reads (SET, PREPARE, a hypopg call)."""
    with conn.cursor() as cur:
        cur.execute(sql, params)


def _plain(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value)
    return value


def land(
    ws: Workspace, table: Artifact, columns: list[tuple[str, str]], rows: list[tuple[Any, ...]]
) -> int:
    """Land `rows` as the workspace table of the artifact `table` (replacing it); the row count."""
    return ws.write_table(table, columns, rows)


def name_list(landed: str | None) -> list[str]:
    """Column names landed as a JSON array (json_agg): a name may hold any character, a comma too."""
    return [str(name) for name in json.loads(landed)] if landed else []


def name_list_text(names: Sequence[str]) -> str:
    """The landed form of a list of column names, read back by `name_list`."""
    return json.dumps(names, ensure_ascii=False)


def quote_ident(name: str) -> str:
    """Quote an identifier the way PostgreSQL's quote_ident does, for generated fix SQL."""
    plain = (
        name
        and (name[0].isalpha() or name[0] == "_")
        and all(c.islower() or c.isdigit() or c == "_" for c in name)
    )
    if plain and name not in RESERVED_KEYWORDS and name not in TYPE_FUNC_NAME_KEYWORDS:
        return name
    return '"' + name.replace('"', '""') + '"'


def quote_literal(value: str) -> str:
    """A string literal for generated fix SQL (standard_conforming_strings: only quotes double)."""
    return "'" + value.replace("'", "''") + "'"


def qualified(schema: str, name: str) -> str:
    return f"{quote_ident(schema)}.{quote_ident(name)}"
