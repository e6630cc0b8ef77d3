"""Extractor operators: the probe (the brief) and the collectors of a sampled window.

Counters (pg_stat_*) are sampled at the start and the end of the window and landed with
`<counter>_delta` columns, so checks judge what happened during the review, not since a reset
that may be months old. Statistics are never reset.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from dbcrew.models import Brief, Role
from operators.registry import Observation, OperatorContext, OperatorMisfit, operator
from operators.sql import fetch, land

PROBE_SQL = """
SELECT current_setting('server_version') AS server_version,
       current_setting('server_version_num')::int AS server_version_num,
       current_database() AS database,
       current_user AS current_user,
       pg_database_size(current_database()) AS database_size_bytes,
       (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
           AND n.nspname NOT LIKE 'pg_toast%') AS table_count,
       (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE c.relkind = 'i' AND n.nspname NOT IN ('pg_catalog', 'information_schema')
           AND n.nspname NOT LIKE 'pg_toast%') AS index_count,
       pg_is_in_recovery() AS in_recovery,
       (SELECT coalesce(array_agg(extname::text ORDER BY extname), '{}') FROM pg_extension) AS extensions,
       CASE WHEN pg_has_role(current_user, 'pg_read_all_settings', 'USAGE')
            THEN current_setting('shared_preload_libraries') END AS preloaded,
       (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS is_superuser,
       pg_has_role(current_user, 'pg_read_all_stats', 'USAGE') AS can_read_all_stats,
       pg_has_role(current_user, 'pg_read_all_settings', 'USAGE') AS can_read_all_settings,
       current_setting('max_connections')::int AS max_connections,
       current_setting('track_io_timing') = 'on' AS track_io_timing,
       CASE WHEN has_function_privilege('pg_control_system()', 'EXECUTE')
            THEN (SELECT system_identifier::text FROM pg_control_system()) END AS system_identifier
"""


def probe(ctx: OperatorContext) -> Brief:
    """Read the target's version, size, extensions and the review role's privileges into a brief."""
    with ctx.target.session() as conn:
        row = conn.execute(PROBE_SQL).fetchone()
    assert row is not None
    raw = row.pop("preloaded")
    # NULL: the role may not read the setting; the statements collector then finds out at run time.
    preloaded = None if raw is None else [lib.strip() for lib in raw.split(",") if lib.strip()]
    brief = Brief(**row, preloaded_libraries=preloaded)
    if brief.is_superuser:
        brief = brief.model_copy(update={"can_read_all_stats": True, "can_read_all_settings": True})
    ctx.workspace.put_observation("brief", brief.model_dump())
    return brief


# -- counter views sampled over the window ------------------------------------------------------


@dataclass(frozen=True)
class CounterView:
    table: str
    sql: str
    keys: tuple[str, ...]
    counters: tuple[str, ...]


DATABASE_STATS = CounterView(
    table="database_stats",
    sql="""
SELECT datname::text, numbackends, xact_commit, xact_rollback, blks_read, blks_hit,
       tup_returned, tup_fetched, tup_inserted, tup_updated, tup_deleted,
       conflicts, temp_files, temp_bytes, deadlocks, blk_read_time::float8, blk_write_time::float8,
       stats_reset, extract(epoch FROM now() - coalesce(stats_reset, pg_postmaster_start_time()))::float8
         AS stats_age_seconds
FROM pg_stat_database WHERE datname = current_database()
""",
    keys=("datname",),
    counters=(
        "xact_commit", "xact_rollback", "blks_read", "blks_hit", "tup_returned", "tup_fetched",
        "tup_inserted", "tup_updated", "tup_deleted", "conflicts", "temp_files", "temp_bytes",
        "deadlocks", "blk_read_time", "blk_write_time",
    ),
)

# One query for PostgreSQL 17+ (pg_stat_checkpointer) and one for older servers (pg_stat_bgwriter).
CHECKPOINTER_SQL_17 = "SELECT 'checkpointer'::text AS source, num_timed::bigint AS timed, num_requested::bigint AS requested FROM pg_stat_checkpointer"
CHECKPOINTER_SQL_OLD = "SELECT 'bgwriter'::text AS source, checkpoints_timed::bigint AS timed, checkpoints_req::bigint AS requested FROM pg_stat_bgwriter"

TABLE_COLUMNS = """
SELECT s.relid, s.schemaname::text, s.relname::text, s.seq_scan, s.seq_tup_read,
       coalesce(s.idx_scan, 0) AS idx_scan, coalesce(s.idx_tup_fetch, 0) AS idx_tup_fetch,
       s.n_tup_ins, s.n_tup_upd, s.n_tup_del, s.n_tup_hot_upd, s.n_live_tup, s.n_dead_tup,
       s.n_mod_since_analyze, s.last_vacuum, s.last_autovacuum, s.last_analyze, s.last_autoanalyze,
       extract(epoch FROM now() - greatest(s.last_analyze, s.last_autoanalyze))::float8 AS analyzed_seconds_ago,
       s.vacuum_count, s.autovacuum_count, s.analyze_count, s.autoanalyze_count,
       c.reltuples::float8 AS reltuples, c.relpages::bigint AS relpages,
       pg_total_relation_size(c.oid) AS total_bytes, pg_relation_size(c.oid) AS table_bytes,
       array_to_string(c.reloptions, ',') AS reloptions,
       EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conrelid = c.oid AND k.contype = 'p') AS has_primary_key,
       c.relkind::text AS relkind
FROM {view} s JOIN pg_class c ON c.oid = s.relid
"""

TABLE_STATS = CounterView(
    table="table_stats",
    sql=TABLE_COLUMNS.format(view="pg_stat_user_tables"),
    keys=("relid",),
    counters=("seq_scan", "seq_tup_read", "idx_scan", "idx_tup_fetch", "n_tup_ins", "n_tup_upd", "n_tup_del", "n_tup_hot_upd"),
)
# pg_stat_user_tables is a filter over pg_stat_all_tables; a managed service that hides the view
# still answers the underlying one.
TABLE_STATS_ALL = CounterView(
    table="table_stats",
    sql=TABLE_COLUMNS.format(view="pg_stat_all_tables")
    + " WHERE s.schemaname NOT IN ('pg_catalog', 'information_schema') AND s.schemaname !~ '^pg_toast'",
    keys=TABLE_STATS.keys,
    counters=TABLE_STATS.counters,
)

INDEX_STATS = CounterView(
    table="index_stats",
    sql="""
SELECT s.indexrelid, s.relid, s.schemaname::text, s.relname::text, s.indexrelname::text,
       s.idx_scan, s.idx_tup_read, s.idx_tup_fetch,
       pg_relation_size(s.indexrelid) AS index_bytes,
       i.indisunique, i.indisprimary, i.indisvalid, i.indisready, i.indisexclusion,
       i.indkey::text AS indkey, i.indclass::text AS indclass, i.indcollation::text AS indcollation,
       i.indoption::text AS indoption, i.indnkeyatts::int AS key_columns,
       coalesce(pg_get_expr(i.indexprs, i.indrelid), '') AS expressions,
       coalesce(pg_get_expr(i.indpred, i.indrelid), '') AS predicate,
       am.amname::text AS method,
       pg_get_indexdef(s.indexrelid) AS indexdef,
       (SELECT string_agg(a.attname::text, ',' ORDER BY k.ord)
          FROM unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
          JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
         WHERE k.ord <= i.indnkeyatts) AS column_names,
       EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = s.indexrelid AND k.contype IN ('p', 'u', 'x'))
         AS backs_constraint
FROM pg_stat_user_indexes s
JOIN pg_index i ON i.indexrelid = s.indexrelid
JOIN pg_class ic ON ic.oid = s.indexrelid
JOIN pg_am am ON am.oid = ic.relam
""",
    keys=("indexrelid",),
    counters=("idx_scan", "idx_tup_read", "idx_tup_fetch"),
)

STATEMENTS = CounterView(
    table="statements",
    sql="""
SELECT s.queryid, s.userid, s.toplevel, left(s.query, 2000) AS query, s.calls,
       s.total_exec_time::float8 AS total_exec_time, s.rows,
       s.shared_blks_hit, s.shared_blks_read, s.temp_blks_written
FROM pg_stat_statements s
WHERE s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND s.queryid IS NOT NULL
""",
    keys=("queryid", "userid", "toplevel"),
    counters=("calls", "total_exec_time", "rows", "shared_blks_hit", "shared_blks_read", "temp_blks_written"),
)


class WindowParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    window_seconds: float | None = Field(None, ge=0, description="defaults to the run's window")


def _sample_window(ctx: OperatorContext, view: CounterView, params: WindowParams) -> Observation:
    window = params.window_seconds if params.window_seconds is not None else ctx.settings.window_seconds
    with ctx.target.session() as conn:
        columns, before = fetch(conn, view.sql)
    started = time.monotonic()
    time.sleep(window)
    with ctx.target.session() as conn:
        _, after = fetch(conn, view.sql)
    elapsed = time.monotonic() - started
    return _land_deltas(ctx, view, columns, before, after, elapsed)


def _land_deltas(
    ctx: OperatorContext,
    view: CounterView,
    columns: list[tuple[str, str]],
    before: list[tuple[Any, ...]],
    after: list[tuple[Any, ...]],
    elapsed: float,
) -> Observation:
    names = [c for c, _ in columns]
    key_idx = [names.index(k) for k in view.keys]
    counter_idx = [names.index(c) for c in view.counters]
    first = {tuple(row[i] for i in key_idx): row for row in before}
    delta_columns = [(f"{c}_delta", "DOUBLE") for c in view.counters]
    rows = []
    for row in after:
        old = first.get(tuple(row[i] for i in key_idx))
        # An object created during the window started from zero.
        deltas = [float(row[i] or 0) - float((old[i] if old else 0) or 0) for i in counter_idx]
        rows.append((*row, *deltas, elapsed))
    count = land(ctx.workspace, view.table, [*columns, *delta_columns, ("window_seconds", "DOUBLE")], rows)
    return Observation(summary=f"{view.table}: {count} rows over a {elapsed:.1f}s window", artifacts=[view.table])


@operator(role=Role.EXTRACTOR, category="collect", produces=("database_stats", "checkpointer"))
def collect_database_stats(ctx: OperatorContext, params: WindowParams) -> Observation:
    """Sample pg_stat_database (this database) and the checkpointer counters over the window."""
    server = ctx.brief.server_version_num if ctx.brief else 170000
    checkpointer = CounterView(
        table="checkpointer",
        sql=CHECKPOINTER_SQL_17 if server >= 170000 else CHECKPOINTER_SQL_OLD,
        keys=("source",),
        counters=("timed", "requested"),
    )
    window = params.window_seconds if params.window_seconds is not None else ctx.settings.window_seconds
    with ctx.target.session() as conn:
        db_cols, db_before = fetch(conn, DATABASE_STATS.sql)
        cp_cols, cp_before = fetch(conn, checkpointer.sql)
    started = time.monotonic()
    time.sleep(window)
    with ctx.target.session() as conn:
        _, db_after = fetch(conn, DATABASE_STATS.sql)
        _, cp_after = fetch(conn, checkpointer.sql)
    elapsed = time.monotonic() - started
    _land_deltas(ctx, checkpointer, cp_cols, cp_before, cp_after, elapsed)
    obs = _land_deltas(ctx, DATABASE_STATS, db_cols, db_before, db_after, elapsed)
    return obs.model_copy(update={"artifacts": ["database_stats", "checkpointer"]})


@operator(role=Role.EXTRACTOR, category="collect", produces=("table_stats",))
def collect_table_stats(ctx: OperatorContext, params: WindowParams) -> Observation:
    """Sample pg_stat_user_tables with sizes, reloptions and primary keys over the window."""
    return _sample_window(ctx, TABLE_STATS, params)


@operator(role=Role.EXTRACTOR, category="collect", produces=("table_stats",), equivalent_of="collect_table_stats")
def collect_table_stats_all(ctx: OperatorContext, params: WindowParams) -> Observation:
    """Same as collect_table_stats, read from pg_stat_all_tables (for servers that hide the user view)."""
    return _sample_window(ctx, TABLE_STATS_ALL, params)


@operator(role=Role.EXTRACTOR, category="collect", produces=("index_stats",))
def collect_index_stats(ctx: OperatorContext, params: WindowParams) -> Observation:
    """Sample pg_stat_user_indexes with definitions (columns, opclasses, predicate, method) over the window."""
    return _sample_window(ctx, INDEX_STATS, params)


@operator(role=Role.EXTRACTOR, category="collect", produces=("statements",), requires=("pg_stat_statements",))
def collect_statements(ctx: OperatorContext, params: WindowParams) -> Observation:
    """Sample pg_stat_statements for this database over the window (needs the extension preloaded)."""
    if ctx.brief is not None and not ctx.brief.has_statements:
        raise OperatorMisfit("pg_stat_statements is not installed and preloaded on this target")
    return _sample_window(ctx, STATEMENTS, params)


ACTIVITY_SQL = """
SELECT %(sample)s::int AS sample_no, clock_timestamp() AS sampled_at,
       a.pid, a.datname::text, a.usename::text, a.application_name, a.backend_type, a.state,
       a.wait_event_type, a.wait_event,
       extract(epoch FROM clock_timestamp() - a.xact_start)::float8 AS xact_seconds,
       extract(epoch FROM clock_timestamp() - a.query_start)::float8 AS query_seconds,
       extract(epoch FROM clock_timestamp() - a.state_change)::float8 AS state_seconds,
       left(a.query, 500) AS query,
       array_to_string(pg_blocking_pids(a.pid), ',') AS blocked_by
FROM pg_stat_activity a
WHERE a.pid <> pg_backend_pid() AND coalesce(a.application_name, '') <> 'dbcrew'
  AND (a.datname = current_database() OR a.datname IS NULL)
"""

CONNECTIONS_SQL = """
SELECT %(sample)s::int AS sample_no, count(*)::bigint AS connections,
       current_setting('max_connections')::bigint AS max_connections,
       current_setting('superuser_reserved_connections')::bigint AS reserved
FROM pg_stat_activity WHERE backend_type = 'client backend'
"""


class ActivityParams(WindowParams):
    samples: int | None = Field(None, ge=1, le=60)


@operator(role=Role.EXTRACTOR, category="collect", produces=("activity", "connections"))
def collect_activity(ctx: OperatorContext, params: ActivityParams) -> Observation:
    """Sample pg_stat_activity (sessions, waits, blockers) several times across the window."""
    window = params.window_seconds if params.window_seconds is not None else ctx.settings.window_seconds
    samples = params.samples or ctx.settings.activity_samples
    pause = window / max(samples - 1, 1)
    activity_rows: list[tuple[Any, ...]] = []
    connection_rows: list[tuple[Any, ...]] = []
    act_cols: list[tuple[str, str]] = []
    conn_cols: list[tuple[str, str]] = []
    with ctx.target.session() as conn:
        for sample in range(samples):
            if sample:
                time.sleep(pause)
            act_cols, rows = fetch(conn, ACTIVITY_SQL, {"sample": sample})
            activity_rows.extend(rows)
            conn_cols, rows = fetch(conn, CONNECTIONS_SQL, {"sample": sample})
            connection_rows.extend(rows)
    land(ctx.workspace, "activity", act_cols, activity_rows)
    land(ctx.workspace, "connections", conn_cols, connection_rows)
    return Observation(
        summary=f"activity: {len(activity_rows)} session rows in {samples} samples",
        artifacts=["activity", "connections"],
    )


SETTINGS_SQL = """
SELECT name, setting, unit, source, boot_val, reset_val, context, vartype
FROM pg_settings
"""


@operator(role=Role.EXTRACTOR, category="collect", produces=("settings",))
def collect_settings(ctx: OperatorContext) -> Observation:
    """Read pg_settings (values the role may not read show as hidden, and are left out)."""
    with ctx.target.session() as conn:
        columns, rows = fetch(conn, SETTINGS_SQL)
    count = land(ctx.workspace, "settings", columns, rows)
    return Observation(summary=f"settings: {count} rows", artifacts=["settings"])


FOREIGN_KEYS_SQL = """
SELECT k.oid AS constraint_oid, k.conname::text, n.nspname::text AS schemaname, c.relname::text,
       k.conrelid AS relid,
       (SELECT string_agg(a.attname::text, ',' ORDER BY u.ord)
          FROM unnest(k.conkey) WITH ORDINALITY AS u(attnum, ord)
          JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = u.attnum) AS column_names,
       rn.nspname::text || '.' || rc.relname::text AS referenced
FROM pg_constraint k
JOIN pg_class c ON c.oid = k.conrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_class rc ON rc.oid = k.confrelid
JOIN pg_namespace rn ON rn.oid = rc.relnamespace
WHERE k.contype = 'f' AND n.nspname NOT IN ('pg_catalog', 'information_schema')
"""

SEQUENCES_SQL = """
SELECT s.schemaname::text, s.sequencename::text, s.data_type::text, s.last_value, s.increment_by,
       -- A bigint sequence feeding an integer column runs out at the column's maximum (PgHero's trap).
       least(s.max_value, CASE a.atttypid WHEN 'int2'::regtype THEN 32767 WHEN 'int4'::regtype THEN 2147483647
                                          ELSE s.max_value END) AS max_value,
       coalesce(a.atttypid::regtype::text, '') AS column_type,
       -- last_value is NULL both for a never-used sequence and for one this role may not read.
       (has_sequence_privilege(c.oid, 'SELECT,USAGE') AND s.last_value IS NULL) AS never_used
FROM pg_sequences s
JOIN pg_namespace n ON n.nspname = s.schemaname
JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = s.sequencename
LEFT JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid
     AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i') AND d.refobjsubid > 0
LEFT JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
"""

WRAPAROUND_SQL = """
SELECT 'database'::text AS scope, datname::text AS name,
       age(datfrozenxid)::bigint AS xid_age, mxid_age(datminmxid)::bigint AS mxid_age
FROM pg_database WHERE datallowconn
UNION ALL
SELECT * FROM (
  -- A table is as old as the older of itself and its TOAST table (PgHero); only rows past a
  -- threshold, capped, so 10,000 young tables cost nothing.
  SELECT 'table'::text, n.nspname::text || '.' || c.relname::text,
         greatest(age(c.relfrozenxid), age(t.relfrozenxid))::bigint AS xid_age,
         greatest(mxid_age(c.relminmxid), mxid_age(t.relminmxid))::bigint AS mxid_age
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  LEFT JOIN pg_class t ON t.oid = c.reltoastrelid
  WHERE c.relkind IN ('r', 'm') AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname !~ '^pg_toast'
    AND (greatest(age(c.relfrozenxid), age(t.relfrozenxid)) >= %(xid_floor)s
         OR greatest(mxid_age(c.relminmxid), mxid_age(t.relminmxid)) >= %(mxid_floor)s)
  ORDER BY 3 DESC LIMIT 500) AS old_tables
"""

# Who holds the xmin horizon: vacuum removes no row version and freezes no XID newer than the
# oldest of these. One row per holder; `database` NULL when it holds every database back, `here`
# when it holds the reviewed one, `catalog_only` when it holds only the system catalogs (a
# logical slot's catalog_xmin).
# Walsenders are left to their standby or slot row, autovacuum workers are ignored by the
# horizon, parallel workers share their leader's, and the review's own sessions are short.
XMIN_HORIZON_SQL = """
SELECT h.*, (h.database IS NULL OR h.database = current_database()) AS here FROM (
SELECT 'transaction'::text AS kind, 'pid:' || a.pid AS holder, a.datname::text AS database, false AS catalog_only,
       greatest(age(a.backend_xmin), age(a.backend_xid))::bigint AS xmin_age,
       extract(epoch FROM now() - a.xact_start)::float8 AS held_seconds,
       concat_ws(', ', a.usename::text, nullif(a.application_name, ''), a.state) AS detail
FROM pg_stat_activity a
WHERE (a.backend_xmin IS NOT NULL OR a.backend_xid IS NOT NULL) AND a.pid <> pg_backend_pid()
  AND a.backend_type NOT IN ('walsender', 'autovacuum worker', 'parallel worker')
  AND coalesce(a.application_name, '') <> 'dbcrew'
UNION ALL
SELECT 'prepared_transaction', 'prepared ' || p.gid, p.database::text, false, age(p.transaction)::bigint,
       extract(epoch FROM now() - p.prepared)::float8, 'owner ' || p.owner::text
FROM pg_prepared_xacts p
UNION ALL
SELECT 'replication_slot', 'slot ' || s.slot_name, NULL, s.xmin IS NULL,
       greatest(age(s.xmin), age(s.catalog_xmin))::bigint, NULL,
       concat_ws(', ', s.slot_type::text || coalesce(' (' || s.plugin::text || ')', ''),
                 CASE WHEN s.active THEN 'active' ELSE 'inactive' END,
                 'consumer ' || nullif(r.application_name, ''))
FROM pg_replication_slots s LEFT JOIN pg_stat_replication r ON r.pid = s.active_pid
WHERE s.xmin IS NOT NULL OR s.catalog_xmin IS NOT NULL
UNION ALL
SELECT 'standby', 'replica ' || coalesce(r.application_name, '') || coalesce('@' || host(r.client_addr), ''), NULL, false,
       age(r.backend_xmin)::bigint, NULL, concat_ws(', ', r.state::text, 'hot_standby_feedback')
FROM pg_stat_replication r
WHERE r.backend_xmin IS NOT NULL) AS h
"""


@operator(role=Role.EXTRACTOR, category="collect", produces=("foreign_keys", "sequences", "wraparound", "xmin_horizon"))
def collect_schema(ctx: OperatorContext) -> Observation:
    """Read foreign keys, sequences, transaction-ID ages (database and table level) and who holds the xmin horizon."""
    artifacts = ["foreign_keys", "sequences", "wraparound", "xmin_horizon"]
    with ctx.target.session() as conn:
        t = ctx.settings.thresholds
        floors = {"xid_floor": t.xid_warning_age, "mxid_floor": t.mxid_warning_age}
        for table, sql, args in (("foreign_keys", FOREIGN_KEYS_SQL, None), ("sequences", SEQUENCES_SQL, None),
                                 ("wraparound", WRAPAROUND_SQL, floors), ("xmin_horizon", XMIN_HORIZON_SQL, None)):
            columns, rows = fetch(conn, sql, args)
            land(ctx.workspace, table, columns, rows)
    return Observation(summary="schema: foreign keys, sequences, wraparound ages, xmin horizon holders", artifacts=artifacts)
