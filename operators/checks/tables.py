"""Table checks: primary keys, dead tuples, autovacuum, statistics freshness."""

from __future__ import annotations

from dbcrew.models import Finding, Severity
from dbcrew.vocabulary import FindingCode
from operators.checks.base import Coverage, Judgement, check, rounded
from operators.registry import OperatorContext
from operators.sql import qualified


@check(needs=("table_stats",), codes=(FindingCode.TABLE_WITHOUT_PRIMARY_KEY,), looked_at="table constraints")
def check_primary_keys(ctx: OperatorContext) -> Judgement:
    """Ordinary tables with no primary key (logical replication and many tools need one)."""
    rows = ctx.workspace.query("SELECT * FROM table_stats WHERE NOT has_primary_key AND relkind = 'r'")
    for row in rows:
        yield Finding(
            code=FindingCode.TABLE_WITHOUT_PRIMARY_KEY, severity=Severity.WARNING, object=f"{row['schemaname']}.{row['relname']}",
            title=f"Table {row['relname']} has no primary key",
            evidence={"n_live_tup": row["n_live_tup"]},
            recommendation="Add a primary key (an identity column if nothing natural is unique).",
        )


def _autovacuum_off(reloptions: str | None) -> bool:
    return any(opt.strip().lower() in ("autovacuum_enabled=false", "autovacuum_enabled=off") for opt in (reloptions or "").split(","))


@check(needs=("table_stats", "settings"),
       codes=(FindingCode.DEAD_TUPLES_HIGH, FindingCode.AUTOVACUUM_DISABLED, FindingCode.STATISTICS_STALE))
def check_vacuum_health(ctx: OperatorContext) -> Judgement:
    """Autovacuum switched off (globally or per table), dead tuples piling up, statistics gone stale."""
    t = ctx.settings.thresholds
    setting = ctx.workspace.query("SELECT setting FROM settings WHERE name = 'autovacuum'")
    if setting and setting[0]["setting"] == "off":
        yield Finding(
            code=FindingCode.AUTOVACUUM_DISABLED, severity=Severity.CRITICAL, object="autovacuum",
            title="Autovacuum is off for the whole server",
            evidence={"autovacuum": "off"},
            recommendation="Turn autovacuum on: without it dead tuples pile up and transaction IDs wrap around.",
            fix_sql="ALTER SYSTEM SET autovacuum = on; SELECT pg_reload_conf();",
        )
    tables = ctx.workspace.query("SELECT * FROM table_stats")
    for row in tables:
        obj = f"{row['schemaname']}.{row['relname']}"
        name = qualified(row["schemaname"], row["relname"])
        if _autovacuum_off(row["reloptions"]):
            yield Finding(
                code=FindingCode.AUTOVACUUM_DISABLED, severity=Severity.WARNING, object=obj,
                title=f"Autovacuum is disabled for {row['relname']}",
                evidence={"reloptions": row["reloptions"]},
                recommendation="Reset the storage parameter so autovacuum looks after this table again.",
                fix_sql=f"ALTER TABLE {name} RESET (autovacuum_enabled);",
            )
        live, dead = row["n_live_tup"] or 0, row["n_dead_tup"] or 0
        ratio = dead / max(live + dead, 1)
        if dead >= t.dead_tuples_min and ratio >= t.dead_tuples_ratio:
            yield Finding(
                code=FindingCode.DEAD_TUPLES_HIGH, severity=Severity.CRITICAL if ratio >= 0.5 else Severity.WARNING, object=obj,
                title=f"{row['relname']} holds {dead:,} dead tuples ({ratio:.0%} of its rows)",
                evidence=rounded({"n_dead_tup": dead, "n_live_tup": live, "dead_ratio": ratio,
                                  "last_autovacuum": str(row["last_autovacuum"]), "last_vacuum": str(row["last_vacuum"])}),
                recommendation="Vacuum it now, then find why vacuum fell behind (disabled, blocked by a long transaction, or too slow).",
                fix_sql=f"VACUUM (ANALYZE) {name};",
            )
        never = row["last_analyze"] is None and row["last_autoanalyze"] is None
        mods = row["n_mod_since_analyze"] or 0
        if live >= t.stale_min_rows and (never or mods / max(live, 1) >= t.stale_mod_ratio):
            yield Finding(
                code=FindingCode.STATISTICS_STALE, severity=Severity.WARNING, object=obj,
                title=f"Statistics of {row['relname']} are " + ("missing (never analyzed)" if never else f"stale ({mods:,} rows changed since)"),
                evidence={"n_mod_since_analyze": mods, "n_live_tup": live, "never_analyzed": never},
                recommendation="Analyze it; the planner is estimating from outdated statistics.",
                fix_sql=f"ANALYZE {name};",
            )
    return Coverage(f"{len(tables)} tables")
