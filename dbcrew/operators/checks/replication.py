"""Replication checks: standbys falling behind, and slots nobody consumes that pin WAL."""

from __future__ import annotations

from dbcrew.models import Finding, Severity
from dbcrew.operators.checks.base import Coverage, Judgement, check, rounded, severity_for
from dbcrew.operators.collect.replication import (
    REPLICATION,
    REPLICATION_SLOTS,
    ReplicationRow,
    SlotRow,
)
from dbcrew.operators.registry import OperatorContext
from dbcrew.operators.sql import quote_ident, quote_literal
from dbcrew.vocabulary import FindingCode


@check(needs=(REPLICATION,), codes=(FindingCode.REPLICATION_LAG,))
def check_replication_lag(ctx: OperatorContext) -> Judgement:
    """Standbys behind by more WAL bytes or replay seconds than the thresholds (worse of the two wins)."""
    t = ctx.settings.thresholds
    rows = ctx.workspace.rows(ReplicationRow, "SELECT * FROM replication")
    for row in rows:
        by_bytes = severity_for(
            row.lag_bytes or 0.0, t.replication_lag_warning_bytes, t.replication_lag_critical_bytes
        )
        by_time = severity_for(
            row.lag_seconds or 0.0,
            t.replication_lag_warning_seconds,
            t.replication_lag_critical_seconds,
        )
        severity = (
            Severity.CRITICAL if Severity.CRITICAL in (by_bytes, by_time) else (by_bytes or by_time)
        )
        if severity:
            yield Finding(
                code=FindingCode.REPLICATION_LAG,
                severity=severity,
                object=f"replica {row.name}",
                title=f"Replica {row.name} is {(row.lag_bytes or 0) / 2**20:.1f} MiB of WAL behind",
                evidence=rounded(
                    {
                        "scope": row.scope,
                        "state": row.state,
                        "lag_bytes": row.lag_bytes,
                        "lag_seconds": row.lag_seconds,
                    }
                ),
                recommendation="Check the replica's replay (paused? long queries with max_standby_streaming_delay? I/O) and its network.",
            )
    return Coverage(f"{len(rows)} replication streams")


@check(needs=(REPLICATION_SLOTS,), codes=(FindingCode.REPLICATION_SLOT_INACTIVE,))
def check_replication_slots(ctx: OperatorContext) -> Judgement:
    """Inactive replication slots: they keep WAL (and, for logical slots, the catalog xmin) forever."""
    t = ctx.settings.thresholds
    rows = ctx.workspace.rows(SlotRow, "SELECT * FROM replication_slots")
    gone: list[str] = []
    for row in rows:
        if row.active:
            continue
        retained = row.retained_bytes or 0.0
        lost = row.wal_status in ("unreserved", "lost")
        if (
            row.inactive_seconds is not None
            and row.inactive_seconds < t.slot_inactive_grace_seconds
            and not lost
            and retained < t.slot_retained_critical_bytes
        ):
            gone.append(f"{row.slot_name} ({row.inactive_seconds:.0f} s ago)")
            continue  # its consumer just went away (a restart, a failover): not yet a slot left behind
        yield Finding(
            code=FindingCode.REPLICATION_SLOT_INACTIVE,
            severity=Severity.CRITICAL
            if lost or retained >= t.slot_retained_critical_bytes
            else Severity.WARNING,
            object=f"slot {quote_ident(row.slot_name)}",
            title=f"Replication slot {row.slot_name} ({row.slot_type}) is inactive, retaining {retained / 2**20:.1f} MiB of WAL",
            evidence=rounded(
                {
                    "slot_type": row.slot_type,
                    "database": row.database,
                    "wal_status": row.wal_status,
                    "retained_bytes": retained,
                }
            ),
            recommendation="Reconnect its consumer, or drop the slot if the consumer is gone for good.",
            fix_sql=f"SELECT pg_drop_replication_slot({quote_literal(row.slot_name)});",
        )
    return Coverage(
        f"{len(rows)} replication slots",
        partial=f"replica gone during the review, its lag not measured; slot judged after {t.slot_inactive_grace_seconds:.0f} s"
        f" inactive: {', '.join(gone)}"
        if gone
        else "",
    )
