"""`dbcrew watch TARGET... [--every 15]`: sample targets into the shared store in the foreground, one line per pass;
`dbcrew incidents TARGET [--json] [--since -7d]`: the incidents the watcher detected, each with its diagnosis.

What it stores is what `dbcrew diagnose --from --to` reads afterwards. Each incident is diagnosed
when it closes (and a long one also as it stands), in the background, as `dbcrew diagnose --from
--to` would without a server (dbcrew/roles/incident_diagnosis.py), and the diagnosis is kept
with the incident. Ctrl-C (or SIGTERM) ends the loop at its next pause; the diagnosis in flight gets
DIAGNOSIS_WAIT seconds to finish (less than the interrupt's grace period), the incidents left
undiagnosed are said, one line each, and the command exits 130 (143) as the other commands do
(dbcrew/cli/interrupts.py).
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Annotated

import typer

from dbcrew.cli import interrupts
from dbcrew.cli.console import fail, line, show
from dbcrew.errors import UsageError
from dbcrew.models.interval import parse_moment
from dbcrew.operators.window.metrics import ACTIVE, COMMITS, ROWS_INSERTED, WAIT_LOCK
from dbcrew.roles.incident_diagnosis import BackgroundDiagnoser, DiagnosisSchedule
from dbcrew.roles.watching import DEFAULT_EVERY, RoundReport, TargetOutcome, Watcher
from dbcrew.store.samples import Incident, open_samples
from dbcrew.targets import PostgresTarget, parse_target
from dbcrew.targets.postgres import first_line

DIAGNOSIS_WAIT = 5.0  # seconds a stopping watcher waits for the diagnosis in flight (interrupts.GRACE_SECONDS: 10)

SHOWN = (
    (ACTIVE, "active", ".1f"),
    (WAIT_LOCK, "lock waits", ".1f"),
    (COMMITS, "commits/s", ".0f"),
    (ROWS_INSERTED, "inserts/s", ".0f"),
)


def describe(outcome: TargetOutcome) -> str:
    """One target's part of a pass line: a few of its rates, or why it could not be sampled."""
    if outcome.gap:
        return f"{outcome.display}: no sample ({outcome.gap})"
    if not outcome.stored:
        return f"{outcome.display}: first readings"
    rates = ", ".join(
        f"{format(outcome.rates.get(metric.name, 0.0), fmt)} {label}"
        for metric, label, fmt in SHOWN
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
    except ValueError as exc:
        raise UsageError(f"--since: {first_line(exc)}") from None
    store = open_samples()  # a bad DBCREW_* variable is its own usage error, named as such
    identity = store.identity_of(parse_target(target).display) if "://" in target else target
    if identity is None or store.watched(identity) is None:
        raise UsageError(
            f"{target} has not been watched (no samples in the store {store.location}): run `dbcrew watch` first"
        )
    found = store.incidents(identity, moment)
    if as_json:
        print(json.dumps([as_json_object(i) for i in found], indent=2))
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
        show(line(f"  {diagnosis_line(incident)}"))


def as_json_object(incident: Incident) -> dict[str, object]:
    """The incident as `--json` prints it: its stored fields and `diagnosis`, the one that stands (null: none)."""
    diagnosis = incident.diagnosis
    return {
        **incident.model_dump(mode="json"),
        "diagnosis": None if diagnosis is None else diagnosis.model_dump(mode="json"),
    }


def diagnosis_line(incident: Incident) -> str:
    """What the incident's diagnosis found and where its report is, or that it has none (yet)."""
    diagnosis = incident.diagnosis
    if diagnosis is None:
        return "not diagnosed" + ("" if incident.closed else " yet")
    where = diagnosis.where()
    return f"causes: {diagnosis.describe()}" + (f"; report: {where}" if where else "")


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
    diagnose: Annotated[
        bool,
        typer.Option(
            help="diagnose each incident in the background when it closes, its diagnosis kept with it"
        ),
    ] = True,
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
    if not diagnose:
        interrupts.run_interruptible(lambda: Watcher(parsed, store, every=every).run(print_round))
        return
    from dbcrew.roles.brains import default_brain
    from dbcrew.roles.incident_diagnosis import (
        diagnose_incident,
    )  # the crew: loaded only when it diagnoses

    brain = default_brain()
    diagnoser = BackgroundDiagnoser(
        lambda target, incident: diagnose_incident(target, incident, brain), store
    )
    interrupts.run_interruptible(
        lambda: watch_and_diagnose(Watcher(parsed, store, every=every), diagnoser)
    )


def watch_and_diagnose(watcher: Watcher, diagnoser: BackgroundDiagnoser) -> None:
    """The watcher's loop, each incident due for a diagnosis handed to `diagnoser`; when the loop ends, a bounded
    wait for the diagnosis in flight and one line per incident left undiagnosed."""
    schedule = DiagnosisSchedule()
    targets: dict[str, PostgresTarget] = {
        w.watch.target.display: w.watch.target for w in watcher.watched
    }

    def on_round(report: RoundReport) -> None:
        print_round(report)
        for outcome in report.outcomes:
            for incident in outcome.incidents():
                if schedule.due(incident, report.at):
                    diagnoser.submit(targets[outcome.display], incident)

    try:
        watcher.run(on_round)
    finally:
        for left in diagnoser.close(DIAGNOSIS_WAIT):
            fail(f"dbcrew: not diagnosed: {left.describe()}")
