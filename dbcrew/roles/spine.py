"""One review, start to end, with no orchestrator: the phases, the report, its record, its files, its post.

`review` is the run itself, and the one place that says what each fault costs it (its failure
policy). The loop initialize -> execute -> (re-plan -> execute)* takes its phases one way or
another (`ReviewPhases`): as Prefect flows (dbcrew/flows/phases.py `PrefectPhases`, what a deployed or
CLI review runs) or as plain calls (`PlainPhases`: a diagnosis with no Prefect server to report
to, the tests and benchmarks that measure the crew without Prefect); a review under Prefect posts
its report as artifacts through the `post` it is given (dbcrew/flows/artifacts.py). Nothing here imports
Prefect, so a diagnosis on a host that gives its process 2 % of a core starts sampling without
first paying for Prefect's imports and a temporary server.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol

from dbcrew.errors import OutNotWritable
from dbcrew.logs import data_logger
from dbcrew.models import Brief, Report, Strategy
from dbcrew.models.report import HistoryUnavailable
from dbcrew.roles.crew import run as steps
from dbcrew.roles.crew.context import RunContext
from dbcrew.roles.crew.execution import ExecutionResult, ExecutionState
from dbcrew.roles.crew.run import (
    Initialized,
    PhaseLog,
    ReplanOutcome,
    ReviewResult,
    execute_plain,
    remember,
    replan_phase,
)
from dbcrew.roles.report.recording import failed_report, record_history
from dbcrew.roles.report.reporter import build_report, prune_reports_due, write_report
from dbcrew.settings.paths import reports_max_bytes, reports_retention_days, reports_root
from dbcrew.store import StoreUnavailable
from dbcrew.workspace import discard, release

log = data_logger(__name__)

Post = Callable[[RunContext, Report], None]
"""Where a written report is posted besides its folder (dbcrew/flows/artifacts.py `post_report`: Prefect artifacts)."""


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


def review(run: RunContext, phases: ReviewPhases, post: Post | None = None) -> Report:
    """The run: its phases, the report built with the run's brain, its record in the target's history
    (the shared store), report.json/md/html written into `run.out_dir`, then `post`ed.

    What each fault costs, said here only; each costs what it touches:
    - a phase (or the report's building) that raises: the run is recorded as failed, the error goes on;
    - a store that cannot be used: the history; the report is written, saying why it has none
      (`with_history`), and a failure it should record goes on with a note that it was not recorded;
    - a folder that refuses the report or its trends chart (OutNotWritable): the run is recorded as
      failed, not as completed with a report that does not exist, and the error goes on
      (`recorded_and_written`);
    - a post that raises: the run stays recorded and written, the error goes on.
    The run's workspace connection closes before the post: the report and the workspace file are what
    remains."""
    try:
        try:
            # one session per read at once, not one per read; the report's own reads (did the server restart?) too
            with run.target.reusing_sessions(run.settings.target_sessions):
                result = run_phases(run, phases)
                report = build_report(run, result)
        except Exception as exc:
            record_failure(run, exc)
            raise
        report = recorded_and_written(run, report)
    finally:
        release(run.workspace_path)
    if post is not None:
        post(run, report)
    return report


def run_phases(run: RunContext, phases: ReviewPhases) -> ReviewResult:
    """initialize -> execute -> (re-plan -> execute)*, at most `max_replans` re-plans; then remember."""
    init = phases.initialize(run)
    book = PhaseLog(run, init)
    result = book.executed(phases.execute(run, init.brief, init.strategy, book.first_state()))
    while book.replan_due(result):
        outcome = phases.replan(run, init.brief, result)
        result = book.executed(
            phases.execute(run, init.brief, outcome.strategy, book.next_state(result, outcome))
        )
    concluded = book.concluded(result)
    remember(run, concluded)
    return concluded


def recorded_and_written(run: RunContext, report: Report) -> Report:
    """`report` recorded in the target's history, with its trends chart, and written into the run's
    folder; a folder that refuses either leaves the run recorded as failed (when the store took it)."""
    try:
        report = with_history(run, report)
        write_report(report, run.out_dir)
    except OutNotWritable as exc:
        if report.history_unavailable is None:
            record_failure(run, exc)
        raise
    return report


def with_history(run: RunContext, report: Report) -> Report:
    """`report` recorded, with what changed since the target's previous runs; a store that cannot be
    used costs it only that: it says why it has no history."""
    try:
        return record_history(run, report)  # its trends chart goes into the run's folder
    except StoreUnavailable as exc:
        log.warning("%s", exc)
        return report.model_copy(
            update={
                "history_unavailable": HistoryUnavailable(store=exc.location, reason=exc.reason)
            }
        )


def record_failure(run: RunContext, error: Exception) -> None:
    """Record the run as failed with `error`; a store that cannot be used says so on the error, which goes on."""
    try:
        record_history(run, failed_report(run, error))
    except StoreUnavailable as exc:
        error.add_note(f"not recorded in the history: {exc}")
        log.warning("run %s not recorded in the history: %s", run.run_id, exc)


@contextmanager
def kept_in_reports(run: RunContext) -> Iterator[RunContext]:
    """For a run without an `out`: its folder is reports_root()/<run id>, where it stays without its
    workspace, and the reports past their retention (age, then size) on this disk (a worker's, or a
    foreground watcher's) are dropped as the run ends, failed or not (a walk every few minutes at most)."""
    in_reports = run.out is None
    if in_reports:
        run.out_dir = reports_root() / run.run_id
    try:
        yield run
    finally:
        if in_reports:
            # The workspace is 95 % of a run's folder (4.7 of 4.8 MB for a small database): here the
            # report, its charts and the posted artifacts are what stays of a run, a failed one's too.
            discard(run.workspace_path)
            prune_reports_due(reports_root(), reports_retention_days(), reports_max_bytes())
