"""watch_targets: a worker's share of the watching, as one long-lived flow run per watching interval, and what it starts.

Watching is shared over the pool (dbcrew/roles/sharing.py): every worker that serves the `watch` queue
runs, for each group of targets watched at one interval (`watch: {every: 15}` in targets.yaml),
one `watch_targets` flow run in a thread of its own process (WatchShares, started by the worker:
dbcrew/flows/worker.py). Each run holds leases on its share of the group's targets in the shared store
(dbcrew/store/leases.py) and samples only those, so each target is sampled by one worker per
interval; a worker that joins takes its share, and one that dies loses it to the others, without
anyone starting or ending a run for it. The run is not a deployment's: a run taken from the
`watch` queue would land on whichever worker polled first, two shares on one worker and none on
another; a worker runs its own.

Sampling is not a flow run per pass: the server's work per hour grows with the workers and the
groups, never with the targets or the sampling rate: each run reads its own state every
CANCEL_POLL seconds, the published inventory every LOOK_EVERY seconds, posts a health artifact
when something changed or every HEALTH_EVERY seconds, and starts one run per incident.

What a run does with each round, by target (its inventory entry's alert URLs are told):
- an incident that closed starts a diagnosis of its interval, a review_target flow run of the pool
  with the interval, whose alert says what happened, when, and the root causes, with the report's
  link, and which keeps its causes and link with the incident (the health artifact shows them); an
  incident still open after LONG_INCIDENT is diagnosed once as it stands (dbcrew/roles/incident_diagnosis.py);
- a target that stops answering is an alert once when its gap opens, and once when samples resume.
Stopping: the worker stopping (its shares end Cancelled, planned_stop), the run cancelled (in the UI,
or by `dbcrew server` when it stops: the worker then leaves the group unwatched until it restarts),
end the loop at its next pause and release its leases at once. A worker that dies leaves its run
Running: `dbcrew server` marks it crashed (dbcrew/flows/supervision.py), its leases lapse on their own.
"""

from __future__ import annotations

import math
import os
import socket
import threading
import time
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import httpx
from prefect import flow, get_run_logger, tags
from prefect.artifacts import create_table_artifact
from prefect.client.orchestration import get_client
from prefect.client.schemas.objects import FlowRun, State
from prefect.exceptions import PrefectException
from prefect.states import Cancelled
from pydantic import Field

from dbcrew import stopping
from dbcrew.errors import TargetError, UsageError
from dbcrew.flows.incident_diagnosis import DiagnosisBoard
from dbcrew.flows.queues import PoolQueue
from dbcrew.flows.starting import start_run
from dbcrew.flows.targets import connect_entry, published_inventory
from dbcrew.flows.worker import WORKER_STOPPED, run_identifier
from dbcrew.inventory import TargetEntry
from dbcrew.logs import data_logger
from dbcrew.models.interval import PastInterval
from dbcrew.models.target_run import TargetRun
from dbcrew.roles.incident_diagnosis import DiagnosisSchedule, incident_alert_text
from dbcrew.roles.report import operational
from dbcrew.roles.sharing import SessionBudget, ShareLoop, holder_name, lease_for
from dbcrew.roles.watching import RoundReport, TargetOutcome
from dbcrew.settings.environment import environment
from dbcrew.store.leases import LeaseBook
from dbcrew.store.samples import Incident, open_samples
from dbcrew.targets import PostgresTarget

CANCEL_POLL = (
    10.0  # seconds between two reads of the run's own state (a cancelled run stops within this)
)
LOOK_EVERY = 30.0  # seconds between two readings of the published inventory (a target added or removed is met then)
HEALTH_EVERY = 300.0  # seconds between two health artifacts when nothing changed
log = data_logger(__name__)
# holder -> what stops its share (set by its worker's WatchShares): an event, not a flow parameter
_HALTS: dict[str, threading.Event] = {}
# worker -> the sessions its shares hold together (DBCREW_WATCH_SESSIONS)
_BUDGETS: dict[str, SessionBudget] = {}


def start_diagnosis(entry: TargetEntry, incident: Incident, interval: PastInterval) -> FlowRun:
    """The diagnosis of `incident` over `interval`, started as a review_target run on the pool's `incidents` queue:
    a DBA wants what just happened diagnosed now, not after the fleet's reviews queued on `reviews`."""
    request = TargetRun(
        target=entry.name,
        interval=interval,
        alert=incident_alert_text(incident),
        incident=incident.for_run(),
    )
    return start_run(request, ["dbcrew", "incident"], queue=PoolQueue.INCIDENTS)


class Keeper:
    """What the watching run does with each round for its targets: diagnoses, alerts, its health artifact."""

    def __init__(
        self, group: str, published: Published, run_id: UUID | None, halt: threading.Event
    ):
        self.group = group
        self.published = published
        self.run_id = run_id
        self.halt = halt
        self.log = get_run_logger()
        self.gaps: dict[str, str] = {}  # entry name -> why it has no samples (alerted once)
        self.schedule = DiagnosisSchedule()
        self.board = DiagnosisBoard(
            (), CANCEL_POLL
        )  # told of the diagnosed targets as its share meets them
        self.latest: dict[str, TargetOutcome] = {}
        self.incidents: dict[str, Incident] = {}
        self._health_at = 0.0
        self._polled_at = 0.0

    def on_round(self, report: RoundReport) -> None:
        changed = set(self.latest) != {o.key for o in report.outcomes}  # its share changed
        self.latest = {}
        for outcome in report.outcomes:
            entry = self.published.entry(outcome.key)
            if entry is None:
                continue
            self.latest[entry.name] = outcome
            if entry.watch is not None and entry.watch.diagnose:
                self.board.diagnosing.add(entry.name)
            changed |= self._gap(entry, outcome, report.at)
            for incident in outcome.incidents():
                self.incidents[entry.name] = incident
                changed = True
                due = self.schedule.due(incident, report.at)
                if due and entry.watch is not None and entry.watch.diagnose:
                    self._diagnose(entry, incident, report.at)
        changed |= self.board.refresh(self.incidents, report.at)
        now = report.at.timestamp()
        if changed or now - self._health_at >= HEALTH_EVERY:
            self._health_at = now
            self._post_health(report.at)

    def _gap(self, entry: TargetEntry, outcome: TargetOutcome, at: datetime) -> bool:
        """Alert once when a target stops answering, once when it answers again; whether that changed anything."""
        if outcome.gap and entry.name not in self.gaps:
            self.gaps[entry.name] = outcome.gap
            opened = operational.gap_opened(entry.name, outcome.display, at, outcome.gap)
            operational.tell(opened, [entry], self.log)
            return True
        if outcome.stored and entry.name in self.gaps:
            why = self.gaps.pop(entry.name)
            closed = operational.gap_closed(entry.name, outcome.display, at, why)
            operational.tell(closed, [entry], self.log)
            return True
        return False

    def _diagnose(self, entry: TargetEntry, incident: Incident, now: datetime) -> None:
        """Start the diagnosis of the incident's interval as a review_target run of the pool (it alerts itself)."""
        interval = PastInterval(start=incident.started_at, end=min(incident.ended_at, now))
        try:
            run = start_diagnosis(entry, incident, interval)
        except (httpx.HTTPError, PrefectException) as exc:
            self.log.error("incident on %s: its diagnosis could not start: %s", entry.name, exc)
            alert = operational.not_diagnosed(
                entry.name, interval, incident_alert_text(incident), str(exc)
            )
            operational.tell(alert, [entry], self.log)
            return
        self.log.warning(
            "incident on %s (%s): diagnosis run %s started",
            entry.name,
            interval.describe(),
            run.name,
        )

    def _post_health(self, at: datetime) -> None:
        rows = []
        for name, outcome in sorted(self.latest.items()):
            incident = self.incidents.get(name)
            rows.append(
                {
                    "target": name,
                    "state": (
                        f"no samples: {self.gaps[name]}"
                        if name in self.gaps
                        else "watching"
                        if outcome.stored
                        else "first readings"
                    ),
                    "last incident": ""
                    if incident is None
                    else f"{incident.started_at:%Y-%m-%d %H:%M:%S} to {incident.ended_at:%H:%M:%S} UTC"
                    + ("" if incident.closed else " (ongoing)"),
                    "signals": ""
                    if incident is None
                    else ", ".join(s.name for s in incident.signals[:4]),
                    **self.board.columns(name, incident),
                }
            )
        create_table_artifact(
            rows,
            key=f"dbcrew-watch-{self.group}",
            description=f"This worker's share: {len(rows)} targets ({self.group}), as of {at:%Y-%m-%d %H:%M:%S} UTC",
        )

    def pause(self, seconds: float) -> bool:
        """Wait for the next round; True when the run was cancelled or the process asked to stop."""
        remaining = max(0.0, seconds)
        while True:
            step = min(remaining, CANCEL_POLL)
            if self.halt.wait(step) or stopping.requested():
                return True
            remaining -= step
            now = datetime.now(UTC).timestamp()
            if now - self._polled_at >= CANCEL_POLL and self._cancelled():
                return True
            if remaining <= 0:
                return False

    def _cancelled(self) -> bool:
        self._polled_at = datetime.now(UTC).timestamp()
        if self.run_id is None:
            return False
        with get_client(sync_client=True) as client:
            state = client.read_flow_run(self.run_id).state
        return state is not None and (state.is_cancelling() or state.is_final())


class Published:
    """The group's entries of the published inventory, read again at most every LOOK_EVERY seconds (a target added to
    or removed from targets.yaml and published is met then, with no restart); a failed reading keeps the last one."""

    def __init__(self, group: str):
        self.group = group
        self._entries: dict[str, TargetEntry] = {}
        self._read_at = -math.inf

    def names(self) -> list[str]:
        self._refresh()
        return list(self._entries)

    def entry(self, name: str) -> TargetEntry | None:
        return self._entries.get(name)

    def connect(self, name: str) -> PostgresTarget:
        entry = self._entries.get(name)
        if entry is None:
            raise TargetError(f"target {name} is no longer in the published inventory")
        return connect_entry(entry)

    def _refresh(self) -> None:
        if time.monotonic() - self._read_at < LOOK_EVERY:
            return
        self._read_at = time.monotonic()
        try:
            inventory = published_inventory()
        except (UsageError, httpx.HTTPError, PrefectException) as exc:
            log.warning(
                "watching %s: the published inventory could not be read (kept): %s", self.group, exc
            )
            return
        self._entries = {e.name: e for e in inventory.watch_groups().get(self.group, [])}


@flow(name="watch_targets", flow_run_name="watch-{group}-{worker}", validate_parameters=True)
def watch_targets(
    group: str = Field(
        description="the inventory's targets watched at one interval, e.g. every-15s"
    ),
    worker: str = Field(description="the worker whose share this is (name@host:pid)"),
) -> State[Any] | None:
    """Watch this worker's share of the group's targets until the worker stops or the run is cancelled: samples into
    the store, incidents diagnosed. Ended by its worker's stop, the run ends Cancelled, as `dbcrew server` set it."""
    from prefect.runtime import flow_run

    holder = holder_name(worker, group)
    halt = _HALTS.setdefault(holder, threading.Event())
    published = Published(group)
    entries = [e for n in published.names() if (e := published.entry(n)) is not None]
    if not entries or entries[0].watch is None:
        raise UsageError(f"no target of the published inventory is watched in group {group!r}")
    every = entries[0].watch.every
    run_id = UUID(flow_run.id) if flow_run.id else None
    if run_id is not None:  # so that `dbcrew server` tells a run whose worker on its host died
        with get_client(sync_client=True) as client:
            client.update_flow_run(run_id, infrastructure_pid=run_identifier(run_id))
    keeper = Keeper(group, published, run_id, halt)
    store = open_samples()
    book = LeaseBook(store.backend, holder, group, lease_for(every))
    share = ShareLoop(
        book,
        store,
        every,
        published.names,
        published.connect,
        refresh=0.0,
        budget=_BUDGETS.get(worker),
    )
    get_run_logger().info(
        "watching a share of %d targets every %g s into %s, at most %d here",
        len(entries),
        every,
        store.location,
        share.cap,
    )
    share.run(keeper.on_round, pause=keeper.pause)
    why = stopping.requested() or (WORKER_STOPPED if halt.is_set() else "")
    get_run_logger().info("watching stopped: %s", why or "the run was cancelled")
    return Cancelled(message=why) if why else None


class WatchShares:
    """A worker's watching: one watch_targets run per watching group of the published inventory, each in a thread of
    the worker's process, looked after every LOOK_EVERY seconds: a group published since gets its run, a group gone
    has its run stopped, a run that failed starts again at the next look; one a user cancelled stays cancelled
    until the worker restarts."""

    def __init__(self, worker_name: str):
        self.worker = f"{worker_name}@{socket.gethostname()}:{os.getpid()}"
        _BUDGETS[self.worker] = SessionBudget(environment().watch_sessions)
        self.threads: dict[str, threading.Thread] = {}
        self.declined: set[str] = set()  # groups whose run a user cancelled
        self._halt = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._keep, name="dbcrew-watch-shares", daemon=True).start()

    def _keep(self) -> None:
        while not self._halt.is_set():
            self.look()
            self._halt.wait(LOOK_EVERY)

    def look(self) -> None:
        try:
            groups = set(published_inventory().watch_groups())
        except (UsageError, httpx.HTTPError, PrefectException) as exc:
            log.debug("no watching to share: %s", exc)
            return
        for group in sorted(groups - self.declined):
            thread = self.threads.get(group)
            if thread is None or not thread.is_alive():
                _HALTS[holder_name(self.worker, group)] = threading.Event()
                self.threads[group] = threading.Thread(
                    target=self._share, args=(group,), name=f"dbcrew-watch-{group}", daemon=True
                )
                self.threads[group].start()
        for group in set(self.threads) - groups:
            _HALTS[holder_name(self.worker, group)].set()

    def _share(self, group: str) -> None:
        halt = _HALTS[holder_name(self.worker, group)]
        with tags("dbcrew", "watch"):
            state = watch_targets(group=group, worker=self.worker, return_state=True)
        if state.is_cancelled() and not halt.is_set() and not stopping.requested():
            self.declined.add(group)
            log.warning(
                "watching %s on this worker was cancelled: not restarted until it restarts", group
            )

    def stop(self, wait: float) -> None:
        """Stop every share (each releases its leases) and wait up to `wait` seconds for their runs to end."""
        self._halt.set()
        for group in self.threads:
            _HALTS[holder_name(self.worker, group)].set()
        deadline = time.monotonic() + wait
        for thread in self.threads.values():
            thread.join(max(0.0, deadline - time.monotonic()))
