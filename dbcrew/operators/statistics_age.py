"""How old the target's cumulative statistics are, and when they are too young to judge by.

Dead tuples, modifications since the last ANALYZE, scans and row writes are counters that start
from zero when the statistics do. A table holding 60,000 dead tuples reads 0 right after
`pg_stat_reset()`: counters younger than `counters_min_age_seconds` cannot show what is there, so
the checks that judge by them say so (partial) and history does not call their earlier findings
resolved.

When did the counters of this database begin?

- At `pg_stat_database.stats_reset`, when someone reset them (`pg_stat_reset()`).
- Else at the server's start, when the server discarded its statistics then. It does after a crash
  or an immediate shutdown (PostgreSQL 15+ keeps them across a clean restart; 14's collector
  likewise reads them back), and it says so by setting the server-wide statistics' reset time
  (`pg_stat_archiver.stats_reset`) to that start. The very first start of a cluster does the same,
  but there nothing was lost: the counters have counted everything since `initdb`, so a start
  within `FIRST_START_SECONDS` of the cluster's creation (its system identifier holds the `initdb`
  time) is not a discard. A role that may not read the identifier cannot tell the two apart, and
  the start counts as a discard (only ever for `counters_min_age_seconds` after a start).
- Else (never reset, never discarded) they have counted since the database began: complete,
  however fresh the database, and judged normally.

A clean restart keeps the counters but not the cache: shared buffers (and the kernel's page cache
after a host restart) start empty and fill as the workload reads. A server started less than
`server_warm_up_seconds` before the review (or restarted during it) has a cold cache, so what is
judged on what a start empties (the cache hit ratio) is not judged then (`cold_cache`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from dbcrew.models import Brief
from dbcrew.operators.registry import OperatorContext
from dbcrew.operators.stat_views import DATABASE_STATS, DatabaseStatsRow

# The server-wide reset a start without statistics sets is stamped within moments of the start.
DISCARD_SLACK_SECONDS = 60.0
# initdb to the first start: a packaged set-up (a container's entrypoint) runs its init scripts first.
FIRST_START_SECONDS = 600.0
# pg_postmaster_start_time() is one value per server start (to the microsecond): read twice, it differs
# only after a restart, which takes well under a second. The window lands it as epoch seconds (float8).
RESTART_SLACK_SECONDS = 0.001
WINDOW_START_SQL = "SELECT * FROM database_stats"


@dataclass(frozen=True)
class CountersBegan:
    """When this database's counters began counting, why then, and how long before the probe."""

    at: datetime
    cause: str
    seconds: float

    def describe(self) -> str:
        """e.g. `statistics reset 12 s ago at 2026-01-02 03:04:05 UTC`."""
        return f"{self.cause} {self.seconds:.0f} s ago at {self.at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"


def _initdb_at(brief: Brief) -> datetime | None:
    """The cluster's creation: the system identifier's high 32 bits are initdb's clock (seconds)."""
    if brief.system_identifier is None:
        return None
    return datetime.fromtimestamp(int(brief.system_identifier) >> 32, UTC)


def _discarded_at_start(brief: Brief) -> bool:
    started, shared = brief.server_started_at, brief.shared_stats_reset_at
    if started is None or shared is None:
        return False
    if abs((shared - started).total_seconds()) > DISCARD_SLACK_SECONDS:
        return False  # kept across the start (or reset by hand since): not discarded then
    initdb = _initdb_at(brief)
    return initdb is None or (started - initdb).total_seconds() > FIRST_START_SECONDS


def counters_began(brief: Brief) -> CountersBegan | None:
    """When the counters began, when they lost what was counted before (a reset, a discard); None
    when they have counted since the database began (see the module's docstring)."""
    if brief.probed_at is None:
        return None  # a brief from before the probe read the statistics' age
    if brief.stats_reset_at is not None:
        at, cause = brief.stats_reset_at, "statistics reset"
    elif _discarded_at_start(brief):
        assert brief.server_started_at is not None  # checked by _discarded_at_start
        at, cause = brief.server_started_at, "statistics discarded when the server started"
    else:
        return None
    return CountersBegan(at, cause, max((brief.probed_at - at).total_seconds(), 0.0))


def young_shared_counters(
    brief: Brief | None, view: str, reset_at: datetime | None, min_age_seconds: float
) -> str | None:
    """Why a server-wide view's counters (`view`, e.g. the checkpointer's) are too young to judge by,
    or None. They begin at their own `stats_reset`. initdb stamps every server-wide view alike, and
    so does a start without statistics: a stamp equal to the server-wide one
    (`Brief.shared_stats_reset_at`) began with them, complete unless the server discarded them at its
    start (`_discarded_at_start`, as for a database's counters). A stamp of its own is a reset of this
    view alone (`pg_stat_reset_shared`)."""
    if brief is None or brief.probed_at is None or reset_at is None:
        return None
    shared = brief.shared_stats_reset_at
    together = (
        shared is not None and abs((reset_at - shared).total_seconds()) < RESTART_SLACK_SECONDS
    )
    if together and not _discarded_at_start(brief):
        return None
    seconds = max((brief.probed_at - reset_at).total_seconds(), 0.0)
    if seconds >= min_age_seconds:
        return None
    cause = f"{view} statistics " + ("discarded when the server started" if together else "reset")
    return (
        f"{CountersBegan(reset_at, cause, seconds).describe()}: counters younger than"
        f" {min_age_seconds:.0f} s cannot show what is there, and a finding missing now is not resolved"
    )


def young_counters(brief: Brief | None, min_age_seconds: float) -> str | None:
    """Why this database's counters are too young to judge by, or None when they are not."""
    began = None if brief is None else counters_began(brief)
    if began is None or began.seconds >= min_age_seconds:
        return None
    return (
        f"{began.describe()}: counters younger than {min_age_seconds:.0f} s cannot show what is"
        " there, and a finding missing now is not resolved"
    )


def restart_before_window(ctx: OperatorContext) -> str | None:
    """Why the window's counters and cache follow a restart of the server during this run, or None.

    The probe read the server's start at the beginning of the run; the window's readings
    (`database_stats.server_started`) read it again. A later start means the server restarted in
    between: the shared buffers began empty (a cold cache is no verdict on their size), and after a
    crash the counters began again from zero.
    """
    brief = ctx.brief
    if (
        brief is None
        or brief.server_started_at is None
        or not ctx.workspace.has(DATABASE_STATS.table)
    ):
        return None
    probed = brief.server_started_at.timestamp()
    started = max(
        (row.server_started for row in ctx.workspace.rows(DatabaseStatsRow, WINDOW_START_SQL)),
        default=probed,
    )
    if started <= probed + RESTART_SLACK_SECONDS:
        return None
    return (
        f"the server restarted at {datetime.fromtimestamp(started, UTC):%Y-%m-%d %H:%M:%S} UTC, after"
        " the review's probe: its window followed the restart (a cold cache, counters a crash may"
        " have emptied) and is not judged"
    )


def started_seconds_before(brief: Brief | None) -> float | None:
    """How long the server had been up when the probe read it, or None when the brief does not say."""
    if brief is None or brief.probed_at is None or brief.server_started_at is None:
        return None
    return max((brief.probed_at - brief.server_started_at).total_seconds(), 0.0)


def just_started(brief: Brief | None, warm_up_seconds: float) -> float | None:
    """Seconds the server had been up at the probe when fewer than `warm_up_seconds`, else None."""
    up = started_seconds_before(brief)
    return up if up is not None and up < warm_up_seconds else None


def cold_cache(ctx: OperatorContext) -> str | None:
    """Why the window's cache is cold, or None: the server restarted during the run
    (`restart_before_window`) or started less than `server_warm_up_seconds` before the review."""
    restart = restart_before_window(ctx)
    if restart:
        return restart
    warm_up = ctx.settings.thresholds.server_warm_up_seconds
    up = just_started(ctx.brief, warm_up)
    if up is None:
        return None
    return (
        f"the server started {up:.0f} s before the review (under server_warm_up_seconds, {warm_up:.0f} s):"
        " its cache is still filling, a cold cache is no verdict on its size, and what it empties is not judged"
    )
