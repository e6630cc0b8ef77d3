"""Small read-only look-ups an instance question needs (DQA's tools): sizes, columns, indexes, settings, activity.

Each look-up is a registered operator of the ask and MCP surfaces (dbcrew/operators/registry.py), called
with an open read-only session: fixed catalogue SQL whose names arrive as bound parameters, never
as text spliced into the statement, in the target's read-only session (default_transaction_read_only,
statement_timeout), so nothing a question says can reach the server as SQL. A look-up's Observation
is a one-paragraph summary written from its rows, and the rows; `catalogue_names` gives the slot
filler the tables, indexes and settings a question may name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
from pydantic import BaseModel, Field

from dbcrew.models import Role
from dbcrew.operators.registry import NoParams, Observation, Surface, operator
from dbcrew.operators.sql import fetch
from dbcrew.vocabulary import Category


class TableSlot(NoParams):
    schema_name: str = Field("public", min_length=1)
    table: str = Field(min_length=1)


class IndexSlot(NoParams):
    schema_name: str = Field("public", min_length=1)
    index: str = Field(min_length=1)


class SettingSlot(NoParams):
    name: str = Field(pattern=r"^[a-z_][a-z0-9_.]*$")


class LimitSlot(NoParams):
    limit: int = Field(5, ge=1, le=50)


Rows = list[dict[str, Any]]
LOOKUP = frozenset({Surface.ASK, Surface.MCP})


def look_up(
    conn: psycopg.Connection[Any],
    sql: str,
    slots: BaseModel,
    render: Callable[[BaseModel, Rows], str],
) -> Observation:
    """Run a look-up's fixed SQL with its slots bound and write its one-paragraph summary from the rows."""
    rows = _rows(conn, sql, slots.model_dump())
    return Observation(summary=render(slots, rows), rows=rows)


def _rows(conn: psycopg.Connection[Any], sql: str, params: dict[str, Any]) -> Rows:
    columns, rows = fetch(conn, sql, params)
    names = [c for c, _ in columns]
    return [dict(zip(names, row)) for row in rows]


def qualified(slots: BaseModel) -> str:
    """schema.name of the table or index a look-up's slots name, as its answer spells it."""
    data = slots.model_dump()
    return f"{data['schema_name']}.{data.get('table') or data.get('index')}"


def absent(what: str, slots: BaseModel) -> str:
    """The answer when the named object is not in the catalogue (the slot filler only offers names it
    holds, but a model's call may name any)."""
    return f"{what} {qualified(slots)} does not exist on this database."


# The one table a TableSlot names, as `pg_class c`: appended after a look-up's joins.
TABLE_WHERE = "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %(schema_name)s AND c.relname = %(table)s"

TABLE_SIZE_SQL = f"""
SELECT pg_size_pretty(pg_total_relation_size(c.oid)) AS total, pg_size_pretty(pg_relation_size(c.oid)) AS heap,
       pg_size_pretty(pg_indexes_size(c.oid)) AS indexes, c.reltuples::bigint AS estimated_rows,
       pg_total_relation_size(c.oid) AS total_bytes
FROM pg_class c {TABLE_WHERE}
"""


def _table_size(slots: BaseModel, rows: Rows) -> str:
    if not rows:
        return absent("Table", slots)
    r = rows[0]
    count = (
        f"about {r['estimated_rows']:,} rows (planner estimate)"
        if r["estimated_rows"] >= 0
        else "never analyzed (no row estimate)"
    )
    return (
        f"Table {qualified(slots)} takes {r['total']} in total: {r['heap']} of table data and {r['indexes']} of "
        f"indexes; {count}."
    )


TABLE_COLUMNS_SQL = f"""
SELECT a.attname::text AS name, format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull AS not_null
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid {TABLE_WHERE} AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum
"""


def _table_columns(slots: BaseModel, rows: Rows) -> str:
    if not rows:
        return absent("Table", slots)
    cols = ", ".join(f"{r['name']} {r['type']}{' not null' if r['not_null'] else ''}" for r in rows)
    return f"Table {qualified(slots)} has {len(rows)} columns: {cols}."


TABLE_INDEXES_SQL = f"""
SELECT i.relname::text AS name, pg_get_indexdef(i.oid) AS definition, pg_size_pretty(pg_relation_size(i.oid)) AS size,
       x.indisvalid AS valid, coalesce(s.idx_scan, 0) AS scans
FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid LEFT JOIN pg_stat_user_indexes s ON s.indexrelid = i.oid
JOIN pg_class c ON c.oid = x.indrelid {TABLE_WHERE}
ORDER BY i.relname
"""


def _table_indexes(slots: BaseModel, rows: Rows) -> str:
    if not rows:
        return f"Table {qualified(slots)} has no index (or does not exist)."
    parts = "; ".join(
        f"{r['name']} ({r['size']}, {r['scans']} scans{'' if r['valid'] else ', INVALID'}): {r['definition']}"
        for r in rows
    )
    return f"Table {qualified(slots)} has {len(rows)} indexes: {parts}."


TABLE_STATS_SQL = f"""
SELECT s.n_live_tup AS live, s.n_dead_tup AS dead, s.last_vacuum, s.last_autovacuum, s.last_analyze,
       s.last_autoanalyze, s.vacuum_count + s.autovacuum_count AS vacuums,
       coalesce(array_to_string(c.reloptions, ', '), '') AS options
FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid {TABLE_WHERE}
"""


def when(value: Any) -> str:
    """A timestamp as an answer shows it (to the second), or never."""
    return "never" if value is None else str(value)[:19]


def _table_stats(slots: BaseModel, rows: Rows) -> str:
    if not rows:
        return absent("Table", slots)
    r = rows[0]
    options = f" Storage options: {r['options']}." if r["options"] else ""
    autovacuum = (
        " Autovacuum is disabled on it (autovacuum_enabled=false)."
        if "autovacuum_enabled=false" in r["options"]
        else ""
    )
    return (
        f"Table {qualified(slots)}: {r['live']} live and {r['dead']} dead rows; last vacuum {when(r['last_vacuum'])}, "
        f"last autovacuum {when(r['last_autovacuum'])}, last analyze {when(r['last_analyze'])}, "
        f"last autoanalyze {when(r['last_autoanalyze'])}.{autovacuum}{options}"
    )


INDEX_INFO_SQL = """
SELECT t.relname::text AS table_name, pg_get_indexdef(i.oid) AS definition, pg_size_pretty(pg_relation_size(i.oid)) AS size,
       x.indisvalid AS valid, x.indisunique AS is_unique, coalesce(s.idx_scan, 0) AS scans
FROM pg_class i JOIN pg_namespace n ON n.oid = i.relnamespace JOIN pg_index x ON x.indexrelid = i.oid
JOIN pg_class t ON t.oid = x.indrelid LEFT JOIN pg_stat_user_indexes s ON s.indexrelid = i.oid
WHERE n.nspname = %(schema_name)s AND i.relname = %(index)s
"""


def _index_info(slots: BaseModel, rows: Rows) -> str:
    if not rows:
        return absent("Index", slots)
    r = rows[0]
    state = (
        "valid"
        if r["valid"]
        else "INVALID (a failed CREATE INDEX CONCURRENTLY leaves one behind; it is maintained but never used)"
    )
    return (
        f"Index {qualified(slots)} on table {r['table_name']} takes {r['size']}, has been scanned {r['scans']} times "
        f"and is {state}: {r['definition']}."
    )


SETTING_SQL = """
SELECT name, setting, coalesce(unit, '') AS unit, current_setting(name) AS shown, source, context, short_desc
FROM pg_settings WHERE name = %(name)s
"""


def _setting(slots: BaseModel, rows: Rows) -> str:
    name = slots.model_dump()["name"]
    if not rows:
        return f"There is no setting {name} on this server."
    r = rows[0]
    return (
        f"{name} = {r['shown']} (raw {r['setting']}{' ' + r['unit'] if r['unit'] else ''}; source {r['source']}, "
        f"changed at {r['context']} level): {r['short_desc']}"
    )


ACTIVITY_SQL = """
SELECT coalesce(state, backend_type) AS state, count(*) AS sessions,
       max(extract(epoch FROM now() - coalesce(xact_start, query_start)))::int AS longest_seconds
FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'
GROUP BY 1 ORDER BY 2 DESC
"""


def _activity(_slots: BaseModel, rows: Rows) -> str:
    total = sum(r["sessions"] for r in rows)
    if not total:
        return "No other client session is connected."
    parts = ", ".join(
        f"{r['sessions']} {r['state']} (longest {r['longest_seconds'] or 0} s)" for r in rows
    )
    return f"{total} other client sessions: {parts}."


LOCKS_SQL = """
SELECT a.pid, a.usename::text AS usename, pg_blocking_pids(a.pid) AS blocked_by, l.locktype, l.mode,
       extract(epoch FROM now() - a.query_start)::int AS waiting_seconds
FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid AND NOT l.granted
"""


def _locks(_slots: BaseModel, rows: Rows) -> str:
    if not rows:
        return "0 sessions are waiting on a lock: nothing is blocked."
    parts = "; ".join(
        f"pid {r['pid']} waits {r['waiting_seconds']} s for {r['mode']} on a {r['locktype']}, blocked by {r['blocked_by']}"
        for r in rows
    )
    return f"{len(rows)} sessions are waiting on locks: {parts}."


DATABASE_SIZE_SQL = "SELECT current_database()::text AS name, pg_size_pretty(pg_database_size(current_database())) AS size"


def _database_size(_slots: BaseModel, rows: Rows) -> str:
    return f"Database {rows[0]['name']} takes {rows[0]['size']}."


# The user tables of the catalogue as `pg_class c` joined to `pg_namespace n`.
USER_TABLES = "c.relkind IN ('r', 'p', 'm') AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname !~ '^pg_toast'"
LARGEST_TABLES_SQL = f"""
SELECT n.nspname::text || '.' || c.relname::text AS name, pg_size_pretty(pg_total_relation_size(c.oid)) AS size
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE {USER_TABLES}
ORDER BY pg_total_relation_size(c.oid) DESC, 1 LIMIT %(limit)s
"""


def _largest_tables(_slots: BaseModel, rows: Rows) -> str:
    if not rows:
        return "The database has no table."
    return (
        "Largest tables (total size with indexes and TOAST): "
        + ", ".join(f"{r['name']} {r['size']}" for r in rows)
        + "."
    )


LIST_TABLES_SQL = f"""
SELECT n.nspname::text || '.' || c.relname::text AS name, c.reltuples::bigint AS estimated_rows
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE {USER_TABLES} ORDER BY 1
"""


def _list_tables(_slots: BaseModel, rows: Rows) -> str:
    if not rows:
        return "The database has no table."
    return f"{len(rows)} tables: " + ", ".join(r["name"] for r in rows) + "."


SERVER_VERSION_SQL = (
    "SELECT current_setting('server_version') AS version, version() AS full_version"
)


def _server_version(_slots: BaseModel, rows: Rows) -> str:
    return f"PostgreSQL {rows[0]['version']} ({rows[0]['full_version']})."


EXTENSIONS_SQL = (
    "SELECT extname::text AS name, extversion::text AS version FROM pg_extension ORDER BY 1"
)


def _extensions(_slots: BaseModel, rows: Rows) -> str:
    return (
        f"{len(rows)} extensions installed: "
        + ", ".join(f"{r['name']} {r['version']}" for r in rows)
        + "."
    )


WRAPAROUND_SQL = """
SELECT 'database ' || datname::text AS name, age(datfrozenxid)::bigint AS xid_age FROM pg_database WHERE datname = current_database()
UNION ALL
SELECT * FROM (SELECT n.nspname::text || '.' || c.relname::text, age(c.relfrozenxid)::bigint
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind IN ('r', 'm')
   AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname !~ '^pg_toast'
  ORDER BY 2 DESC, 1 LIMIT 5) AS oldest
"""


def _wraparound(_slots: BaseModel, rows: Rows) -> str:
    database, tables = rows[0], rows[1:]
    oldest = ", ".join(f"{r['name']} {r['xid_age']:,}" for r in tables) or "no table"
    return (
        f"Transaction-ID age of {database['name']}: {database['xid_age']:,} (wraparound protection starts at "
        f"autovacuum_freeze_max_age, 2,000,000,000 is the hard limit). Oldest tables: {oldest}."
    )


@operator(role=Role.EXTRACTOR, category=Category.COLLECT, surfaces=LOOKUP)
def table_size(conn: psycopg.Connection[Any], params: TableSlot) -> Observation:
    """Size of a table, its indexes and its estimated row count."""
    return look_up(conn, TABLE_SIZE_SQL, params, _table_size)


@operator(role=Role.EXTRACTOR, category=Category.COLLECT, surfaces=LOOKUP)
def table_columns(conn: psycopg.Connection[Any], params: TableSlot) -> Observation:
    """Columns of a table with their types."""
    return look_up(conn, TABLE_COLUMNS_SQL, params, _table_columns)


@operator(role=Role.EXTRACTOR, category=Category.COLLECT, surfaces=LOOKUP)
def table_indexes(conn: psycopg.Connection[Any], params: TableSlot) -> Observation:
    """Indexes of a table: definition, size, scans, validity."""
    return look_up(conn, TABLE_INDEXES_SQL, params, _table_indexes)


@operator(role=Role.EXTRACTOR, category=Category.COLLECT, surfaces=LOOKUP)
def table_stats(conn: psycopg.Connection[Any], params: TableSlot) -> Observation:
    """Live and dead rows of a table, its last (auto)vacuum and analyze."""
    return look_up(conn, TABLE_STATS_SQL, params, _table_stats)


@operator(role=Role.EXTRACTOR, category=Category.COLLECT, surfaces=LOOKUP)
def index_info(conn: psycopg.Connection[Any], params: IndexSlot) -> Observation:
    """One index: its table, definition, size, scans, validity."""
    return look_up(conn, INDEX_INFO_SQL, params, _index_info)


@operator(role=Role.EXTRACTOR, category=Category.COLLECT, surfaces=LOOKUP)
def setting(conn: psycopg.Connection[Any], params: SettingSlot) -> Observation:
    """A setting's current value, unit and source."""
    return look_up(conn, SETTING_SQL, params, _setting)


@operator(role=Role.EXTRACTOR, category=Category.COLLECT, surfaces=LOOKUP)
def activity(conn: psycopg.Connection[Any]) -> Observation:
    """Current client sessions by state."""
    return look_up(conn, ACTIVITY_SQL, NoParams(), _activity)


@operator(role=Role.EXTRACTOR, category=Category.COLLECT, surfaces=LOOKUP)
def locks(conn: psycopg.Connection[Any]) -> Observation:
    """Sessions waiting on locks and who blocks them."""
    return look_up(conn, LOCKS_SQL, NoParams(), _locks)


@operator(role=Role.EXTRACTOR, category=Category.COLLECT, surfaces=LOOKUP)
def database_size(conn: psycopg.Connection[Any]) -> Observation:
    """Size of the current database."""
    return look_up(conn, DATABASE_SIZE_SQL, NoParams(), _database_size)


@operator(role=Role.EXTRACTOR, category=Category.COLLECT, surfaces=LOOKUP)
def largest_tables(conn: psycopg.Connection[Any], params: LimitSlot) -> Observation:
    """The largest tables."""
    return look_up(conn, LARGEST_TABLES_SQL, params, _largest_tables)


@operator(role=Role.EXTRACTOR, category=Category.COLLECT, surfaces=LOOKUP)
def list_tables(conn: psycopg.Connection[Any]) -> Observation:
    """Every table of the database."""
    return look_up(conn, LIST_TABLES_SQL, NoParams(), _list_tables)


@operator(role=Role.EXTRACTOR, category=Category.COLLECT, surfaces=LOOKUP)
def server_version(conn: psycopg.Connection[Any]) -> Observation:
    """The server's PostgreSQL version."""
    return look_up(conn, SERVER_VERSION_SQL, NoParams(), _server_version)


@operator(role=Role.EXTRACTOR, category=Category.COLLECT, surfaces=LOOKUP)
def extensions(conn: psycopg.Connection[Any]) -> Observation:
    """Installed extensions and their versions."""
    return look_up(conn, EXTENSIONS_SQL, NoParams(), _extensions)


@operator(role=Role.EXTRACTOR, category=Category.COLLECT, surfaces=LOOKUP)
def wraparound(conn: psycopg.Connection[Any]) -> Observation:
    """Transaction-ID age of the database and its oldest tables."""
    return look_up(conn, WRAPAROUND_SQL, NoParams(), _wraparound)


class CatalogueNames(BaseModel):
    """What a question may name on this database: (schema, name) of tables and indexes, and settings."""

    tables: list[tuple[str, str]]
    indexes: list[tuple[str, str]]
    settings: list[str]


NAMES_SQL = f"""
SELECT CASE WHEN c.relkind = 'i' THEN 'index' ELSE 'table' END AS kind, n.nspname::text AS schema_name, c.relname::text AS name
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE (c.relkind = 'i' OR {USER_TABLES}) AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname !~ '^pg_toast'
ORDER BY 1, 2, 3 LIMIT 20000
"""


def catalogue_names(conn: psycopg.Connection[Any]) -> CatalogueNames:
    rels = _rows(conn, NAMES_SQL, {})
    settings = [r["name"] for r in _rows(conn, "SELECT name FROM pg_settings ORDER BY 1", {})]
    return CatalogueNames(
        tables=[(r["schema_name"], r["name"]) for r in rels if r["kind"] == "table"],
        indexes=[(r["schema_name"], r["name"]) for r in rels if r["kind"] == "index"],
        settings=settings,
    )
