"""Statement checks over pg_stat_statements deltas and totals."""

from __future__ import annotations

from dataclasses import dataclass

from dbcrew.models import Finding, Severity
from dbcrew.vocabulary import FindingCode
from operators.checks.base import Coverage, Judgement, check, rounded
from operators.registry import OperatorContext

TOP = 5
MAX_REPORTED = 25
# The top consumers of time (info), and every statement past the slow thresholds however it ranks.
RANKED_SQL = (
    "SELECT queryid, query, calls, total_exec_time, calls_delta, total_exec_time_delta, mean_ms FROM ("
    " SELECT *, total_exec_time / greatest(calls, 1) AS mean_ms,"
    "        row_number() OVER (ORDER BY total_exec_time DESC) AS rank FROM statements WHERE calls > 0)"
    " WHERE rank <= ? OR (mean_ms >= ? AND calls >= ?) ORDER BY total_exec_time DESC LIMIT ?"
)


@dataclass(frozen=True, slots=True)
class RankedStatement:
    """A row of RANKED_SQL: a statement's totals, its change over the window and its mean time."""

    queryid: int
    query: str
    calls: int
    total_exec_time: float
    calls_delta: float
    total_exec_time_delta: float
    mean_ms: float


@check(needs=("statements",), codes=(FindingCode.SLOW_QUERY,))
def check_slow_queries(ctx: OperatorContext) -> Judgement:
    """Top statements by total time; a warning when their mean time passes the threshold.

    Query texts are data from the target: they are quoted in evidence, never interpreted.
    """
    t = ctx.settings.thresholds
    rows = ctx.workspace.rows(
        RankedStatement,
        RANKED_SQL,
        [TOP, t.slow_query_mean_ms, t.slow_query_min_calls, MAX_REPORTED],
    )
    for row in rows:
        slow = row.mean_ms >= t.slow_query_mean_ms and row.calls >= t.slow_query_min_calls
        yield Finding(
            code=FindingCode.SLOW_QUERY,
            severity=Severity.WARNING if slow else Severity.INFO,
            object=f"queryid:{row.queryid}",
            title=f"Statement averaging {row.mean_ms:.1f} ms over {row.calls:,} calls",
            evidence=rounded(
                {
                    "query": row.query,
                    "calls": row.calls,
                    "mean_ms": row.mean_ms,
                    "total_ms": row.total_exec_time,
                    "calls_in_window": row.calls_delta,
                }
            ),
            recommendation="Examine its plan (EXPLAIN) and the indexes on the tables it reads."
            if slow
            else "",
        )
    return Coverage(f"top {TOP} statements and those past the slow thresholds")
