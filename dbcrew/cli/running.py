"""A prepared review run in the foreground of `dbcrew review`, `diagnose` and `demo`: a progress bar on the
terminal, in this process or on a Prefect server, its errors said once, Ctrl-C stopping it cleanly."""

from __future__ import annotations

import logging
from typing import Any

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from dbcrew.cli import interrupts
from dbcrew.cli.console import err, fail
from dbcrew.cli.reviewing import prefect_env, review_in_process, runs_in_process, start_review
from dbcrew.models import Report
from dbcrew.models.request import ReviewRequest
from dbcrew.redact import redact


def run_errors_said_once() -> None:
    """Keep failed flow and task runs off Prefect's console handler: the CLI says a run's error itself, in one
    line (`main`), where Prefect would print it again as each failed run's traceback (a subflow's and its
    flow's: two). The server still gets these logs for its UI; DBCREW_DEBUG=1 shows the traceback."""
    from prefect.logging.configuration import ensure_logging_setup
    from prefect.logging.handlers import PrefectConsoleHandler

    ensure_logging_setup()  # Prefect's handlers, as a flow call would set them up

    def not_a_run_error(record: logging.LogRecord) -> bool:
        run_log = record.name.startswith(("prefect.flow_runs", "prefect.task_runs"))
        return not (run_log and record.levelno >= logging.ERROR)

    for handler in logging.getLogger().handlers:
        if isinstance(handler, PrefectConsoleHandler):
            handler.addFilter(not_a_run_error)


def run_cli_review(request: ReviewRequest, url: str) -> Report:
    """Run the review flows of a prepared request with a progress bar; `url` is what the user typed."""
    if redact(url) != url:
        fail(
            "dbcrew: warning: a password on the command line can be seen by other users while the process starts;"
            " use PGPASSWORD, ~/.pgpass or a Prefect Secret block instead"
        )
    prefect_env()
    run_errors_said_once()
    in_process = runs_in_process(request)
    if not in_process:
        from dbcrew.cli.temporary_server import start_temporary_server

        start_temporary_server()
    from dbcrew import progress
    from dbcrew.progress import ProgressEvent

    assert request.target is not None  # prepare_review parsed it
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=err, transient=True) as bar:
        job = bar.add_task(f"reviewing {request.target.display}", total=None)

        def on_event(event: ProgressEvent, data: dict[str, Any]) -> None:
            if event is ProgressEvent.PLAN:
                bar.update(job, total=data["total"], completed=data["done"])
            elif event is ProgressEvent.TASK:
                bar.advance(job)

        stop = progress.listen(on_event)
        try:
            run = review_in_process if in_process else start_review
            return interrupts.run_interruptible(lambda: run(request))
        finally:
            stop()
