"""Table checks: primary keys, dead tuples, autovacuum, statistics freshness."""

from __future__ import annotations

from typing import Any

from dbcrew.models import Finding, Severity
from dbcrew.operators.checks.base import Coverage, Judgement, check, rounded
from dbcrew.operators.checks.horizon import held_by, horizon_holders
from dbcrew.operators.collect.catalog import SETTINGS, XMIN_HORIZON, SettingRow
from dbcrew.operators.registry import OperatorContext
from dbcrew.operators.sql import qualified
from dbcrew.operators.stat_views import TABLE_STATS, TableStatsRow
from dbcrew.settings.thresholds import Thresholds
from dbcrew.vocabulary import FindingCode


@check(
    needs=(TABLE_STATS.table,),
    codes=(FindingCode.TABLE_WITHOUT_PRIMARY_KEY,),
    looked_at="table constraints",
)
def check_primary_keys(ctx: OperatorContext) -> Judgement:
    """Ordinary tables with no primary key (logical replication and many tools need one)."""
    rows = ctx.workspace.rows(
        TableStatsRow, "SELECT * FROM table_stats WHERE NOT has_primary_key AND relkind = 'r'"
    )
    for row in rows:
        yield Finding(
            code=FindingCode.TABLE_WITHOUT_PRIMARY_KEY,
            severity=Severity.WARNING,
            object=qualified(row.schemaname, row.relname),
            title=f"Table {row.relname} has no primary key",
            evidence={"n_live_tup": row.n_live_tup},
            recommendation="Add a primary key (an identity column if nothing natural is unique).",
        )
    return None


# A late flush counts rows ANALYZE saw once more (see `staleness`): at most twice what it left, three
# times with room for its sampled estimate of a large table. Live rows past that grew since.
LATE_FLUSH_MAX_GROWTH = 3.0
NEVER = "missing (never analyzed)"


def staleness(row: TableStatsRow, t: Thresholds) -> str | None:
    """How the planner's statistics of a table are stale, or None when they describe it.

    The planner estimates from what the last ANALYZE left: `reltuples` (a VACUUM since updates it
    too) and the column statistics.
    They are stale when the changes counted since (`n_mod_since_analyze`) reach `stale_mod_ratio`
    of the live rows, once those changes surely postdate the ANALYZE. A backend's counts reach
    pg_stat only when it flushes them, up to ~10 s after it goes idle (PostgreSQL 15+), so rows a
    session changed just before its ANALYZE can land after it, as changes since (and as live rows
    counted twice). Within `stale_flush_grace_seconds` of the ANALYZE, changes are therefore
    judged by growth alone: a late flush adds at most the rows ANALYZE saw, so live rows many times
    `reltuples` (a table bulk-loaded after an ANALYZE taken while it was small) are new whatever
    the analyze's age.
    """
    live, mods, planned = row.n_live_tup, row.n_mod_since_analyze, row.reltuples
    if live < t.stale_min_rows:
        return None
    if row.last_analyze is None and row.last_autoanalyze is None:
        return NEVER
    if mods / max(live, 1) < t.stale_mod_ratio:
        return None
    if 0 <= planned and live > LATE_FLUSH_MAX_GROWTH * planned:
        return f"stale (analyzed at {planned:,.0f} rows, {live:,} live now)"
    if (row.analyzed_seconds_ago or 0.0) >= t.stale_flush_grace_seconds:
        return f"stale ({mods:,} rows changed since)"
    return None


def _autovacuum_off(reloptions: str | None) -> bool:
    return any(
        opt.strip().lower() in ("autovacuum_enabled=false", "autovacuum_enabled=off")
        for opt in (reloptions or "").split(",")
    )


@check(
    needs=(TABLE_STATS.table, SETTINGS),
    uses=(XMIN_HORIZON,),
    codes=(
        FindingCode.DEAD_TUPLES_HIGH,
        FindingCode.AUTOVACUUM_DISABLED,
        FindingCode.STATISTICS_STALE,
    ),
    counted=(FindingCode.DEAD_TUPLES_HIGH, FindingCode.STATISTICS_STALE),
)
def check_vacuum_health(ctx: OperatorContext) -> Judgement:
    """Autovacuum switched off (globally or per table), dead tuples piling up, statistics gone stale (`staleness`)."""
    t = ctx.settings.thresholds
    holders = horizon_holders(ctx, database=None, catalogs=False)
    setting = ctx.workspace.rows(SettingRow, "SELECT * FROM settings WHERE name = 'autovacuum'")
    if setting and setting[0].setting == "off":
        yield Finding(
            code=FindingCode.AUTOVACUUM_DISABLED,
            severity=Severity.CRITICAL,
            object="autovacuum",
            title="Autovacuum is off for the whole server",
            evidence={"autovacuum": "off"},
            recommendation="Turn autovacuum on: without it dead tuples pile up and transaction IDs wrap around.",
            fix_sql="ALTER SYSTEM SET autovacuum = on; SELECT pg_reload_conf();",
        )
    tables = ctx.workspace.rows(TableStatsRow, "SELECT * FROM table_stats")
    for row in tables:
        name = qualified(row.schemaname, row.relname)
        if _autovacuum_off(row.reloptions):
            yield Finding(
                code=FindingCode.AUTOVACUUM_DISABLED,
                severity=Severity.WARNING,
                object=name,
                title=f"Autovacuum is disabled for {row.relname}",
                evidence={"reloptions": row.reloptions},
                recommendation="Reset the storage parameter so autovacuum looks after this table again.",
                fix_sql=f"ALTER TABLE {name} RESET (autovacuum_enabled);",
            )
        live, dead = row.n_live_tup, row.n_dead_tup
        ratio = dead / max(live + dead, 1)
        if dead >= t.dead_tuples_min and ratio >= t.dead_tuples_ratio:
            evidence: dict[str, Any] = rounded(
                {
                    "n_dead_tup": dead,
                    "n_live_tup": live,
                    "dead_ratio": ratio,
                    "last_autovacuum": str(row.last_autovacuum),
                    "last_vacuum": str(row.last_vacuum),
                }
            )
            recommendation = "Vacuum it now, then find why vacuum fell behind (disabled, blocked by a long transaction, or too slow)."
            if holders:
                evidence = {**evidence, "horizon_held_by": held_by(holders)}
                recommendation += f" Vacuum leaves every row deleted after the xmin {holders[0].holder} holds: end or drop it first."
            yield Finding(
                code=FindingCode.DEAD_TUPLES_HIGH,
                severity=Severity.CRITICAL if ratio >= 0.5 else Severity.WARNING,
                object=name,
                title=f"{row.relname} holds {dead:,} dead tuples ({ratio:.0%} of its rows)",
                evidence=evidence,
                recommendation=recommendation,
                fix_sql=f"VACUUM (ANALYZE) {name};",
            )
        stale = staleness(row, t)
        if stale:
            yield Finding(
                code=FindingCode.STATISTICS_STALE,
                severity=Severity.WARNING,
                object=name,
                title=f"Statistics of {row.relname} are {stale}",
                evidence=rounded(
                    {
                        "n_mod_since_analyze": row.n_mod_since_analyze,
                        "n_live_tup": live,
                        "reltuples": row.reltuples,
                        "never_analyzed": stale == NEVER,
                        "analyzed_seconds_ago": row.analyzed_seconds_ago,
                    }
                ),
                recommendation="Analyze it; the planner is estimating from outdated statistics.",
                fix_sql=f"ANALYZE {name};",
            )
    return Coverage(f"{len(tables)} tables")
