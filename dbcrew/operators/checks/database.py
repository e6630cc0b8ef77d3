"""Database-wide checks: cache hit ratio, checkpoints, temporary files, wraparound, sequences."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dbcrew.models import Finding, Severity
from dbcrew.operators.checks.age_history import earlier_age
from dbcrew.operators.checks.base import Coverage, Judgement, check, rounded, severity_for
from dbcrew.operators.checks.horizon import Holder, held_by, horizon_holders
from dbcrew.operators.collect.catalog import (
    SEQUENCES,
    WRAPAROUND,
    XMIN_HORIZON,
    SequenceRow,
    WraparoundRow,
)
from dbcrew.operators.registry import OperatorContext
from dbcrew.operators.sql import qualified, quote_ident
from dbcrew.operators.stat_views import CHECKPOINTER_TABLE, DATABASE_STATS, CheckpointerRow
from dbcrew.operators.statistics_age import cold_cache, young_shared_counters
from dbcrew.settings.thresholds import Thresholds
from dbcrew.vocabulary import FindingCode

XID_LIMIT = 2**31


# The window's cache counters, and whether the server restarted during it (a restart empties shared
# buffers: the reads after it are a cold cache filling up, not a cache too small for the workload).
CACHE_SQL = (
    "SELECT blks_hit_delta AS hit, blks_read_delta AS read, server_started_delta <> 0 AS restarted,"
    " temp_bytes_delta AS temp FROM database_stats"
)
RESTARTED = (
    "the server restarted during the window: its cache started cold, the hit ratio is not judged"
)
CHECKPOINT_SQL = "SELECT * FROM checkpointer"
TEMP_SQL = "SELECT temp_files_delta AS files, temp_bytes_delta AS bytes FROM database_stats"


@dataclass(frozen=True, slots=True)
class CacheWindow:
    """A row of CACHE_SQL: the window's shared-buffer blocks hit and read, and its temporary-file bytes."""

    hit: float
    read: float
    restarted: bool
    temp: float


@dataclass(frozen=True, slots=True)
class TempFiles:
    """A row of TEMP_SQL: temporary files written in the window."""

    files: float
    bytes: float


def judged_hit_ratio(row: CacheWindow, t: Thresholds) -> float | None:
    """The window's shared-buffer hit ratio, or None when too few blocks were accessed
    or the server restarted during the window."""
    accesses = row.hit + row.read
    return (
        row.hit / accesses if accesses >= t.cache_min_block_accesses and not row.restarted else None
    )


def wal_checkpoint_share(row: CheckpointerRow, t: Thresholds) -> float | None:
    """Share of checkpoints WAL volume requested, when it passes the threshold (enough of them to judge), else None.

    Requested checkpoints count as WAL-driven only up to what the WAL written could have requested
    (`wal_checkpoints_max`, dbcrew/operators/stat_views.py): restarts, CHECKPOINT commands and CREATE
    DATABASE are requested checkpoints too, and a larger max_wal_size would not have spared them.
    """
    total = row.timed + row.requested
    if total < t.checkpoints_min_total:
        return None
    bound = row.wal_checkpoints_max  # None when the server could not say where its WAL is
    by_wal = row.requested if bound is None else min(row.requested, bound)
    share = by_wal / total
    return share if share > t.checkpoints_requested_ratio else None


@check(
    needs=(DATABASE_STATS.table,),
    codes=(FindingCode.CACHE_HIT_RATIO_LOW,),
    looked_at="pg_stat_database deltas",
    since_start=(FindingCode.CACHE_HIT_RATIO_LOW,),
)
def check_cache_hit_ratio(ctx: OperatorContext) -> Judgement:
    """Shared-buffer hit ratio over the window, from deltas (never from since-reset totals); never
    judged on a cold cache: a server started less than server_warm_up_seconds before the review,
    or restarted since the run's probe or during the window."""
    t = ctx.settings.thresholds
    if cold_cache(ctx):
        return None  # @check says why, and leaves the code unjudged
    restarted = quiet = False
    for row in ctx.workspace.rows(CacheWindow, CACHE_SQL):
        restarted = restarted or row.restarted
        ratio = judged_hit_ratio(row, t)
        if ratio is None:
            quiet = quiet or not row.restarted
            continue
        severity = severity_for(
            ratio, t.cache_hit_ratio_warning, t.cache_hit_ratio_critical, higher_is_worse=False
        )
        if severity:
            yield Finding(
                code=FindingCode.CACHE_HIT_RATIO_LOW,
                severity=severity,
                object="database",
                title=f"Cache hit ratio {ratio:.1%} over the window (threshold {t.cache_hit_ratio_warning:.0%})",
                evidence=rounded({"ratio": ratio, "blocks_hit": row.hit, "blocks_read": row.read}),
                recommendation="Raise shared_buffers if memory allows, or find the statements reading most blocks from disk.",
            )
    # No verdict is no all-clear: the code is unjudged, so history keeps an earlier finding of it (a quiet night's
    # review must not resolve what the day's found).
    quiet_why = (
        f"fewer than {t.cache_min_block_accesses:,} shared-buffer blocks accessed in the window:"
        " the hit ratio is not judged"
    )
    why = "; ".join(w for w, seen in ((RESTARTED, restarted), (quiet_why, quiet)) if seen)
    return (
        Coverage("pg_stat_database deltas", why, (FindingCode.CACHE_HIT_RATIO_LOW,))
        if why
        else None
    )


@check(
    needs=(CHECKPOINTER_TABLE,),
    codes=(FindingCode.CHECKPOINTS_TOO_FREQUENT,),
    looked_at="checkpointer counters",
)
def check_checkpoints(ctx: OperatorContext) -> Judgement:
    """Checkpoints requested by WAL volume dominating timed ones since the statistics began.

    Since the statistics began, not over the window: at the default checkpoint_timeout a
    window of minutes holds no checkpoint at all. A clean restart keeps those counters (and the
    restart's own checkpoint is bounded out, see wal_checkpoint_share); counters reset less than
    counters_min_age_seconds ago leave the check partial.
    """
    t = ctx.settings.thresholds
    young = ""
    for row in ctx.workspace.rows(CheckpointerRow, CHECKPOINT_SQL):
        young = young or (
            young_shared_counters(
                ctx.brief, row.source, row.stats_reset, t.counters_min_age_seconds
            )
            or ""
        )
        share = wal_checkpoint_share(row, t)
        if share is not None:
            total = row.timed + row.requested
            yield Finding(
                code=FindingCode.CHECKPOINTS_TOO_FREQUENT,
                severity=Severity.WARNING,
                object="max_wal_size",
                title=f"{share:.0%} of {total} checkpoints were requested by WAL volume, not by time",
                evidence={
                    "timed": row.timed,
                    "requested": row.requested,
                    "wal_checkpoints_max": row.wal_checkpoints_max,
                },
                recommendation="Raise max_wal_size so checkpoints follow checkpoint_timeout.",
            )
    # Counters reset (pg_stat_reset_shared, a crash) an hour ago hold a checkpoint or two at the default
    # checkpoint_timeout: too few to judge, and an earlier finding missing now is not resolved.
    return (
        Coverage("checkpointer counters", young, (FindingCode.CHECKPOINTS_TOO_FREQUENT,))
        if young
        else None
    )


@check(
    needs=(DATABASE_STATS.table,),
    codes=(FindingCode.TEMP_FILES_SPILL,),
    looked_at="pg_stat_database deltas",
)
def check_temp_files(ctx: OperatorContext) -> Judgement:
    """Temporary files written during the window: sorts and hashes spilling past work_mem."""
    t = ctx.settings.thresholds
    for row in ctx.workspace.rows(TempFiles, TEMP_SQL):
        if row.files > 0:
            yield Finding(
                code=FindingCode.TEMP_FILES_SPILL,
                severity=Severity.WARNING
                if row.bytes >= t.temp_spill_warning_bytes
                else Severity.INFO,
                object="work_mem",
                title=f"{int(row.files)} temporary files ({row.bytes / 2**20:.1f} MiB) written in the window",
                evidence={"temp_files": row.files, "temp_bytes": row.bytes},
                recommendation="Find the spilling statements (temp_blks_written in pg_stat_statements); raise work_mem for them.",
            )
    return None


@dataclass(frozen=True, slots=True)
class Horizon:
    """One ID kind's age of a database or table against its limits: the thresholds' absolute ages
    (toward the hard limit, 2^31), and the freeze limit past which the server forces its own
    anti-wraparound vacuums (autovacuum_freeze_max_age or its multixact twin)."""

    setting: str
    age: int
    freeze_max_age: int
    warning: int
    critical: int

    def judged(
        self, autovacuum_off: bool, near: float, earlier: int | None = None
    ) -> tuple[Severity, str] | None:
        """The severity and why, or None. Near the hard limit is critical whatever vacuums. Close to
        the freeze limit is a warning where autovacuum cannot keep up: off for it (then nothing
        freezes it but the forced vacuums, which come on the server's schedule, not the DBA's), or
        on but the age was already past the limit at the last review (`earlier`) and has risen
        since. With autovacuum on, reaching the freeze limit is otherwise its ordinary work (an
        anti-wraparound vacuum, after which the age falls)."""
        hard = f"{self.age / XID_LIMIT:.0%} of the limit"
        if self.age >= self.critical:
            return Severity.CRITICAL, hard
        if self.age >= self.warning:
            return Severity.WARNING, hard
        share = f"{self.age / self.freeze_max_age:.0%} of {self.setting} ({self.freeze_max_age:,})"
        if autovacuum_off and self.age >= near * self.freeze_max_age:
            return Severity.WARNING, f"{share} with autovacuum off"
        if earlier is not None and self.freeze_max_age <= earlier < self.age:
            return (
                Severity.WARNING,
                f"{share}, still rising since the last review ({earlier:,}): autovacuum is not keeping up",
            )
        return None


@check(
    needs=(WRAPAROUND,),
    uses=(XMIN_HORIZON,),
    codes=(FindingCode.XID_WRAPAROUND_RISK, FindingCode.MXID_WRAPAROUND_RISK),
    looked_at="datfrozenxid and relfrozenxid ages",
)
def check_wraparound(ctx: OperatorContext) -> Judgement:
    """Transaction-ID and multixact-ID ages of every database and the oldest tables, against the hard
    limit and, where autovacuum cannot keep up, against the freeze limit (autovacuum_freeze_max_age):
    off for them, or (the reviewed database's XID age) past it at the last health review and risen since.

    An XID age finding names who holds the xmin horizon: freezing cannot make a table younger
    than the oldest xmin still held (a database's catalogs also wait for logical slots).
    """
    t = ctx.settings.thresholds
    holding_tables = horizon_holders(ctx, database=None, catalogs=False)

    def holders_of(row: WraparoundRow) -> list[Holder]:
        """Who holds the horizon of `row`, read only once a row is past a limit: a cluster serves hundreds of
        databases, and a read for each was most of a review's CPU there."""
        if row.scope == "table":
            return holding_tables
        return horizon_holders(ctx, database=row.name, catalogs=True)

    last = earlier_age(ctx)  # the reviewed database's age at its last health review
    reviewed = ctx.brief.database if ctx.brief else None
    for row in ctx.workspace.rows(WraparoundRow, "SELECT * FROM wraparound"):
        table = row.scope == "table"
        earlier = last if last is not None and not table and row.name == reviewed else None
        limits = (
            (
                FindingCode.XID_WRAPAROUND_RISK,
                row.xid_age,
                ("autovacuum_freeze_max_age", row.freeze_max_age),
                (t.xid_warning_age, t.xid_critical_age),
            ),
            (
                FindingCode.MXID_WRAPAROUND_RISK,
                row.mxid_age,
                ("autovacuum_multixact_freeze_max_age", row.mxid_freeze_max_age),
                (t.mxid_warning_age, t.mxid_critical_age),
            ),
        )
        for code, age, (setting, freeze_max_age), (warning, critical) in limits:
            if age is None:
                continue
            horizon = Horizon(setting, age, freeze_max_age, warning, critical)
            judged = horizon.judged(
                row.autovacuum_off,
                t.freeze_max_age_near_ratio,
                earlier.age if earlier and code == FindingCode.XID_WRAPAROUND_RISK else None,
            )
            if judged is None:
                continue
            severity, against = judged
            evidence: dict[str, Any] = {
                "scope": row.scope,
                "name": row.name,
                "age": age,
                setting: freeze_max_age,
                "autovacuum_off": row.autovacuum_off,
            }
            if earlier is not None and code == FindingCode.XID_WRAPAROUND_RISK:
                last_review = {"at": earlier.reviewed_at.isoformat(), "age": earlier.age}
                evidence = {**evidence, "earlier_review": last_review}
            recommendation = (
                "Run VACUUM (FREEZE) on the oldest tables at a time you choose, and turn autovacuum back on"
                f" for them: past {setting} the server forces anti-wraparound vacuums on its own schedule."
                if row.autovacuum_off
                else "Run VACUUM (FREEZE) on the oldest tables; check for long transactions and stale"
                " replication slots holding the horizon, and whether autovacuum's anti-wraparound vacuums"
                " finish (pg_stat_progress_vacuum, autovacuum_vacuum_cost_limit, cancellations in the log)."
            )
            holding = holders_of(row) if code == FindingCode.XID_WRAPAROUND_RISK else []
            if holding:
                evidence = {**evidence, "horizon_held_by": held_by(holding)}
                recommendation = (
                    f"End or drop what holds the xmin horizon, oldest first ({holding[0].holder}, see the evidence),"
                    " then run VACUUM (FREEZE): it cannot freeze past an xmin still held."
                )
            yield Finding(
                code=code,
                severity=severity,
                object=row.name if table else f"database {row.name}",
                title=f"{code.split('_')[0]} age {age:,} of {row.scope} {row.name} ({against})",
                evidence=evidence,
                recommendation=recommendation,
                fix_sql=f"VACUUM (FREEZE, VERBOSE) {row.name};" if table else None,
            )
    return None


@check(needs=(SEQUENCES,), codes=(FindingCode.SEQUENCE_EXHAUSTION,))
def check_sequences(ctx: OperatorContext) -> Judgement:
    """Sequences close to the maximum of their type (last_value is null when the role cannot read it)."""
    t = ctx.settings.thresholds
    rows = ctx.workspace.rows(
        SequenceRow, "SELECT * FROM sequences WHERE last_value IS NOT NULL AND max_value > 0"
    )
    for row in rows:
        used = (row.last_value or 0) / row.max_value
        severity = severity_for(used, t.sequence_warning_ratio, t.sequence_critical_ratio)
        if severity:
            name = qualified(row.schemaname, row.sequencename)
            yield Finding(
                code=FindingCode.SEQUENCE_EXHAUSTION,
                severity=severity,
                object=name,
                title=f"Sequence {name} has used {used:.0%} of its {row.column_type or row.data_type} range",
                evidence=rounded(
                    {
                        "last_value": row.last_value,
                        "max_value": row.max_value,
                        "used": used,
                        "column_type": row.column_type,
                    }
                ),
                recommendation="Widen the sequence and the columns it feeds to bigint before it runs out.",
                fix_sql=f"ALTER SEQUENCE {quote_ident(row.schemaname)}.{quote_ident(row.sequencename)} AS bigint;",
            )
    looked_at = f"{len(rows)} readable sequences"
    hidden = ctx.workspace.rows(
        SequenceRow, "SELECT * FROM sequences WHERE last_value IS NULL AND NOT never_used"
    )
    if hidden:
        schemas = sorted({r.schemaname for r in hidden})
        grants = " ".join(
            f"GRANT SELECT ON ALL SEQUENCES IN SCHEMA {quote_ident(s)} TO {quote_ident(ctx.brief.current_user) if ctx.brief else 'the review role'};"
            for s in schemas
        )
        return Coverage(
            looked_at,
            f"{len(hidden)} sequences unreadable by this role ({grants})",
            (FindingCode.SEQUENCE_EXHAUSTION,),  # an unreadable sequence's finding is not resolved
        )
    return Coverage(looked_at)
