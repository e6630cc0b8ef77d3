"""When a watched incident is diagnosed, and the foreground watcher's diagnoses in the background.

An incident is diagnosed when it closes; one still open after LONG_INCIDENT is also diagnosed once
as it stands (its close's diagnosis then joins that one in the store: dbcrew/store/incident_diagnoses.py).
`dbcrew server`'s watching starts a review run of the pool for each (dbcrew/flows/watching.py);
`dbcrew watch` in the foreground has no pool, so its diagnoses run here, beside the sampling loop,
as `dbcrew diagnose --from --to` runs one without a server (`diagnose_incident`: the crew's plain
phases on the stored samples, dbcrew/roles/spine.py):

- **never delaying a pass**: the loop only queues the incident (`submit` returns at once); each
  target has its own queue and thread, so one target's incidents are diagnosed one at a time, in
  order, and at most `at_once` diagnoses run together over all targets (each is a crew run: CPU);
- **stored whole or not at all**: a diagnosis is kept with its incident in one transaction once its
  report is written; one the stop cut short is not kept (its incident is then not diagnosed, and
  said so);
- **a bounded stop**: `close(wait)` waits at most `wait` seconds for the diagnosis in flight (the
  process asked to stop winds the crew down: dbcrew.stopping), forbids any store write after it
  returns, and returns the incidents left undiagnosed, for the watcher to say.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from dbcrew import stopping
from dbcrew.logs import data_logger
from dbcrew.models.incident import STRONGEST_SIGNALS
from dbcrew.models.interval import PastInterval
from dbcrew.models.request import ReviewRequest
from dbcrew.roles.crew.context import RunContext
from dbcrew.roles.report.reporter import report_path
from dbcrew.roles.spine import PlainPhases, kept_in_reports, review
from dbcrew.settings.run import Settings
from dbcrew.store.backends import StoreUnavailable
from dbcrew.store.incident_diagnoses import IncidentDiagnosis
from dbcrew.store.samples import Incident, SampleStore
from dbcrew.targets import PostgresTarget
from dbcrew.targets.postgres import first_line
from dbcrew.vocabulary import Scenario

log = data_logger(__name__)

LONG_INCIDENT = timedelta(minutes=10)  # an incident open this long is diagnosed as it stands
DIAGNOSES_AT_ONCE = 1  # over all targets: a diagnosis is a crew run, CPU the sampling shares


def incident_alert_text(incident: Incident) -> str:
    """The incident as the diagnosis's alert text: its abnormal signals, their usual level and their peak (data)."""
    signals = "; ".join(
        f"{s.name} {s.baseline_median:.4g} -> {s.peak:.4g}"
        for s in incident.signals[:STRONGEST_SIGNALS]
    )
    return f"watcher incident from {incident.started_at:%H:%M:%S} to {incident.ended_at:%H:%M:%S} UTC: {signals}"


def incident_interval(incident: Incident, now: datetime | None = None) -> PastInterval:
    """What a diagnosis of the incident reads: from its start to its end (so far, while it is open)."""
    return PastInterval(
        start=incident.started_at, end=min(incident.ended_at, now or datetime.now(UTC))
    )


def diagnose_incident(target: PostgresTarget, incident: Incident, brain: str) -> IncidentDiagnosis:
    """The incident's interval diagnosed by the crew from the stored samples as `dbcrew diagnose --from --to` runs
    it without a Prefect server (dbcrew/roles/spine.py's plain phases); the report under reports_root()/<run id>, kept
    and pruned there as a server's runs are."""
    request = ReviewRequest(
        target=target,
        scenario=Scenario.DIAGNOSE,
        brain=brain,
        settings=Settings(alert=incident_alert_text(incident)),
        interval=incident_interval(incident),
        signals=incident.signals,
    )
    run = RunContext.of(request, target, Path())
    with kept_in_reports(run):
        report = review(run, PlainPhases)
    return IncidentDiagnosis.of_report(
        report, report_path(run.out_dir).resolve(), while_open=not incident.closed
    )


class DiagnosisSchedule:
    """Which incidents are due for a diagnosis as the rounds report them: each at its close, and a long one once
    while open (not again by a watcher that carried it on after the one that diagnosed it: its kept diagnoses say)."""

    def __init__(self, long_incident: timedelta = LONG_INCIDENT):
        self.long_incident = long_incident
        self._open: set[tuple[str, datetime]] = set()  # (target, start) diagnosed while open

    def due(self, incident: Incident, at: datetime) -> bool:
        key = (incident.target, incident.started_at)
        if incident.closed:
            self._open.discard(key)
            return True
        if key in self._open or at - incident.started_at < self.long_incident:
            return False
        if any(d.while_open for d in incident.diagnoses):
            self._open.add(key)
            return False
        self._open.add(key)
        return True


Diagnose = Callable[[PostgresTarget, Incident], IncidentDiagnosis]


@dataclass
class _Lane:
    """One target's queue of incidents and the thread that diagnoses them in order."""

    incidents: queue.SimpleQueue[tuple[PostgresTarget, Incident] | None] = field(
        default_factory=queue.SimpleQueue
    )
    thread: threading.Thread | None = None
    pending: list[tuple[PostgresTarget, Incident]] = field(
        default_factory=list
    )  # queued or in flight, oldest first
    running: Incident | None = None  # the one its crew is diagnosing now


@dataclass(frozen=True)
class Undiagnosed:
    """An incident the watcher leaves without its diagnosis, and why."""

    target: PostgresTarget
    incident: Incident
    why: str

    def describe(self) -> str:
        i = self.incident
        return f"{self.target.display}: incident from {i.started_at:%Y-%m-%d %H:%M:%S} UTC{'' if i.closed else ' (open)'}: {self.why}"


class BackgroundDiagnoser:
    """Diagnoses incidents off the sampling loop with `diagnose` (the crew on the stored samples) and keeps each
    diagnosis with its incident in `store`."""

    def __init__(self, diagnose: Diagnose, store: SampleStore, at_once: int = DIAGNOSES_AT_ONCE):
        self._diagnose = diagnose
        self._store = store
        self._slots = threading.Semaphore(max(1, at_once))
        self._lanes: dict[str, _Lane] = {}
        # Held for the lanes, their pending lists, the lists below and every store write: once close() has
        # taken it after its wait, no diagnosis is written.
        self._guard = threading.Lock()
        self._accepting = True
        self._writable = True
        self.undiagnosed: list[Undiagnosed] = []  # said when the watcher stops

    def submit(self, target: PostgresTarget, incident: Incident) -> None:
        """Queue the diagnosis of `target`'s incident on its lane; returns at once."""
        with self._guard:
            if not self._accepting:
                self.undiagnosed.append(Undiagnosed(target, incident, "the watcher was stopping"))
                return
            lane = self._lanes.setdefault(incident.target, _Lane())
            lane.pending.append((target, incident))
            lane.incidents.put((target, incident))
            if lane.thread is None:
                lane.thread = threading.Thread(
                    target=self._serve,
                    args=(lane,),
                    daemon=True,  # a diagnosis that outlives close()'s wait never holds the process
                    name=f"dbcrew-diagnose-{len(self._lanes)}",
                )
                lane.thread.start()

    def _serve(self, lane: _Lane) -> None:
        while (queued := lane.incidents.get()) is not None:
            target, incident = queued
            with self._slots:
                lane.running = incident
                why = (
                    self._diagnose_one(target, incident)
                    if not stopping.requested()
                    else "the stop came first"
                )
                lane.running = None
            with self._guard:
                lane.pending.remove(queued)
                if why:
                    self.undiagnosed.append(Undiagnosed(target, incident, why))

    def _diagnose_one(self, target: PostgresTarget, incident: Incident) -> str:
        """Diagnose and keep; why it was not kept, empty when it was."""
        when = (
            f"{target.display}: incident from {incident.started_at:%H:%M:%S}"
            f"{'' if incident.closed else ' (still open)'}"
        )
        try:
            diagnosis = self._diagnose(target, incident)
        except Exception as exc:  # noqa: BLE001 - one incident's failed diagnosis is said and kept as undiagnosed; the watch goes on
            why = f"its diagnosis failed: {type(exc).__name__}: {first_line(exc)}"
            log.error("watch: %s: %s", when, why)
            return why
        with self._guard:
            if not self._writable or (diagnosis.partial and stopping.requested()):
                return "the stop cut its diagnosis short"  # nothing half-kept
            try:
                self._store.record_diagnosis(incident.ref(), diagnosis)
            except StoreUnavailable as exc:
                log.error("watch: %s: its diagnosis was not kept: %s", when, exc)
                return f"its diagnosis was not kept: {exc}"
        log.warning(
            "watch: %s diagnosed: %s; report: %s", when, diagnosis.describe(), diagnosis.where()
        )
        return ""

    def close(self, wait: float) -> list[Undiagnosed]:
        """Take no more incidents, wait at most `wait` seconds for those queued or in flight, then forbid any later
        store write; the incidents left undiagnosed, oldest first, each with why."""
        with self._guard:
            self._accepting = False
            lanes = list(self._lanes.values())
        for lane in lanes:
            lane.incidents.put(None)
        deadline = time.monotonic() + max(0.0, wait)
        for lane in lanes:
            if lane.thread is not None:
                lane.thread.join(max(0.0, deadline - time.monotonic()))
        with self._guard:  # waits for a write in progress; none starts after this
            self._writable = False
            left = [
                Undiagnosed(
                    t,
                    i,
                    "still being diagnosed when the wait ended" if i is lane.running else "queued",
                )
                for lane in lanes
                for t, i in lane.pending
            ]
            return sorted([*self.undiagnosed, *left], key=lambda u: u.incident.started_at)
