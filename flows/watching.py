"""watch_targets: one long-lived flow run watches a group of the inventory's targets, and what it starts.

Sampling is not a flow run per pass (thousands a day per target): the watching is one flow run per
group of targets watched at the same interval (`watch: {every: 15}` in targets.yaml), which runs the
watcher's plain loop (roles/watching.py) on a worker of the pool, in the `watch` queue so it never
takes a review's slot. Prefect sees it as one Running run with its log and a health artifact; the
server's work per hour does not grow with the sampling rate: what the loop asks of the server is
bounded in time (its own state every CANCEL_POLL seconds, the health artifact every HEALTH_EVERY
seconds, and one run and artifact per incident).

What the loop does with each round, by target (its inventory entry's alert URLs are told):
- an incident that closed starts a diagnosis of its interval, a review_target flow run of the pool
  with the interval, whose alert says what happened, when, and the root causes, with the report's
  link, and which keeps its causes and link with the incident (the health artifact shows them); an
  incident still open after LONG_INCIDENT is diagnosed once as it stands (roles/incident_diagnosis.py);
- a target that stops answering is an alert once when its gap opens, and once when samples resume.
Stopping: the run's cancellation (`dbcrew server` cancels it when it stops) or the process asked to
stop (dbcrew.stopping) ends the loop at its next pause. Restarting a watching run that died is the
supervisor's job (flows/supervision.py).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import httpx
from prefect import flow, get_run_logger
from prefect.artifacts import create_table_artifact
from prefect.client.orchestration import get_client
from prefect.client.schemas.objects import FlowRun, State
from prefect.deployments import run_deployment
from prefect.exceptions import PrefectException
from pydantic import Field

from dbcrew import stopping
from dbcrew.errors import TargetError, UsageError
from dbcrew.inventory import TargetEntry
from dbcrew.models.interval import PastInterval
from dbcrew.store.samples import Incident, open_samples
from flows.dispatch import ran_sync
from flows.incident_diagnosis import DiagnosisBoard
from flows.targets import ON_DEMAND, connect_entry, published_inventory
from flows.worker import planned_stop
from roles.incident_diagnosis import DiagnosisSchedule, incident_alert_text
from roles.report.alerts import AlertNotDelivered, ChannelAlert, send
from roles.watching import RoundReport, TargetOutcome, Watcher

CANCEL_POLL = (
    10.0  # seconds between two reads of the run's own state (a cancelled run stops within this)
)
HEALTH_EVERY = 300.0  # seconds between two health artifacts when nothing changed
DIAGNOSIS_DEPLOYMENT = f"review_target/{ON_DEMAND}"


class Keeper:
    """What the watching run does with each round for its targets: diagnoses, alerts, its health artifact."""

    def __init__(self, group: str, entries: list[TargetEntry], run_id: UUID | None):
        self.group = group
        self.entries = entries
        self.run_id = run_id
        self.log = get_run_logger()
        self.gaps: dict[str, str] = {}  # entry name -> why it has no samples (alerted once)
        self.schedule = DiagnosisSchedule()
        self.board = DiagnosisBoard(
            (e.name for e in entries if e.watch is not None and e.watch.diagnose), CANCEL_POLL
        )
        self.latest: dict[str, TargetOutcome] = {}
        self.incidents: dict[str, Incident] = {}
        self._health_at = 0.0
        self._polled_at = 0.0

    def on_round(self, report: RoundReport) -> None:
        changed = False
        for entry, outcome in zip(self.entries, report.outcomes, strict=True):
            self.latest[entry.name] = outcome
            changed |= self._gap(entry, outcome, report.at)
            incident = outcome.incident
            if incident is None:
                continue
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
            self._tell(
                entry,
                ChannelAlert(
                    title=f"dbcrew: no samples of {entry.name} since {at:%Y-%m-%d %H:%M:%S} UTC",
                    body=f"Target: {outcome.display}\nWhy: {outcome.gap}\nThe watcher tries again every round.",
                    failed=True,
                    findings=[],
                ),
            )
            return True
        if outcome.stored and entry.name in self.gaps:
            why = self.gaps.pop(entry.name)
            self._tell(
                entry,
                ChannelAlert(
                    title=f"dbcrew: samples of {entry.name} resumed at {at:%Y-%m-%d %H:%M:%S} UTC",
                    body=f"Target: {outcome.display}\nThe gap (stored in the series): {why}",
                    failed=False,
                    findings=[],
                ),
            )
            return True
        return False

    def _diagnose(self, entry: TargetEntry, incident: Incident, now: datetime) -> None:
        """Start the diagnosis of the incident's interval as a review_target run of the pool (it alerts itself)."""
        interval = PastInterval(start=incident.started_at, end=min(incident.ended_at, now))
        try:
            run = self._start_diagnosis(entry, incident, interval)
        except (httpx.HTTPError, PrefectException) as exc:
            self.log.error("incident on %s: its diagnosis could not start: %s", entry.name, exc)
            self._tell(
                entry,
                ChannelAlert(
                    title=f"dbcrew: incident on {entry.name} at {interval.start:%Y-%m-%d %H:%M} UTC, not diagnosed",
                    body=f"{incident_alert_text(incident)}\nThe diagnosis run could not start: {exc}",
                    failed=True,
                    findings=[],
                ),
            )
            return
        self.log.warning(
            "incident on %s (%s): diagnosis run %s started",
            entry.name,
            interval.describe(),
            run.name,
        )

    def _start_diagnosis(
        self, entry: TargetEntry, incident: Incident, interval: PastInterval
    ) -> FlowRun:
        return ran_sync(
            run_deployment(
                DIAGNOSIS_DEPLOYMENT,
                parameters={
                    "target": entry.name,
                    "interval": interval.model_dump(mode="json"),
                    "alert": incident_alert_text(incident),
                    "incident": incident.ref().model_dump(mode="json"),
                },
                timeout=0,
                as_subflow=False,
                tags=["dbcrew", "incident"],
            )
        )

    def _tell(self, entry: TargetEntry, alert: ChannelAlert) -> None:
        self.log.warning("%s", alert.title)
        if not entry.alerts:
            return
        try:
            send(alert, entry.alerts)
        except AlertNotDelivered as exc:
            self.log.error("alert not delivered: %s", exc)

    def _post_health(self, at: datetime) -> None:
        rows = []
        for entry in self.entries:
            outcome = self.latest.get(entry.name)
            incident = self.incidents.get(entry.name)
            rows.append(
                {
                    "target": entry.name,
                    "state": (
                        f"no samples: {self.gaps[entry.name]}"
                        if entry.name in self.gaps
                        else "watching"
                        if outcome is not None and outcome.stored
                        else "first readings"
                    ),
                    "last incident": ""
                    if incident is None
                    else f"{incident.started_at:%Y-%m-%d %H:%M:%S} to {incident.ended_at:%H:%M:%S} UTC"
                    + ("" if incident.closed else " (ongoing)"),
                    "signals": ""
                    if incident is None
                    else ", ".join(s.name for s in incident.signals[:4]),
                    **self.board.columns(entry.name, incident),
                }
            )
        create_table_artifact(
            rows,
            key=f"dbcrew-watch-{self.group}",
            description=f"Watching {len(self.entries)} targets ({self.group}), as of {at:%Y-%m-%d %H:%M:%S} UTC",
        )

    def pause(self, seconds: float) -> bool:
        """Wait for the next round; True when the run was cancelled or the process asked to stop."""
        remaining = max(0.0, seconds)
        while True:
            step = min(remaining, CANCEL_POLL)
            if stopping.pause(step):
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


@flow(name="watch_targets", flow_run_name="watch-{group}", validate_parameters=True)
def watch_targets(
    group: str = Field(
        description="the inventory's targets watched at one interval, e.g. every-15s"
    ),
) -> State[Any] | None:
    """Watch the group's targets until the run is cancelled: samples into the store, incidents diagnosed.
    Ended by its worker's stop, the run ends Cancelled (planned_stop), as `dbcrew server` set it."""
    from prefect.runtime import flow_run

    entries = published_inventory().watch_groups().get(group)
    if not entries:
        raise UsageError(f"no target of the published inventory is watched in group {group!r}")
    assert entries[0].watch is not None
    targets = []
    for entry in entries:
        try:
            targets.append(connect_entry(entry))
        except TargetError as exc:
            raise UsageError(f"cannot watch {entry.name}: {exc}") from None
    keeper = Keeper(group, entries, UUID(flow_run.id) if flow_run.id else None)
    store = open_samples()
    get_run_logger().info(
        "watching %s every %g s into %s",
        ", ".join(e.name for e in entries),
        entries[0].watch.every,
        store.location,
    )
    Watcher(targets, store, every=entries[0].watch.every).run(keeper.on_round, pause=keeper.pause)
    get_run_logger().info("watching stopped: %s", stopping.requested() or "the run was cancelled")
    return planned_stop()
