"""Session checks over the sampled activity: idle transactions, long queries, lock waits, connections."""

from __future__ import annotations

from dataclasses import dataclass

from dbcrew.models import Finding, Severity
from dbcrew.operators.checks.base import Judgement, check, rounded, severity_for
from dbcrew.operators.collect.window import ACTIVITY, CONNECTIONS
from dbcrew.operators.registry import OperatorContext
from dbcrew.vocabulary import FindingCode

# The longest a session was seen in a state over all samples, per pid.
LONGEST_IN_STATE = """
SELECT pid, any_value(usename) AS usename, any_value(application_name) AS application_name,
       max({age}) AS seconds, arg_max(query, {age}) AS query
FROM activity WHERE backend_type = 'client backend' AND {predicate}
GROUP BY pid
"""
BLOCKED_SQL = (
    "SELECT pid, max(query_seconds) AS seconds, any_value(blocked_by) AS blocked_by, any_value(query) AS query,"
    " count(*) AS samples FROM activity WHERE blocked_by <> '' GROUP BY pid"
)
PEAK_SQL = (
    "SELECT max(connections) AS peak, any_value(max_connections) AS max_connections, any_value(reserved) AS reserved"
    " FROM connections"
)


@dataclass(frozen=True, slots=True)
class LongestInState:
    """A row of LONGEST_IN_STATE: a session's longest time in a state over the samples, with its query then."""

    pid: int
    usename: str | None
    application_name: str | None
    seconds: float | None
    query: str | None


@dataclass(frozen=True, slots=True)
class Blocked:
    """A row of BLOCKED_SQL: a session seen waiting on others' locks, in how many samples."""

    pid: int
    seconds: float | None
    blocked_by: str
    query: str | None
    samples: int


@dataclass(frozen=True, slots=True)
class ConnectionPeak:
    """The row of PEAK_SQL: the most client connections sampled (None with no sample), and the server's limits."""

    peak: int | None
    max_connections: int | None
    reserved: int | None


def session_object(pid: int) -> str:
    """Sessions have no schema name: `pid:<n>` (proposed as an object form for finding-codes.md)."""
    return f"pid:{pid}"


@check(
    needs=(ACTIVITY,),
    codes=(
        FindingCode.IDLE_IN_TRANSACTION,
        FindingCode.LONG_RUNNING_QUERY,
        FindingCode.BLOCKING_LOCKS,
    ),
    looked_at="sampled pg_stat_activity",
)
def check_sessions(ctx: OperatorContext) -> Judgement:
    """Sessions idle inside an open transaction, statements running too long, and sessions blocked by others."""
    t = ctx.settings.thresholds
    idle = ctx.workspace.rows(
        LongestInState,
        LONGEST_IN_STATE.format(age="state_seconds", predicate="state = 'idle in transaction'"),
    )
    for row in idle:
        severity = severity_for(
            row.seconds or 0.0,
            t.idle_in_transaction_seconds,
            t.idle_in_transaction_critical_seconds,
        )
        if severity:
            yield Finding(
                code=FindingCode.IDLE_IN_TRANSACTION,
                severity=severity,
                object=session_object(row.pid),
                title=f"Session {row.pid} ({row.usename}) idle in transaction for {row.seconds:.0f}s",
                evidence=rounded(
                    {
                        "pid": row.pid,
                        "user": row.usename,
                        "application": row.application_name,
                        "seconds": row.seconds,
                        "last_query": row.query,
                    }
                ),
                recommendation="Fix the client that leaves transactions open; set idle_in_transaction_session_timeout as a backstop.",
                fix_sql=f"SELECT pg_terminate_backend({int(row.pid)});",
            )
    running = ctx.workspace.rows(
        LongestInState, LONGEST_IN_STATE.format(age="query_seconds", predicate="state = 'active'")
    )
    for row in running:
        if row.seconds is not None and row.seconds >= t.long_running_query_seconds:
            yield Finding(
                code=FindingCode.LONG_RUNNING_QUERY,
                severity=Severity.WARNING,
                object=session_object(row.pid),
                title=f"Statement of session {row.pid} running for {row.seconds:.0f}s",
                evidence=rounded({"pid": row.pid, "seconds": row.seconds, "query": row.query}),
                recommendation="Check its plan; cancel it with pg_cancel_backend if it should not run this long.",
            )
    for blocked in ctx.workspace.rows(Blocked, BLOCKED_SQL):
        yield Finding(
            code=FindingCode.BLOCKING_LOCKS,
            severity=Severity.WARNING,
            object=session_object(blocked.pid),
            title=f"Session {blocked.pid} waited on locks held by {blocked.blocked_by} in {blocked.samples} samples",
            evidence=rounded(
                {
                    "pid": blocked.pid,
                    "blocked_by": blocked.blocked_by,
                    "query": blocked.query,
                    "samples": blocked.samples,
                }
            ),
            recommendation="Find what the blocking sessions hold and why they hold it so long.",
        )
    return None


@check(
    needs=(CONNECTIONS,),
    codes=(FindingCode.CONNECTIONS_SATURATION,),
    looked_at="sampled connection counts",
)
def check_connections(ctx: OperatorContext) -> Judgement:
    """Client connections as a share of what max_connections leaves to ordinary roles."""
    t = ctx.settings.thresholds
    for row in ctx.workspace.rows(ConnectionPeak, PEAK_SQL):
        if row.peak is None or row.max_connections is None or row.reserved is None:
            continue
        usable = max(row.max_connections - row.reserved, 1)
        share = row.peak / usable
        severity = severity_for(share, t.connections_warning_ratio, t.connections_critical_ratio)
        if severity:
            yield Finding(
                code=FindingCode.CONNECTIONS_SATURATION,
                severity=severity,
                object="max_connections",
                title=f"{row.peak} client connections of {usable} available ({share:.0%})",
                evidence=rounded(
                    {"peak": row.peak, "max_connections": row.max_connections, "share": share}
                ),
                recommendation="Put a connection pooler (PgBouncer) in front, or find the client leaking connections.",
            )
    return None
