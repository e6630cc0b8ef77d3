"""`dbcrew diagnose` (the root causes of an anomaly happening now, or of a past interval) and `dbcrew
baseline` (a quiet window recorded for it to compare against)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

from dbcrew.cli.console import line, show
from dbcrew.cli.options import Brain, OutDir
from dbcrew.cli.reviewing import (
    DEADLINE_HELP,
    DEFAULT_DEADLINE,
    past_interval,
    prepare_review,
    prometheus_source,
)
from dbcrew.cli.running import run_cli_review
from dbcrew.cli.summary import exit_partial, print_diagnosis
from dbcrew.errors import UsageError
from dbcrew.models.prometheus import NODE_SELECTOR_HELP, SELECTOR_HELP
from dbcrew.settings.run import Ablations
from dbcrew.vocabulary import Scenario


def diagnose(
    target: Annotated[
        str, typer.Argument(help="postgresql://user@host:port/dbname (or ?host=/socket/dir)")
    ],
    window: Annotated[float, typer.Option(help="seconds to watch the anomaly")] = 10.0,
    alert: Annotated[
        str, typer.Option(help="the alert text, e.g. 'queries 3x slower since 14:00'")
    ] = "",
    baseline: Annotated[
        Path | None, typer.Option(help="a window recorded in a quiet period (dbcrew baseline)")
    ] = None,
    out_dir: OutDir = None,
    brain: Brain = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--from",
            help="diagnose a past interval from what `dbcrew watch` stored instead:"
            " its start, ISO 8601 or relative (-30m, -2h, -1d)",
        ),
    ] = None,
    until: Annotated[
        str | None, typer.Option("--to", help="the past interval's end (default: now)")
    ] = None,
    prometheus: Annotated[
        str | None,
        typer.Option(
            help="with --from: read the past interval from this Prometheus (postgres_exporter and node_exporter"
            " series) instead of the watcher's store, e.g. http://prometheus:9090"
        ),
    ] = None,
    prometheus_selector: Annotated[str, typer.Option(help=SELECTOR_HELP)] = "",
    node_selector: Annotated[str, typer.Option(help=NODE_SELECTOR_HELP)] = "",
    deadline: Annotated[float, typer.Option(help=DEADLINE_HELP)] = DEFAULT_DEADLINE,
    no_composition: Annotated[
        bool,
        typer.Option(
            "--no-composition",
            help="ablation: the full diagnosis playbook, not the team the alert calls for",
        ),
    ] = False,
    no_knowledge: Annotated[
        bool,
        typer.Option(
            "--no-knowledge", help="ablation: no knowledge chunks for the experts and the causes"
        ),
    ] = False,
) -> None:
    """Diagnose the root causes of a performance anomaly happening now, or of a past interval (--from, --to)."""
    interval = past_interval(since, until)
    request = prepare_review(
        target,
        window=window,
        out_dir=out_dir,
        brain=brain,
        scenario=Scenario.DIAGNOSE,
        alert=alert,
        baseline=baseline,
        interval=interval,
        prometheus=prometheus_source(prometheus, prometheus_selector, node_selector, interval),
        deadline=deadline,
        ablations=Ablations(composition=not no_composition, knowledge=not no_knowledge),
    )
    report = run_cli_review(request, target)
    print_diagnosis(report, request)
    exit_partial(report)


def baseline(
    target: Annotated[
        str, typer.Argument(help="postgresql://user@host:port/dbname (or ?host=/socket/dir)")
    ],
    out: Annotated[Path, typer.Option("--out", help="file to write the baseline window to (JSON)")],
    window: Annotated[float, typer.Option(help="seconds to watch the quiet period")] = 10.0,
) -> None:
    """Record a baseline window in a quiet period, for `dbcrew diagnose --baseline`."""
    from dbcrew.operators.window.live import sample_window
    from dbcrew.targets import parse_target

    if not math.isfinite(window) or window < 1:
        raise UsageError("--window must be a finite number of seconds, at least 1")
    if out.is_dir():
        raise UsageError(f"--out {out}: is a folder; give the baseline's file name")
    parsed = parse_target(target)
    with parsed.session():
        pass
    sample_window(parsed, window).save(out)
    show(line(f"baseline: {out}"))
