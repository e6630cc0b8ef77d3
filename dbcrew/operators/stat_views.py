"""The statistics views (pg_stat_*) the health review and the diagnosis both read, written once.

Cumulative counters: the health collectors (dbcrew/operators/collect/window.py) read them at the start
and the end of the review's window and land `<counter>_delta` columns; the window's readers
(dbcrew/operators/window/readers.py) read the same counters at every tick and turn them into
per-second rates. A `CounterView` names a view's identity columns (`keys`, to pair the rows of
two readings) and its cumulative `counters` (what a delta or a rate is taken of).

Sessions (pg_stat_activity): both sample `SESSIONS_SQL` several times across the window, the
health review for how long sessions stay in a state, the diagnosis for what active ones wait on and
where their time goes. One read of pg_locks per sample (not one per waiting session) names the
relation of the lock each waiting session waits for (a row lock's waiter waits on the holder's
transaction id, which names none: the diagnosis then takes the statement's table).

Each view's SQL has its row model beside it (`<View>Row`): the columns the SQL returns, as the
health workspace lands them; the window adds a `<counter>_delta` per changed column and
`window_seconds`, which checks read through models of their own queries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from dbcrew.artifacts import Artifact, declare
from dbcrew.targets import OWN_STATEMENT_MARKER


def counted_since(before: Sequence[float], after: Sequence[float]) -> tuple[list[float], bool]:
    """One row's counters over an interval, and whether they were reset in it.

    Cumulative counters only grow, unless something resets them between the readings: a crash
    restart, `pg_stat_reset()`, `pg_stat_statements_reset()`, an evicted statement entry. Then the
    end reads lower than the start, and a difference would be a negative rate. What the reset
    counters counted since is all that is known of the interval: those are the deltas (a lower bound).
    """
    deltas = [a - b for b, a in zip(before, after, strict=True)]
    if any(d < 0 for d in deltas):
        return list(after), True
    return deltas, False


def reset_between(before: Mapping[str, float], after: Mapping[str, float]) -> bool:
    """Whether any counter two readings share went backwards (see `counted_since`)."""
    return any(after[k] < v for k, v in before.items() if k in after)


@dataclass(frozen=True)
class CounterView:
    """One statistics view: the workspace table it lands in, its identity columns and its cumulative counters."""

    table: Artifact
    sql: str
    keys: tuple[str, ...]
    counters: tuple[str, ...]
    relations: tuple[
        str, ...
    ] = ()  # oid columns of relations it locks to read: the SQL leaves out %(held)s (dbcrew/operators/held.py)
    markers: tuple[
        str, ...
    ] = ()  # values that are not counters but whose change over the window is landed (`<name>_delta`)
    held: Artifact | None = (
        None  # with relations: the table listing the relation oids the reading left out (one `relid` column)
    )
    reset_by: str = "a crash restart or pg_stat_reset"  # what sets its counters back (`counted_since`), as a report says it

    def __post_init__(self) -> None:
        if bool(self.relations) != (self.held is not None):
            raise ValueError(
                f"view {self.table}: a view reading relations declares its held table, and only one does"
            )

    @property
    def changes(self) -> tuple[str, ...]:
        """Every column landed with a `_delta`: the counters, then the markers."""
        return self.counters + self.markers

    def left_out(self, held: frozenset[int], row: dict[str, Any]) -> bool:
        """Whether `row` is of a relation held by another session (left out of the window's deltas)."""
        return any(row[column] in held for column in self.relations)


DATABASE_STATS = CounterView(
    table=declare("database_stats"),
    sql="""
SELECT datname::text, numbackends, xact_commit, xact_rollback, blks_read, blks_hit,
       tup_returned, tup_fetched, tup_inserted, tup_updated, tup_deleted,
       conflicts, temp_files, temp_bytes, deadlocks, blk_read_time::float8, blk_write_time::float8,
       stats_reset, extract(epoch FROM now() - coalesce(stats_reset, pg_postmaster_start_time()))::float8
         AS stats_age_seconds,
       extract(epoch FROM pg_postmaster_start_time())::float8 AS server_started
FROM pg_stat_database WHERE datname = current_database()
""",
    keys=("datname",),
    counters=(
        "xact_commit",
        "xact_rollback",
        "blks_read",
        "blks_hit",
        "tup_returned",
        "tup_fetched",
        "tup_inserted",
        "tup_updated",
        "tup_deleted",
        "conflicts",
        "temp_files",
        "temp_bytes",
        "deadlocks",
        "blk_read_time",
        "blk_write_time",
    ),
    # Its delta is not 0 when the server restarted during the window (dbcrew/operators/checks/database.py); a reset of the
    # counters alone (pg_stat_reset) leaves it 0.
    markers=("server_started",),
)


@dataclass(frozen=True, slots=True)
class DatabaseStatsRow:
    """A row of `database_stats` (DATABASE_STATS): this database's counters; `server_started` in epoch seconds."""

    datname: str
    numbackends: int
    xact_commit: int
    xact_rollback: int
    blks_read: int
    blks_hit: int
    tup_returned: int
    tup_fetched: int
    tup_inserted: int
    tup_updated: int
    tup_deleted: int
    conflicts: int
    temp_files: int
    temp_bytes: int
    deadlocks: int
    blk_read_time: float
    blk_write_time: float
    stats_reset: datetime | None
    stats_age_seconds: float
    server_started: float


# One query for PostgreSQL 17+ (pg_stat_checkpointer) and one for older servers (pg_stat_bgwriter).
# Both also read how many checkpoints WAL can have requested at most (`wal_checkpoints_max`). The
# server requests one when a WAL segment ends max_wal_size / (1 + checkpoint_completion_target),
# less a segment, at least one segment, past the last checkpoint's start; N such checkpoints need N
# times that much WAL. Every other requested checkpoint (CHECKPOINT, a shutdown or restart, CREATE
# or DROP DATABASE, a base backup) is counted alike and says nothing about max_wal_size. The WAL is
# measured by the position in it (segments ended early by pg_switch_wal or archive_timeout count in
# full, as they do for the server), since initdb: at least what was written since the counters
# began, so the bound holds whenever they were reset.
WAL_PER_CHECKPOINT = """greatest(pg_size_bytes(current_setting('max_wal_size')) / (1 + current_setting('checkpoint_completion_target')::float8)
         - pg_size_bytes(current_setting('wal_segment_size')), pg_size_bytes(current_setting('wal_segment_size')))"""
WAL_CHECKPOINTS_MAX = (
    "floor(pg_wal_lsn_diff(CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END,"
    f" '0/0')::float8 / {WAL_PER_CHECKPOINT})::bigint AS wal_checkpoints_max"
)
CHECKPOINTER_SQL_17 = (
    "SELECT 'checkpointer'::text AS source, num_timed::bigint AS timed, num_requested::bigint AS requested,"
    f" buffers_written::bigint AS buffers_written, {WAL_CHECKPOINTS_MAX}, stats_reset FROM pg_stat_checkpointer"
)


@dataclass(frozen=True, slots=True)
class CheckpointerRow:
    """A row of `checkpointer` (CHECKPOINTER_SQL_17 or _OLD); `wal_checkpoints_max` None when the WAL position is
    unknown; `stats_reset` when its counters began (initdb, a crash's discard, `pg_stat_reset_shared`)."""

    source: str
    timed: int
    requested: int
    buffers_written: int
    wal_checkpoints_max: int | None
    stats_reset: datetime | None = None


CHECKPOINTER_SQL_OLD = (
    "SELECT 'bgwriter'::text AS source, checkpoints_timed::bigint AS timed, checkpoints_req::bigint AS requested,"
    f" buffers_checkpoint::bigint AS buffers_written, {WAL_CHECKPOINTS_MAX}, stats_reset FROM pg_stat_bgwriter"
)


CHECKPOINTER_TABLE = declare("checkpointer")


def checkpointer(server_version_num: int) -> CounterView:
    """The checkpoint counters: pg_stat_checkpointer from PostgreSQL 17, pg_stat_bgwriter before."""
    return CounterView(
        table=CHECKPOINTER_TABLE,
        sql=CHECKPOINTER_SQL_17 if server_version_num >= 170000 else CHECKPOINTER_SQL_OLD,
        keys=("source",),
        counters=("timed", "requested", "buffers_written"),
    )


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
       c.relkind::text AS relkind,
       (SELECT count(*) FROM pg_index i WHERE i.indrelid = s.relid)::int AS index_count
FROM {view} s JOIN pg_class c ON c.oid = s.relid
WHERE s.relid <> ALL(%(held)s::oid[])
"""


@dataclass(frozen=True, slots=True)
class TableStatsRow:
    """A row of `table_stats` (TABLE_COLUMNS): a table's counters with what ANALYZE left in pg_class.

    `reltuples` is the planner's row count (-1: never analyzed or vacuumed); `analyzed_seconds_ago`
    is None when never analyzed.
    """

    relid: int
    schemaname: str
    relname: str
    seq_scan: int
    seq_tup_read: int
    idx_scan: int
    idx_tup_fetch: int
    n_tup_ins: int
    n_tup_upd: int
    n_tup_del: int
    n_tup_hot_upd: int
    n_live_tup: int
    n_dead_tup: int
    n_mod_since_analyze: int
    last_vacuum: datetime | None
    last_autovacuum: datetime | None
    last_analyze: datetime | None
    last_autoanalyze: datetime | None
    analyzed_seconds_ago: float | None
    vacuum_count: int
    autovacuum_count: int
    analyze_count: int
    autoanalyze_count: int
    reltuples: float
    relpages: int
    total_bytes: int
    table_bytes: int
    reloptions: str | None
    has_primary_key: bool
    relkind: str
    index_count: int


TABLE_STATS = CounterView(
    table=declare("table_stats"),
    sql=TABLE_COLUMNS.format(view="pg_stat_user_tables"),
    keys=("relid",),
    counters=(
        "seq_scan",
        "seq_tup_read",
        "idx_scan",
        "idx_tup_fetch",
        "n_tup_ins",
        "n_tup_upd",
        "n_tup_del",
        "n_tup_hot_upd",
    ),
    relations=("relid",),
    held=declare("table_stats_held"),
)
# pg_stat_user_tables is a filter over pg_stat_all_tables; a managed service that hides the view
# still answers the underlying one.
TABLE_STATS_ALL = CounterView(
    table=TABLE_STATS.table,
    sql=TABLE_COLUMNS.format(view="pg_stat_all_tables")
    + " AND s.schemaname NOT IN ('pg_catalog', 'information_schema') AND s.schemaname !~ '^pg_toast'",
    keys=TABLE_STATS.keys,
    counters=TABLE_STATS.counters,
    relations=TABLE_STATS.relations,
    held=TABLE_STATS.held,
)

INDEX_STATS = CounterView(
    table=declare("index_stats"),
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
       (SELECT json_agg(a.attname::text ORDER BY k.ord)::text
          FROM unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
          JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
         WHERE k.ord <= i.indnkeyatts) AS column_names,
       EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = s.indexrelid AND k.contype IN ('p', 'u', 'x'))
         AS backs_constraint
FROM pg_stat_user_indexes s
JOIN pg_index i ON i.indexrelid = s.indexrelid
JOIN pg_class ic ON ic.oid = s.indexrelid
JOIN pg_am am ON am.oid = ic.relam
WHERE s.indexrelid <> ALL(%(held)s::oid[]) AND s.relid <> ALL(%(held)s::oid[])
""",
    keys=("indexrelid",),
    counters=("idx_scan", "idx_tup_read", "idx_tup_fetch"),
    relations=("indexrelid", "relid"),
    held=declare("index_stats_held"),
)


@dataclass(frozen=True, slots=True)
class IndexStatsRow:
    """A row of `index_stats` (INDEX_STATS): an index's scans with its definition; `column_names` a JSON array
    of its key columns (None for an expression-only index), `indclass` its opclass OIDs separated by spaces."""

    indexrelid: int
    relid: int
    schemaname: str
    relname: str
    indexrelname: str
    idx_scan: int
    idx_tup_read: int
    idx_tup_fetch: int
    index_bytes: int
    indisunique: bool
    indisprimary: bool
    indisvalid: bool
    indisready: bool
    indisexclusion: bool
    indkey: str
    indclass: str
    indcollation: str
    indoption: str
    key_columns: int
    expressions: str
    predicate: str
    method: str
    indexdef: str
    column_names: str | None
    backs_constraint: bool


# `own`: a statement a review session sent (dbcrew.targets.OWN_STATEMENT_MARKER ends its text),
# judged on the whole text before it is cut.
STATEMENTS = CounterView(
    table=declare("statements"),
    sql=f"""
SELECT s.queryid, s.userid, s.toplevel, left(s.query, 2000) AS query,
       right(s.query, {len(OWN_STATEMENT_MARKER)}) = '{OWN_STATEMENT_MARKER}' AS own, s.calls,
       s.total_exec_time::float8 AS total_exec_time, s.rows,
       s.shared_blks_hit, s.shared_blks_read, s.temp_blks_written
FROM pg_stat_statements s
WHERE s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND s.queryid IS NOT NULL
""",
    keys=("queryid", "userid", "toplevel"),
    counters=(
        "calls",
        "total_exec_time",
        "rows",
        "shared_blks_hit",
        "shared_blks_read",
        "temp_blks_written",
    ),
    # Busy servers evict the least-used entries when pg_stat_statements.max is reached: an entry seen again started anew.
    reset_by="entries evicted (pg_stat_statements.max) or reset",
)


@dataclass(frozen=True, slots=True)
class StatementRow:
    """A row of `statements` (STATEMENTS): one pg_stat_statements entry of this database, its text cut at 2,000 characters."""

    queryid: int
    userid: int
    toplevel: bool
    query: str
    own: bool
    calls: int
    total_exec_time: float
    rows: int
    shared_blks_hit: int
    shared_blks_read: int
    temp_blks_written: int


# This database's sessions (and the cluster's background processes), except the review's own,
# recognised by backend PID (`own`: dbcrew.targets.own_pids), never by a name others can take.
# `query_chars` bounds the text: the health review quotes it, the diagnosis EXPLAINs it.
# The lock table (pg_locks) is read only when a sampled session waits on a lock: reading it takes every lock
# partition's lock and copies every backend's locks, 0.4 of a sample's 1.4 ms of a backend's CPU on a server of
# 300 sessions with none waiting (docs/bench.md). The EXISTS is a one-time filter: false, pg_locks is not read.
# The sessions are pg_stat_activity's rows (the same function, the same privileges: another role's query is
# '<insufficient privilege>' to a role without pg_read_all_stats), built only for this database's backends and the
# background processes (no database: dbid 0), which the backend id set names by their database first. The view builds
# every backend's row, text and joins before any filter: on a server of 250 databases, each with a watcher's
# session, a sample cost its backend 1.2 ms that way and 0.3 ms this way (docs/bench.md); a watcher samples its
# every target several times a minute. The review's own sessions are left out of these few rows, not of all of them.
SESSIONS_SQL = """
WITH a AS MATERIALIZED (
    SELECT d.datname, pg_get_userbyid(s.usesysid) AS usename, s.*
    FROM (
        SELECT pg_stat_get_backend_pid(id) AS pid FROM pg_stat_get_backend_idset() id
        WHERE pg_stat_get_backend_dbid(id) IN (0, (SELECT oid FROM pg_database WHERE datname = current_database()))
          AND pg_stat_get_backend_pid(id) IS NOT NULL  -- a NULL pid would ask for every backend's row
    ) b
    CROSS JOIN LATERAL pg_stat_get_activity(b.pid) s
    LEFT JOIN pg_database d ON d.oid = s.datid
)
SELECT %(sample)s::int AS sample_no, clock_timestamp() AS sampled_at,
       a.pid, a.datname::text, a.usename::text, a.application_name, a.backend_type, a.state,
       a.wait_event_type, a.wait_event,
       extract(epoch FROM clock_timestamp() - a.xact_start)::float8 AS xact_seconds,
       extract(epoch FROM clock_timestamp() - a.query_start)::float8 AS query_seconds,
       extract(epoch FROM clock_timestamp() - a.state_change)::float8 AS state_seconds,
       left(a.query, %(query_chars)s::int) AS query,
       CASE WHEN a.wait_event_type = 'Lock' OR a.wait_event = 'SafeSnapshot'
            THEN array_to_string(pg_blocking_pids(a.pid), ',') ELSE '' END AS blocked_by,
       w.relation AS lock_relation
FROM a
LEFT JOIN (
    SELECT DISTINCT ON (l.pid) l.pid, n.nspname || '.' || c.relname AS relation
    FROM pg_locks l JOIN pg_class c ON c.oid = l.relation JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE NOT l.granted AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND EXISTS (SELECT 1 FROM a waiting WHERE waiting.wait_event_type = 'Lock')
    ORDER BY l.pid
) w ON w.pid = a.pid
WHERE a.pid <> ALL(%(own)s::int[])
"""


@dataclass(frozen=True, slots=True)
class SessionRow:
    """A row of `activity` (SESSIONS_SQL): one session in one sample; ages in seconds, None when not in that state."""

    sample_no: int
    sampled_at: datetime
    pid: int
    datname: str | None
    usename: str | None
    application_name: str | None
    backend_type: str | None
    state: str | None
    wait_event_type: str | None
    wait_event: str | None
    xact_seconds: float | None
    query_seconds: float | None
    state_seconds: float | None
    query: str | None
    blocked_by: str
    lock_relation: (
        str | None
    )  # the relation of the lock the session waits for, when that lock names one
