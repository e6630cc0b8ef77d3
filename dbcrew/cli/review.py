"""`dbcrew review` (a database's health, written as a report) and `dbcrew demo` (the same review of a
planted shop database on an embedded PostgreSQL)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dbcrew.cli.options import Brain, OutDir
from dbcrew.cli.reviewing import DEADLINE_HELP, DEFAULT_DEADLINE, prepare_review
from dbcrew.cli.running import run_cli_review
from dbcrew.cli.summary import exit_partial, print_summary
from dbcrew.models import Report
from dbcrew.settings.run import Ablations


def review(
    target: Annotated[
        str, typer.Argument(help="postgresql://user@host:port/dbname (or ?host=/socket/dir)")
    ],
    window: Annotated[float, typer.Option(help="seconds to sample activity and counters")] = 10.0,
    out_dir: OutDir = None,
    brain: Brain = None,
    inject_fault: Annotated[
        list[str],
        typer.Option(
            help="operator:KIND[:times], KIND one of timeout misfit disconnect bad_param missing_agent lost_dependency, to test recovery"
        ),
    ] = [],  # noqa: B006
    no_monitor: Annotated[
        bool,
        typer.Option("--no-monitor", help="ablation: failures are not classified, dependents skip"),
    ] = False,
    no_reflection: Annotated[
        bool,
        typer.Option(
            "--no-reflection",
            help="ablation: no plan reflection, no worker self-correction (retry, reconnect-and-resume)",
        ),
    ] = False,
    no_gap_narrow: Annotated[
        bool,
        typer.Option(
            "--no-gap-narrow", help="ablation: a re-plan takes a whole new plan and reruns all"
        ),
    ] = False,
    no_memory: Annotated[
        bool, typer.Option("--no-memory", help="ablation: neither use nor keep lessons across runs")
    ] = False,
    threshold: Annotated[
        list[str],
        typer.Option(
            help="NAME=VALUE overriding a health-check threshold for this run, e.g. long_running_query_seconds=300"
        ),
    ] = [],  # noqa: B006
    deadline: Annotated[float, typer.Option(help=DEADLINE_HELP)] = DEFAULT_DEADLINE,
) -> None:
    """Review a database's health and write a report."""
    ablations = Ablations(
        monitor=not no_monitor,
        reflection=not no_reflection,
        gap_narrow=not no_gap_narrow,
        memory=not no_memory,
    )
    request = prepare_review(
        target,
        window=window,
        out_dir=out_dir,
        brain=brain,
        faults=inject_fault,
        ablations=ablations,
        thresholds=threshold,
        deadline=deadline,
    )
    report = run_cli_review(request, target)
    print_summary(report, request)
    exit_partial(report)


def demo(
    window: Annotated[float, typer.Option(help="seconds of the review's sampling window")] = 10.0,
    workdir: Annotated[Path, typer.Option(help="where the demo database and reports go")] = Path(
        ".dbcrew/demo"
    ),
) -> None:
    """Start an embedded PostgreSQL, plant problems in a shop database, review it."""
    from dbcrew.cli.demo import run_demo

    def review_demo(url: str, out_dir: Path) -> Report:
        request = prepare_review(url, window=window, out_dir=out_dir, brain="rules")
        report = run_cli_review(request, url)
        print_summary(report, request)
        return report

    missed = run_demo(workdir, review_demo)
    if missed:
        raise typer.Exit(code=1)
