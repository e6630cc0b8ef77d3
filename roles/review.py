"""The one review path: a run and a phases implementation in, the written Report out.

The flow (PrefectPhases), the tests and every bench section (PlainPhases or their own phases)
all review through `review`, so a review is assembled, summarized and written in one place.
Publishing the report elsewhere (Prefect artifacts) is the caller's business, after it returns.
"""

from __future__ import annotations

from dbcrew.models import Report
from dbcrew.workspace import release
from roles.crew import PhaseRunner, RunContext, run_phases
from roles.history import reviewed
from roles.reporter import build_report, write_report


def review(run: RunContext, phases: PhaseRunner) -> Report:
    """Run the phases, build the report with the run's brain, record it in the target's history (the shared
    store: a review that raises is recorded as failed), write report.json/md/html into `run.out_dir`.
    The run's workspace connection closes then: the report and the workspace file are what remains."""
    try:
        report = reviewed(run, lambda: build_report(run, run_phases(run, phases)))
        write_report(report, run.out_dir)
    finally:
        release(run.workspace_path)
    return report
