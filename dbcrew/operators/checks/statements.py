"""Statement checks over pg_stat_statements deltas and totals: the target's workload, not dbcrew's.

pg_stat_statements holds every statement of the database: the review's own catalogue reads (each
ends with dbcrew's marker, dbcrew.targets.OWN_STATEMENT_MARKER), utility commands (DDL,
maintenance, transaction control: dbcrew/operators/statement_kinds.py) and statements too cheap to matter
(a foreign-key look-up of 0.01 ms). Only the workload is ranked, and a statement is reported only
when it takes a meaningful share of the workload's time and an absolute amount of it: on an idle
database every share is large, on a busy one every small statement is a few milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass

from dbcrew.models import Finding, Severity
from dbcrew.operators.checks.base import Coverage, Judgement, check, rounded
from dbcrew.operators.registry import OperatorContext
from dbcrew.operators.stat_views import STATEMENTS
from dbcrew.operators.statement_kinds import StatementKind, kind_of
from dbcrew.settings.thresholds import Thresholds
from dbcrew.vocabulary import FindingCode

TOP = 5
MAX_REPORTED = 25
# One row per statement: pg_stat_statements keeps an entry per role (and per nesting level), each
# with its own text; the review's entries stay apart from another role's running the same statement.
TOTALS_SQL = (
    "SELECT queryid, any_value(query) AS query, own, sum(calls)::BIGINT AS calls,"
    " sum(total_exec_time) AS total_exec_time, sum(calls_delta) AS calls_delta"
    " FROM statements WHERE calls > 0 GROUP BY queryid, own"
)


@dataclass(frozen=True, slots=True)
class StatementTotals:
    """A row of TOTALS_SQL: a statement's totals over every role running it, and its calls in the window."""

    queryid: int
    query: str
    own: bool
    calls: int
    total_exec_time: float
    calls_delta: float

    @property
    def mean_ms(self) -> float:
        return self.total_exec_time / max(self.calls, 1)


@dataclass(frozen=True, slots=True)
class Workload:
    """The statements worth ranking, the workload's total time, and how many were left out and why."""

    heavy: list[StatementTotals]  # past both floors, most time first
    total_ms: float
    statements: int
    own: int
    utility: int


def workload_of(rows: list[StatementTotals], t: Thresholds) -> Workload:
    """The workload's statements past the floors of time (a share of the workload's, and an absolute one)."""
    own = [r for r in rows if r.own]
    others = [r for r in rows if not r.own]
    workload = [r for r in others if kind_of(r.query) is StatementKind.WORKLOAD]
    total = sum(r.total_exec_time for r in workload)
    floor = max(t.slow_query_min_total_ms, t.slow_query_min_share * total)
    heavy = sorted(
        (r for r in workload if r.total_exec_time >= floor and r.total_exec_time > 0),
        key=lambda r: r.total_exec_time,
        reverse=True,
    )
    return Workload(
        heavy=heavy,
        total_ms=total,
        statements=len(workload),
        own=len(own),
        utility=len(others) - len(workload),
    )


def is_slow(row: StatementTotals, t: Thresholds) -> bool:
    return row.mean_ms >= t.slow_query_mean_ms and row.calls >= t.slow_query_min_calls


@check(needs=(STATEMENTS.table,), codes=(FindingCode.SLOW_QUERY,))
def check_slow_queries(ctx: OperatorContext) -> Judgement:
    """Top statements of the workload by total time; a warning when their mean time passes the threshold.

    Query texts are data from the target: they are quoted in evidence, never interpreted.
    """
    t = ctx.settings.thresholds
    load = workload_of(ctx.workspace.rows(StatementTotals, TOTALS_SQL), t)
    reported = [r for i, r in enumerate(load.heavy) if i < TOP or is_slow(r, t)][:MAX_REPORTED]
    for row in reported:
        slow = is_slow(row, t)
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
                    "share_of_workload": row.total_exec_time / load.total_ms,
                    "calls_in_window": row.calls_delta,
                }
            ),
            recommendation="Examine its plan (EXPLAIN) and the indexes on the tables it reads."
            if slow
            else "",
        )
    return Coverage(
        f"top {TOP} of {load.statements} workload statements ({load.total_ms:,.0f} ms in all) and those"
        f" past the slow thresholds, each taking at least {t.slow_query_min_share:.0%} of that time and"
        f" {t.slow_query_min_total_ms:,.0f} ms; left out: {load.own} of dbcrew's own statements,"
        f" {load.utility} utility commands (DDL, maintenance, transaction control)"
    )
