"""The window's metrics as one catalogue: each series' name, unit, the incident detector's floor and its Prometheus source.

A window's series are keyed by name ("act.wait_lock", "db.xact_commit"): the live readers
(readers.py) write them, the Prometheus steps (prometheus/steps.py) write the same names from the
exporters' series, and the incident detector (incidents.py) judges some of them against a floor
in their unit. Each of those used to spell the names and the scales itself; here each metric is
declared once, and the detector's floors and the Prometheus mapping are read from it.

The catalogue starts with the metrics the detector and the Prometheus source share, and the live
readers' session and host gauges; the database counters' rates (`db.<column>`) follow
DATABASE_STATS's counters, one entry each. What is not here yet: the I/O, WAL and checkpoint
counters the live readers name by their view ("io.", "wal.", "checkpoint."), and the names the
diagnosis experts read (dbcrew/operators/diagnose/experts.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

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
VACUUM = Metric("act.vacuum", Unit.SESSIONS)
IDLE_BETWEEN = Metric("act.idle_between", Unit.SESSIONS)
SESSION_GAUGES = (  # what one session sample gives (readers.py's ActivityTally), 0 when no session counts in it
    ACTIVE,
    ON_CPU,
    WAIT_WAL_FLUSH,
    WAIT_LOCK,
    WAIT_IO,
    WAIT_LWLOCK,
    VACUUM,
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

# The server's own processes (a local target's, psutil) and its WAL and statements: live readings only.
WAL_BYTES = Metric("wal.wal_bytes", Unit.BYTES_PER_SECOND, 5 * MIB)
PG_CPU = Metric("pg.cpu_cores", Unit.CORES, 0.2)
PG_PRIVATE_MEMORY = Metric("pg.private_mem_gb", Unit.GIB, 0.25)
STATEMENT_TIME = Metric(
    "stmt.exec_time", Unit.MS_PER_SECOND, 250.0
)  # a quarter of a session kept busy

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
    DATABASE_RATES["blks_read"],
    PG_CPU,
    PG_PRIVATE_MEMORY,
    STATEMENT_TIME,
    VACUUM,
    IDLE_BETWEEN,
    *(m for c, m in DATABASE_RATES.items() if c not in DATABASE_FLOORS),
    HOST_CPU_BUSY,
    HOST_IOWAIT,
    HOST_LOAD1,
    HOST_MEMORY_AVAILABLE,
    HOST_SWAP_USED,
    HOST_SWAP_IO,
)


def floors() -> dict[str, float]:
    """The detector's signals: each watched metric's name and floor, in the catalogue's order."""
    return {m.name: m.floor for m in METRICS if m.floor is not None}


def read_by_prometheus(read: PromRead) -> list[Metric]:
    """The metrics a pass from Prometheus gets from one exporter series read as `read`."""
    return [m for m in METRICS if m.prometheus is not None and m.prometheus.read is read]
