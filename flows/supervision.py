"""What `dbcrew server` looks after on the pool: the watching runs (schedules: flows/schedule_health.py).

Keep one watching run going per group of watched targets: start it, restart it when it dies, cancel it at a stop.

The watching runs (flows/watching.py) have no schedule: they last as long as the pool does. The
process that owns the pool's lifetime (`dbcrew server`) calls `check` every few seconds:
- a group with no run that is scheduled, pending or running gets a new one;
- a run that ended FAILED or CRASHED is told to the group's alert URLs ("watching stopped"; once
  per streak of failed runs), and its replacement starts (after a pause that doubles with each
  failure in a row); the new watcher stores the stretch nobody watched as a gap;
- a run still marked Running whose worker was on this host and is gone (a killed worker) is set
  CRASHED first: nothing else would end it (Prefect marks such runs only through an automation on
  missing heartbeats, which a user must create; workers on other hosts are judged by theirs).
`stop` cancels the running ones, so a planned stop is CANCELLED, never a failure alert; the reviews
its worker is running are cancelled the same way (`stop_reviews`), and the worker lets them wind
down rather than fail (flows/worker.py). A run a user cancelled (in the UI) while this supervisor
ran stays cancelled: that is a decision, not a death.
"""

from __future__ import annotations

import logging
import socket
from datetime import UTC, datetime, timedelta
from uuid import UUID

import psutil
from prefect.client.orchestration import SyncPrefectClient, get_client
from prefect.client.schemas.filters import (
    DeploymentFilter,
    DeploymentFilterId,
    FlowRunFilter,
    FlowRunFilterState,
    FlowRunFilterStateType,
    WorkQueueFilter,
    WorkQueueFilterName,
)
from prefect.client.schemas.objects import FlowRun, StateType
from prefect.client.schemas.sorting import FlowRunSort
from prefect.exceptions import ObjectNotFound
from prefect.states import Cancelled, Crashed

from dbcrew.inventory import Inventory, TargetEntry
from flows.deploy import FLEET_QUEUE, REVIEW_QUEUE
from flows.worker import WORKER_STOPPED, worker_of
from roles.report.alerts import AlertNotDelivered, ChannelAlert, send

log = logging.getLogger(__name__)

WATCH_FLOW = "watch_targets"
RUNS_LOOKED_AT = 200  # runs read per look
RECENT_RUNS = 5  # the newest runs of a group looked at: one active, the ones that ended before it
STOPPED = "dbcrew server stopped"
# A run that failed is started again after RETRY_AFTER, doubling with each failure in a row up to
# RETRY_AFTER_MAX: a watching that cannot start (a password its worker lacks) neither spins nor floods.
RETRY_AFTER = timedelta(seconds=5)
RETRY_AFTER_MAX = timedelta(minutes=10)  # the message of the runs `stop` cancels


def orphaned(run: FlowRun) -> bool:
    """A Running run whose in-process worker on this host no longer exists."""
    worker = worker_of(run.infrastructure_pid)
    if run.state_type is not StateType.RUNNING or worker is None:
        return False
    host, pid = worker
    return host == socket.gethostname() and not psutil.pid_exists(pid)


def stop_reviews(worker_pid: int) -> list[str]:
    """A planned stop of the worker `worker_pid` of this host: the reviews and fleet runs it is running end
    Cancelled now, whatever the worker manages before it exits (it winds them down; one killed after its
    grace period would leave them Running for ever); the names of those cancelled."""
    with get_client(sync_client=True) as client:
        running = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(
                state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.RUNNING]))
            ),
            work_queue_filter=WorkQueueFilter(
                name=WorkQueueFilterName(any_=[REVIEW_QUEUE, FLEET_QUEUE])
            ),
            limit=RUNS_LOOKED_AT,
        )
        mine = [
            r
            for r in running
            if worker_of(r.infrastructure_pid) == (socket.gethostname(), worker_pid)
        ]
        for run in mine:
            client.set_flow_run_state(run.id, Cancelled(message=STOPPED), force=True)
    return [run.name for run in mine]


def tell(alert: ChannelAlert, entries: list[TargetEntry]) -> None:
    """Deliver to each distinct set of the entries' alert URLs; a failed delivery is logged (it is not the news)."""
    log.warning("%s", alert.title)
    for urls in {tuple(e.alerts) for e in entries if e.alerts}:
        try:
            send(alert, list(urls))
        except AlertNotDelivered as exc:
            log.error("alert not delivered: %s", exc)


def watch_deployment(client: SyncPrefectClient, group: str) -> UUID | None:
    """The id of the group's watching deployment; None when it is not deployed (any more)."""
    try:
        return client.read_deployment_by_name(f"{WATCH_FLOW}/{group}").id
    except ObjectNotFound:
        return None


def recent_runs(client: SyncPrefectClient, deployment: UUID) -> list[FlowRun]:
    """The deployment's newest runs, newest first."""
    return client.read_flow_runs(
        deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment])),
        sort=FlowRunSort.EXPECTED_START_TIME_DESC,
        limit=RECENT_RUNS,
    )


class WatchSupervisor:
    """The watching runs of an inventory's groups, kept going by `check`."""

    def __init__(self, inventory: Inventory):
        self.groups = inventory.watch_groups()
        self.told: set[UUID] = set()  # ended runs already alerted or logged
        self.failing: dict[str, int] = {}  # group -> runs that failed in a row
        self.since = datetime.now(UTC)

    def check(self) -> list[str]:
        """One look at every group; what it did, one line each (started, restarted, marked crashed)."""
        done: list[str] = []
        if not self.groups:
            return done
        with get_client(sync_client=True) as client:
            for group, entries in self.groups.items():
                done += self._keep(client, group, entries)
        return done

    def _keep(self, client: SyncPrefectClient, group: str, entries: list[TargetEntry]) -> list[str]:
        deployment = watch_deployment(client, group)
        if deployment is None:
            return []
        runs = recent_runs(client, deployment)
        done = []
        for run in runs:
            if orphaned(run):
                client.set_flow_run_state(
                    run.id, Crashed(message="its worker on this host stopped"), force=True
                )
                run.state, run.state_name = (
                    Crashed(message="its worker on this host stopped"),
                    "Crashed",
                )
                done.append(f"watching {group}: run {run.name} crashed (its worker stopped)")
        if any(r.state is not None and not r.state.is_final() for r in runs):
            return done
        ended = next((r for r in runs if r.state is not None), None)
        if ended is not None and ended.state is not None:
            state = ended.state
            planned = state.message in (STOPPED, WORKER_STOPPED)
            if state.is_cancelled() and not planned and state.timestamp >= self.since:
                if ended.id not in self.told:
                    self.told.add(ended.id)
                    done.append(f"watching {group}: run {ended.name} was cancelled; not restarted")
                return done
            if state.is_failed() or state.is_crashed():
                if ended.id not in self.told:
                    self.told.add(ended.id)
                    self.failing[group] = self.failing.get(group, 0) + 1
                    if self.failing[group] == 1:  # one alert per streak of failed runs
                        self._tell(entries, group, f"{state.name}: {state.message or ''}")
                wait = min(RETRY_AFTER * 2 ** (self.failing[group] - 1), RETRY_AFTER_MAX)
                if datetime.now(UTC) - state.timestamp < wait:
                    return done
            else:
                self.failing.pop(group, None)
        started = client.create_flow_run_from_deployment(deployment, tags=["dbcrew", "watch"])
        done.append(
            f"watching {group}: run {started.name} started"
            + (f" (after {ended.name} ended {ended.state_name})" if ended is not None else "")
        )
        return done

    def _tell(self, entries: list[TargetEntry], group: str, why: str) -> None:
        alert = ChannelAlert(
            title=f"dbcrew: the watching of {', '.join(e.name for e in entries)} stopped; restarted",
            body=f"Group: {group}\nWhy: {why}\nThe time nobody watched is a gap in each target's series.",
            failed=True,
            findings=[],
        )
        tell(alert, entries)

    def stop(self) -> int:
        """Cancel every group's active runs (a planned stop); how many."""
        if not self.groups:
            return 0
        cancelled = 0
        with get_client(sync_client=True) as client:
            for group in self.groups:
                deployment = watch_deployment(client, group)
                if deployment is None:
                    continue
                for run in recent_runs(client, deployment):
                    if run.state is not None and not run.state.is_final():
                        client.set_flow_run_state(run.id, Cancelled(message=STOPPED), force=True)
                        cancelled += 1
        return cancelled
