"""The window's metrics as one catalogue: each series' name, unit, the incident detector's floor and its Prometheus source.

A window's series are keyed by name ("act.wait_lock", "db.xact_commit"): the live readers
(readers.py) write them, the Prometheus steps (prometheus/steps.py) write the same names from the
exporters' series, and the incident detector (incidents.py) judges some of them against a floor
in their unit. Each of those used to spell the names and the scales itself; here each metric is
declared once, and the detector's floors and the Prometheus mapping are read from it.

Every series a window holds is here: the metrics the detector and the Prometheus source share,
the live readers' session and host gauges, the database counters' rates (`db.<column>`, one entry
per DATABASE_STATS column) and the counters the live readers name by their view (pg_stat_wal's
`wal.`, pg_stat_io's `io.<object>.`, the checkpointer's `checkpoint.`, vacuum's `vacuum.`). The
rest of the package names a metric by its constant here, never by its text (tests/unit/
test_typed_names.py scans for it): a misspelt constant fails the import, where a misspelt name
was an empty series at run time. Names still travel as text (a window's series, the store, a
report, the knowledge files); `parse` turns such a name back into its metric and refuses an
unknown one. A `Family` names the metrics that share a prefix (an expert is called in by any
counter of pg_stat_io's WAL row).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from dbcrew.errors import DbcrewError
from dbcrew.operators.stat_views import DATABASE_STATS


class Unit(StrEnum):
    """What one value of a metric counts (a floor is in the same unit)."""

    SESSIONS = "sessions"  # in one sample of pg_stat_activity
    PER_SECOND = "per second"  # a counter's rate: commits, rows, blocks, files
    MS_PER_SECOND = "ms per second"  # time a counter accumulates, per second of the window
    BYTES_PER_SECOND = "bytes per second"
    MIB_PER_SECOND = "MiB per second"
    PERCENT = "percent"  # of the host's CPU time
    RUNNABLE = "runnable processes"  # the load average
    GIB = "GiB"
    CORES = "cores"  # CPU seconds per second
    EPOCH_SECONDS = "epoch seconds"  # a moment, not a rate (the server's start)


class PromRead(StrEnum):
    """How a pass's value is made from the exporter's series (prometheus/steps.py)."""

    RATE = "rate"  # a counter: its increase over the step, per second
    GAUGE = "gauge"  # its value at the step, times `scale`
    DERIVED = (
        "derived"  # computed from this series with others (CPU modes, wait events, session states)
    )


@dataclass(frozen=True)
class PromSource:
    """Where a metric comes from in Prometheus (postgres_exporter 0.11, node_exporter 1.5, dbcrew's queries file)."""

    series: str
    read: PromRead
    scale: float = 1.0


@dataclass(frozen=True)
class Metric:
    """One series of a window: its name, unit, the detector's floor (the smallest deviation that counts as
    one standard deviation, its unit's noise; None: the detector does not watch it) and its Prometheus source
    (None: only a live reading has it)."""

    name: str
    unit: Unit
    floor: float | None = None
    prometheus: PromSource | None = None


DATABASE_SERIES = "pg_stat_database_"  # postgres_exporter: pg_stat_database_<column>
ACTIVITY_SERIES = "pg_stat_activity_count"  # postgres_exporter: {state} sessions of the database
WAITS_SERIES = "dbcrew_activity_sessions"  # dbcrew's queries file: {wait_event_type, wait_event}
CPU_SERIES = "node_cpu_seconds_total"  # summed by mode
MIB = 2.0**20
GIB = 2.0**30


def _waits() -> PromSource:
    return PromSource(WAITS_SERIES, PromRead.DERIVED)


# Sessions (pg_stat_activity samples; from Prometheus, dbcrew's queries file).
ACTIVE = Metric("act.active", Unit.SESSIONS, 1.0, _waits())
ON_CPU = Metric("act.on_cpu", Unit.SESSIONS, 1.0, _waits())
WAIT_LOCK = Metric("act.wait_lock", Unit.SESSIONS, 1.0, _waits())
WAIT_IO = Metric("act.wait_io", Unit.SESSIONS, 1.0, _waits())
WAIT_LWLOCK = Metric("act.wait_lwlock", Unit.SESSIONS, 1.0, _waits())
WAIT_WAL_FLUSH = Metric("act.wait_wal_flush", Unit.SESSIONS, 1.0, _waits())
IDLE_IN_XACT = Metric(
    "act.idle_in_xact", Unit.SESSIONS, 1.0, PromSource(ACTIVITY_SERIES, PromRead.DERIVED)
)
VACUUM_SESSIONS = Metric("act.vacuum", Unit.SESSIONS)
IDLE_BETWEEN = Metric("act.idle_between", Unit.SESSIONS)
SESSION_GAUGES = (  # what one session sample gives (readers.py's ActivityTally), 0 when no session counts in it
    ACTIVE,
    ON_CPU,
    WAIT_WAL_FLUSH,
    WAIT_LOCK,
    WAIT_IO,
    WAIT_LWLOCK,
    VACUUM_SESSIONS,
    IDLE_IN_XACT,
    IDLE_BETWEEN,
)

# The database counters' rates (DATABASE_STATS, the watcher's; from Prometheus, pg_stat_database_<column>).
# The detector's floors: a few commits, rows or blocks a second are any load's noise.
DATABASE_FLOORS: dict[str, float] = {
    "xact_commit": 50.0,
    "xact_rollback": 10.0,
    "tup_inserted": 5_000.0,
    "tup_updated": 2_000.0,
    "tup_deleted": 2_000.0,
    "tup_fetched": 50_000.0,
    "tup_returned": 100_000.0,
    "temp_bytes": 10 * MIB,
    "blks_read": 1_000.0,
}
DATABASE_UNITS: dict[str, Unit] = {
    "temp_bytes": Unit.BYTES_PER_SECOND,
    "blk_read_time": Unit.MS_PER_SECOND,
    "blk_write_time": Unit.MS_PER_SECOND,
}
DATABASE_RATES: dict[str, Metric] = {
    column: Metric(
        f"db.{column}",
        DATABASE_UNITS.get(column, Unit.PER_SECOND),
        DATABASE_FLOORS.get(column),
        PromSource(f"{DATABASE_SERIES}{column}", PromRead.RATE),
    )
    for column in DATABASE_STATS.counters
}
COMMITS = DATABASE_RATES["xact_commit"]
BLOCKS_READ = DATABASE_RATES["blks_read"]
BLOCKS_HIT = DATABASE_RATES["blks_hit"]
ROWS_RETURNED = DATABASE_RATES["tup_returned"]
ROWS_FETCHED = DATABASE_RATES["tup_fetched"]
ROWS_INSERTED = DATABASE_RATES["tup_inserted"]
ROWS_UPDATED = DATABASE_RATES["tup_updated"]
ROWS_DELETED = DATABASE_RATES["tup_deleted"]
TEMP_BYTES = DATABASE_RATES["temp_bytes"]
DEADLOCKS = DATABASE_RATES["deadlocks"]
BLOCK_READ_TIME = DATABASE_RATES["blk_read_time"]
BLOCK_WRITE_TIME = DATABASE_RATES["blk_write_time"]
# Read with the database counters, not a rate: a change of it between two reads is a restart (no rate spans it).
SERVER_STARTED = Metric("db.server_started", Unit.EPOCH_SECONDS)
DATABASE_COUNTERS: dict[str, Metric] = {  # every column read_counters reads of DATABASE_STATS
    **DATABASE_RATES,
    "server_started": SERVER_STARTED,
}

# The server's own processes (a local target's, psutil) and its WAL and statements: live readings only.
WAL_BYTES = Metric("wal.wal_bytes", Unit.BYTES_PER_SECOND, 5 * MIB)
WAL_RECORDS = Metric("wal.wal_records", Unit.PER_SECOND)
WAL_RATES: dict[str, Metric] = {  # pg_stat_wal's counters (PostgreSQL 14 on), by column
    "wal_records": WAL_RECORDS,
    "wal_fpi": Metric("wal.wal_fpi", Unit.PER_SECOND),
    "wal_bytes": WAL_BYTES,
    "wal_buffers_full": Metric("wal.wal_buffers_full", Unit.PER_SECOND),
}
PG_CPU = Metric("pg.cpu_cores", Unit.CORES, 0.2)
PG_PRIVATE_MEMORY = Metric("pg.private_mem_gb", Unit.GIB, 0.25)
STATEMENT_TIME = Metric(
    "stmt.exec_time", Unit.MS_PER_SECOND, 250.0
)  # a quarter of a session kept busy

# pg_stat_io (PostgreSQL 16 on), summed by object ("temp relation" as temp_relation; "wal" from 18): operations
# and the milliseconds spent in them, per second. A column or an object is read only where a metric here names
# it (`io_metric`): one a later PostgreSQL adds is not read until it is declared.
IO_OBJECTS = ("relation", "temp_relation", "wal")
IO_OPERATIONS = ("reads", "writes", "extends", "fsyncs")
IO_TIMES = ("read_time", "write_time", "fsync_time")
IO_RATES: dict[tuple[str, str], Metric] = {
    (obj, column): Metric(
        f"io.{obj}.{column}", Unit.MS_PER_SECOND if column in IO_TIMES else Unit.PER_SECOND
    )
    for obj in IO_OBJECTS
    for column in (*IO_OPERATIONS, *IO_TIMES)
}
RELATION_READS = IO_RATES["relation", "reads"]
RELATION_WRITES = IO_RATES["relation", "writes"]
RELATION_EXTENDS = IO_RATES["relation", "extends"]
RELATION_READ_TIME = IO_RATES["relation", "read_time"]
WAL_FSYNCS = IO_RATES["wal", "fsyncs"]
WAL_FSYNC_TIME = IO_RATES["wal", "fsync_time"]

# The checkpointer's counters (pg_stat_checkpointer from 17, pg_stat_bgwriter before: the same columns).
CHECKPOINT_RATES: dict[str, Metric] = {
    column: Metric(f"checkpoint.{column}", Unit.PER_SECOND)
    for column in ("timed", "requested", "buffers_written")
}

# Vacuum's work: heap blocks its workers scanned (pg_stat_progress_vacuum) and the buffers it read or hit
# (pg_stat_io's vacuum context, 16 on).
VACUUM_SCANNED = Metric("vacuum.heap_blks_scanned", Unit.PER_SECOND)
VACUUM_BUFFERS = Metric("vacuum.buffers", Unit.PER_SECOND)

# The host (psutil for a local target; from Prometheus, node_exporter). Not watched by the detector: the host's
# busy and iowait shares move with whatever else it runs (incidents.py).
HOST_CPU_BUSY = Metric(
    "host.cpu_busy", Unit.PERCENT, prometheus=PromSource(CPU_SERIES, PromRead.DERIVED)
)
HOST_IOWAIT = Metric(
    "host.iowait", Unit.PERCENT, prometheus=PromSource(CPU_SERIES, PromRead.DERIVED)
)
HOST_LOAD1 = Metric(
    "host.load1", Unit.RUNNABLE, prometheus=PromSource("node_load1", PromRead.GAUGE)
)
HOST_MEMORY_AVAILABLE = Metric(
    "host.mem_available_gb",
    Unit.GIB,
    prometheus=PromSource("node_memory_MemAvailable_bytes", PromRead.GAUGE, 1 / GIB),
)
HOST_SWAP_USED = Metric(
    "host.swap_used_gb",
    Unit.GIB,
    prometheus=PromSource("node_memory_SwapTotal_bytes", PromRead.DERIVED),  # less SwapFree
)
HOST_SWAP_IO = Metric(
    "host.swap_io_mb",
    Unit.MIB_PER_SECOND,
    prometheus=PromSource("node_vmstat_pswpin", PromRead.DERIVED),  # and pswpout, in pages
)

# In the detector's order (incidents.py's SIGNALS): sessions, the database's rates, the server's.
METRICS: tuple[Metric, ...] = (
    ACTIVE,
    ON_CPU,
    WAIT_LOCK,
    WAIT_IO,
    WAIT_LWLOCK,
    WAIT_WAL_FLUSH,
    IDLE_IN_XACT,
    *(DATABASE_RATES[c] for c in ("xact_commit", "xact_rollback", "tup_inserted", "tup_updated")),
    *(DATABASE_RATES[c] for c in ("tup_deleted", "tup_fetched", "tup_returned", "temp_bytes")),
    WAL_BYTES,
    BLOCKS_READ,
    PG_CPU,
    PG_PRIVATE_MEMORY,
    STATEMENT_TIME,
    VACUUM_SESSIONS,
    IDLE_BETWEEN,
    *(m for c, m in DATABASE_RATES.items() if c not in DATABASE_FLOORS),
    HOST_CPU_BUSY,
    HOST_IOWAIT,
    HOST_LOAD1,
    HOST_MEMORY_AVAILABLE,
    HOST_SWAP_USED,
    HOST_SWAP_IO,
    SERVER_STARTED,
    *(m for m in WAL_RATES.values() if m is not WAL_BYTES),
    *IO_RATES.values(),
    *CHECKPOINT_RATES.values(),
    VACUUM_SCANNED,
    VACUUM_BUFFERS,
)
BY_NAME: dict[str, Metric] = {m.name: m for m in METRICS}
KINDS = tuple(dict.fromkeys(m.name.split(".", 1)[0] for m in METRICS))  # "act", "db", "wal", ...
# What a metric's name (or a family's prefix) looks like: a kind, a dot, lower-case words. Text of that
# shape names a metric whatever else it could be, so it must be one of the catalogue's (knowledge files,
# tests/unit/test_typed_names.py's scan of the package).
NAME_SHAPE = re.compile(rf"(?:{'|'.join(KINDS)})\.[a-z0-9_.]*")


def looks_like_a_metric(text: str) -> bool:
    return NAME_SHAPE.fullmatch(text) is not None


class UnknownMetric(DbcrewError, ValueError):
    """A metric name that is not in the catalogue (a misspelt name in a file, a store or a request)."""


def parse(name: str) -> Metric:
    """The catalogue's metric named `name` (a name that travelled as text); an unknown one is refused, with
    the known names of its kind."""
    found = BY_NAME.get(name)
    if found is None:
        kind = name.split(".", 1)[0]
        known = [m.name for m in METRICS if m.name.startswith(f"{kind}.")] or list(BY_NAME)
        raise UnknownMetric(f"unknown metric {name!r}: the catalogue's are {', '.join(known)}")
    return found


@dataclass(frozen=True)
class Family:
    """The metrics whose names start with `name` (a view's counters: "io.wal." is pg_stat_io's WAL row): where
    any of them calls an expert in. Declared here only, so that each has members (`family` checks)."""

    name: str

    def members(self) -> tuple[Metric, ...]:
        return tuple(m for m in METRICS if m.name.startswith(self.name))


def family(prefix: str) -> Family:
    declared = Family(prefix)
    if not declared.members():
        raise ValueError(f"the metric family {prefix!r} has no metric in the catalogue")
    return declared


# The prefixes the causes' experts are called in by (`DeclaredCause.signals`); the planner's catalogue shows
# them as written here (an expert operator's `signals`).
ROW_RATES = family("db.tup_")  # rows returned, fetched, inserted, updated, deleted
WAL_STATS = family("wal.")
IO_STATS = family("io.")
WAL_IO = family("io.wal.")
CHECKPOINTS = family("checkpoint.")
VACUUM_WORK = family("vacuum.")
MEMORY_AVAILABLE = family("host.mem_available")
SWAP = family("host.swap")
PRIVATE_MEMORY = family("pg.private_mem")


def io_metric(obj: str, column: str) -> Metric | None:
    """The catalogue's metric of pg_stat_io's `column` summed over `obj` (a row of readers.py's IO_SQL); None
    where it declares none: that counter is not read."""
    return BY_NAME.get(f"io.{obj}.{column}")


def floors() -> dict[str, float]:
    """The detector's signals: each watched metric's name and floor, in the catalogue's order."""
    return {m.name: m.floor for m in METRICS if m.floor is not None}


def read_by_prometheus(read: PromRead) -> list[Metric]:
    """The metrics a pass from Prometheus gets from one exporter series read as `read`."""
    return [m for m in METRICS if m.prometheus is not None and m.prometheus.read is read]
