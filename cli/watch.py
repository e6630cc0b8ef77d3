"""`dbcrew watch TARGET... [--every 15]`: sample targets into the shared store in the foreground, one line per pass;
`dbcrew incidents TARGET [--json] [--since -7d]`: the incidents the watcher detected.

What it stores is what `dbcrew diagnose --from --to` reads afterwards. Ctrl-C (or SIGTERM) ends the
loop at its next pause and the command exits 130 (143) as the other commands do (cli/interrupts.py).
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Annotated

import typer

from cli import interrupts
from cli.console import line, show
from dbcrew.errors import UsageError
from dbcrew.models.interval import parse_moment
from dbcrew.store.samples import open_samples
from dbcrew.targets import parse_target
from dbcrew.targets.postgres import first_line
from roles.watching import DEFAULT_EVERY, RoundReport, TargetOutcome, Watcher

SHOWN = (
    ("act.active", "active", ".1f"),
    ("act.wait_lock", "lock waits", ".1f"),
    ("db.xact_commit", "commits/s", ".0f"),
    ("db.tup_inserted", "inserts/s", ".0f"),
)


def describe(outcome: TargetOutcome) -> str:
    """One target's part of a pass line: a few of its rates, or why it could not be sampled."""
    if outcome.gap:
        return f"{outcome.display}: no sample ({outcome.gap})"
    if not outcome.stored:
        return f"{outcome.display}: first readings"
    rates = ", ".join(
        f"{format(outcome.rates.get(name, 0.0), fmt)} {label}" for name, label, fmt in SHOWN
    )
    incident = outcome.incident
    state = (
        ""
        if incident is None
        else (
            f", incident since {incident.started_at:%H:%M:%S} {'over' if incident.closed else 'ongoing'}"
            f" ({', '.join(s.name for s in incident.signals[:3])})"
        )
    )
    return (
        f"{outcome.display}: {rates}" + (", session resumed" if outcome.reconnects else "") + state
    )


def print_round(report: RoundReport) -> None:
    show(line(f"{report.at:%H:%M:%S} ", "; ".join(describe(o) for o in report.outcomes)))


def incidents(
    target: Annotated[
        str,
        typer.Argument(
            help="the target's URL (any password is ignored) or its identity (system identifier/database)"
        ),
    ],
    since: Annotated[
        str,
        typer.Option(
            help="list the incidents that ended after this: ISO 8601 or relative (-30m, -2h, -1d)"
        ),
    ] = "-7d",
    as_json: Annotated[
        bool, typer.Option("--json", help="print the incidents as a JSON array")
    ] = False,
) -> None:
    """List a watched target's incidents (from `dbcrew watch`), oldest first."""
    try:
        moment = parse_moment(since, datetime.now(UTC))
        store = open_samples()
    except ValueError as exc:
        raise UsageError(f"--since: {first_line(exc)}") from None
    identity = store.identity_of(parse_target(target).display) if "://" in target else target
    if identity is None or store.watched(identity) is None:
        raise UsageError(
            f"{target} has not been watched (no samples in the store {store.location}): run `dbcrew watch` first"
        )
    found = store.incidents(identity, moment)
    if as_json:
        print(json.dumps([i.model_dump(mode="json") for i in found], indent=2))
        return
    if not found:
        show(line(f"no incident on {identity} since {moment:%Y-%m-%d %H:%M} UTC"))
    for incident in found:
        seconds = (incident.ended_at - incident.started_at).total_seconds()
        signals = "; ".join(
            f"{s.name} {s.baseline_median:.4g} -> {s.peak:.4g} (z {s.z:g})"
            for s in incident.signals[:4]
        )
        show(
            line(
                f"{incident.started_at:%Y-%m-%d %H:%M:%S} UTC  {seconds:5.0f} s  {'' if incident.closed else 'ongoing  '}{signals}"
            )
        )


def watch(
    targets: Annotated[
        list[str],
        typer.Argument(
            help="postgresql://user@host:port/dbname (or ?host=/socket/dir), one or more"
        ),
    ],
    every: Annotated[
        float, typer.Option(help="seconds between two samples of each target")
    ] = DEFAULT_EVERY,
) -> None:
    """Sample targets' counters every few seconds into the store (for diagnoses of past intervals), until Ctrl-C."""
    if not math.isfinite(every) or every < 1:
        raise UsageError(
            "--every must be a finite number of seconds, at least 1 (statistics are reported once a second)"
        )
    parsed = [parse_target(t) for t in targets]
    store = open_samples()
    show(
        line(
            f"watching {len(parsed)} target(s) every {every:g} s into {store.location}; Ctrl-C stops"
        )
    )
    interrupts.run_interruptible(lambda: Watcher(parsed, store, every=every).run(print_round))
