"""One review, start to end, with no orchestrator: the phases' loop, the report, its record and files.

The loop initialize -> execute -> (re-plan -> execute)* takes its phases one way or another
(`ReviewPhases`): as Prefect flows (flows/phases.py `PrefectPhases`, what a deployed or CLI review
runs) or as plain calls (`PlainPhases`: a diagnosis with no Prefect server to report to, the tests
and benchmarks that measure the crew without Prefect). Nothing here imports Prefect, so a
diagnosis on a host that gives its process 2 % of a core starts sampling without first paying
for Prefect's imports and a temporary server.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from dbcrew.models import Brief, Report, Strategy
from dbcrew.settings import reports_max_bytes, reports_retention_days, reports_root
from dbcrew.workspace import discard, release
from roles.crew import run as steps
from roles.crew.context import RunContext
from roles.crew.execution import ExecutionResult, ExecutionState
from roles.crew.run import (
    Initialized,
    PhaseLog,
    ReplanOutcome,
    ReviewResult,
    execute_plain,
    remember,
    replan_phase,
)
from roles.report.recording import reviewed
from roles.report.reporter import build_report, prune_reports


class ReviewPhases(Protocol):
    """A review's three phases, run one way or the other (the report's Phases counts their work)."""

    def initialize(self, run: RunContext) -> Initialized: ...

    def execute(
        self, run: RunContext, brief: Brief, strategy: Strategy, state: ExecutionState
    ) -> ExecutionResult: ...

    def replan(self, run: RunContext, brief: Brief, result: ExecutionResult) -> ReplanOutcome: ...


class PlainPhases:
    """The phases as plain calls: no flow runs, no artifacts."""

    initialize = staticmethod(steps.initialize)
    execute = staticmethod(execute_plain)
    replan = staticmethod(replan_phase)


def review(run: RunContext, phases: ReviewPhases) -> Report:
    """Run the phases, build the report with the run's brain, record it in the target's history (the shared
    store: a review that raises is recorded as failed) and write report.json/md/html into `run.out_dir`
    (roles/report/recording.py's `reviewed`).
    The run's workspace connection closes then: the report and the workspace file are what remains."""
    try:
        report = reviewed(run, lambda: build_report(run, run_phases(run, phases)))
    finally:
        release(run.workspace_path)
    return report


def run_phases(run: RunContext, phases: ReviewPhases) -> ReviewResult:
    """initialize -> execute -> (re-plan -> execute)*, at most `max_replans` re-plans; then remember."""
    init = phases.initialize(run)
    log = PhaseLog(run, init)
    result = log.executed(phases.execute(run, init.brief, init.strategy, log.first_state()))
    while log.replan_due(result):
        outcome = phases.replan(run, init.brief, result)
        result = log.executed(
            phases.execute(run, init.brief, outcome.strategy, log.next_state(result, outcome))
        )
    concluded = log.concluded(result)
    remember(run, concluded)
    return concluded


def kept_in_reports(run: RunContext, review_it: Callable[[], Report]) -> Report:
    """`review_it()`; for a run without an `out`, into reports_root()/<run id>, without its workspace, then drop
    the reports past their retention (age, then size) on this disk (a worker's, or a foreground watcher's)."""
    in_reports = run.out is None
    if in_reports:
        run.out_dir = reports_root() / run.run_id
    try:
        return review_it()
    finally:
        if in_reports:
            # The workspace is 95 % of a run's folder (4.7 of 4.8 MB for a small database): here the
            # report, its charts and the posted artifacts are what stays of a run, a failed one's too.
            discard(run.workspace_path)
            prune_reports(reports_root(), reports_retention_days(), reports_max_bytes())
