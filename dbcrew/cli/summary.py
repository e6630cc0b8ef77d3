"""What a finished review or diagnosis prints (its problems or causes, where the report is) and its exit
code: 3 when the report has no history because the store could not be used (docs/exit-codes.md)."""

from __future__ import annotations

from pathlib import Path

import typer

from dbcrew.cli.console import SEVERITY_STYLES, line, show
from dbcrew.models import Report
from dbcrew.models.request import ReviewRequest
from dbcrew.roles.report.reporter import report_path


def report_file(request: ReviewRequest) -> Path:
    assert request.out is not None  # prepare_review chose the folder
    return report_path(request.out)


# A review whose report is written but whose history is not: neither a clean 0 nor an internal error.
EXIT_PARTIAL = 3


def exit_partial(report: Report) -> None:
    """Exit 3 when the report has no history because the store could not be used (the report says why)."""
    if report.history_unavailable is not None:
        raise typer.Exit(code=EXIT_PARTIAL)


def show_report_file(report: Report, request: ReviewRequest) -> None:
    """Where the report is, and, when the store could not be used, that it has no history and why."""
    if report.history_unavailable is not None:
        show(line((report.history_unavailable.describe(), "yellow")))
    show(line(f"report: {report_file(request)}"))


def print_diagnosis(report: Report, request: ReviewRequest) -> None:
    show(
        line(
            (report.target.display, "bold"),
            f": {report.diagnosis.title if report.diagnosis else report.summary}",
        )
    )
    for cause in report.root_causes:
        show(line(f"  {cause.confidence:.2f} {cause.code:28} {cause.solution[:90]}"))
    show_report_file(report, request)


def print_summary(report: Report, request: ReviewRequest) -> None:
    problems = [f for f in report.findings if f.is_problem]
    show(line((report.target.display, "bold"), f": {report.summary}"))
    for finding in problems[:10]:
        severity = finding.severity.value
        show(
            line(
                "  ",
                (f"{severity:8}", SEVERITY_STYLES[severity]),
                f" {finding.code:26} {finding.object}",
            )
        )
    if len(problems) > 10:
        show(line(f"  ... and {len(problems) - 10} more"))
    show_report_file(report, request)
