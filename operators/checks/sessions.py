"""Session checks over the sampled activity: idle transactions, long queries, lock waits, connections."""

from __future__ import annotations

from dbcrew.models import Finding, Severity
from dbcrew.vocabulary import FindingCode
from operators.checks.base import Judgement, check, rounded, severity_for
from operators.registry import OperatorContext

# The longest a session was seen in a state over all samples, per pid.
LONGEST_IN_STATE = """
SELECT pid, any_value(usename) AS usename, any_value(application_name) AS application_name,
       max({age}) AS seconds, arg_max(query, {age}) AS query
FROM activity WHERE backend_type = 'client backend' AND {predicate}
GROUP BY pid
"""


def session_object(pid: int) -> str:
    """Sessions have no schema name: `pid:<n>` (proposed as an object form for finding-codes.md)."""
    return f"pid:{pid}"


@check(needs=("activity",), codes=(FindingCode.IDLE_IN_TRANSACTION, FindingCode.LONG_RUNNING_QUERY, FindingCode.BLOCKING_LOCKS), looked_at="sampled pg_stat_activity")
def check_sessions(ctx: OperatorContext) -> Judgement:
    """Sessions idle inside an open transaction, statements running too long, and sessions blocked by others."""
    t = ctx.settings.thresholds
    idle = ctx.workspace.query(LONGEST_IN_STATE.format(age="state_seconds", predicate="state = 'idle in transaction'"))
    for row in idle:
        severity = severity_for(row["seconds"], t.idle_in_transaction_seconds, t.idle_in_transaction_critical_seconds)
        if severity:
            yield Finding(
                code=FindingCode.IDLE_IN_TRANSACTION, severity=severity, object=session_object(row["pid"]),
                title=f"Session {row['pid']} ({row['usename']}) idle in transaction for {row['seconds']:.0f}s",
                evidence=rounded({"pid": row["pid"], "user": row["usename"], "application": row["application_name"],
                                  "seconds": row["seconds"], "last_query": row["query"]}),
                recommendation="Fix the client that leaves transactions open; set idle_in_transaction_session_timeout as a backstop.",
                fix_sql=f"SELECT pg_terminate_backend({int(row['pid'])});",
            )
    running = ctx.workspace.query(LONGEST_IN_STATE.format(age="query_seconds", predicate="state = 'active'"))
    for row in running:
        if row["seconds"] is not None and row["seconds"] >= t.long_running_query_seconds:
            yield Finding(
                code=FindingCode.LONG_RUNNING_QUERY, severity=Severity.WARNING, object=session_object(row["pid"]),
                title=f"Statement of session {row['pid']} running for {row['seconds']:.0f}s",
                evidence=rounded({"pid": row["pid"], "seconds": row["seconds"], "query": row["query"]}),
                recommendation="Check its plan; cancel it with pg_cancel_backend if it should not run this long.",
            )
    blocked = ctx.workspace.query(
        "SELECT pid, max(query_seconds) AS seconds, any_value(blocked_by) AS blocked_by, any_value(query) AS query,"
        " count(*) AS samples FROM activity WHERE blocked_by <> '' GROUP BY pid"
    )
    for row in blocked:
        yield Finding(
            code=FindingCode.BLOCKING_LOCKS, severity=Severity.WARNING, object=session_object(row["pid"]),
            title=f"Session {row['pid']} waited on locks held by {row['blocked_by']} in {row['samples']} samples",
            evidence=rounded({"pid": row["pid"], "blocked_by": row["blocked_by"], "query": row["query"], "samples": row["samples"]}),
            recommendation="Find what the blocking sessions hold and why they hold it so long.",
        )


@check(needs=("connections",), codes=(FindingCode.CONNECTIONS_SATURATION,), looked_at="sampled connection counts")
def check_connections(ctx: OperatorContext) -> Judgement:
    """Client connections as a share of what max_connections leaves to ordinary roles."""
    t = ctx.settings.thresholds
    rows = ctx.workspace.query("SELECT max(connections) AS peak, any_value(max_connections) AS max, any_value(reserved) AS reserved FROM connections")
    for row in rows:
        if row["peak"] is None:
            continue
        usable = max(row["max"] - row["reserved"], 1)
        share = row["peak"] / usable
        severity = severity_for(share, t.connections_warning_ratio, t.connections_critical_ratio)
        if severity:
            yield Finding(
                code=FindingCode.CONNECTIONS_SATURATION, severity=severity, object="max_connections",
                title=f"{row['peak']} client connections of {usable} available ({share:.0%})",
                evidence=rounded({"peak": row["peak"], "max_connections": row["max"], "share": share}),
                recommendation="Put a connection pooler (PgBouncer) in front, or find the client leaking connections.",
            )
