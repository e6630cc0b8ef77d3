"""What `dbcrew server` looks after on the pool: the watching shares' runs (schedules: dbcrew/flows/schedule_health.py).

The watching is shared over the pool by the workers themselves (dbcrew/flows/watching.py WatchShares: each
worker of the `watch` queue runs its share, leased in the store), so a worker that dies on any
machine loses its share to the others with nobody's help. What remains for the process that owns
the pool's lifetime (`dbcrew server`, calling `check` every few seconds) is the record:
- a share run still marked Running whose worker is gone ends CRASHED, told once to the alert URLs
  of the group's targets ("the watching of ... stopped on WORKER"): a worker of this host whose
  process no longer exists, or a worker on any host whose heartbeat in the store lapsed (no
  automation on missing Prefect heartbeats for the user to create);
- a share run that ended FAILED (its worker restarts it at its next look) is told once per streak
  of failures of its group ("the watching of ... failed on WORKER");
- a group that no worker watches is said once (no worker serves the `watch` queue).
`stop` cancels the share runs of the worker it started, so a planned stop is CANCELLED, never a
failure alert; the reviews its worker is running are cancelled the same way (`stop_reviews`), and
the worker lets them wind down rather than fail (dbcrew/flows/worker.py).
"""

from __future__ import annotations

import socket
from datetime import UTC, datetime, timedelta
from uuid import UUID

import psutil
from prefect.client.orchestration import SyncPrefectClient, get_client
from prefect.client.schemas.filters import (
    FlowFilter,
    FlowFilterName,
    FlowRunFilter,
    FlowRunFilterEndTime,
    FlowRunFilterState,
    FlowRunFilterStateType,
    WorkQueueFilter,
    WorkQueueFilterName,
)
from prefect.client.schemas.objects import FlowRun, StateType
from prefect.states import Cancelled, Crashed

from dbcrew.flows.queues import PoolQueue
from dbcrew.flows.worker import worker_of
from dbcrew.inventory import Inventory, TargetEntry
from dbcrew.logs import data_logger
from dbcrew.roles.report import operational
from dbcrew.roles.sharing import holder_name
from dbcrew.store import StoreUnavailable, open_store
from dbcrew.store.leases import lapsed_holders

log = data_logger(__name__)

WATCH_FLOW = "watch_targets"
RUNS_LOOKED_AT = 200  # runs read per look
STOPPED = "dbcrew server stopped"  # the message of the runs `stop` cancels
# A share's holder is judged dead once its heartbeat lapsed this many rounds ago (at least LAPSED_MIN):
# a share that only missed a renewal (a slow store) is not a death.
LAPSED_ROUNDS = 2
LAPSED_MIN = timedelta(seconds=10)
# failed share runs that ended since then are looked at (each told once)
FAILED_LOOKBACK = timedelta(minutes=10)
# a group no worker watches this long after the start is said
UNWATCHED_AFTER = timedelta(minutes=1)


def orphaned(run: FlowRun) -> bool:
    """A Running run whose in-process worker on this host no longer exists."""
    worker = worker_of(run.infrastructure_pid)
    if run.state_type is not StateType.RUNNING or worker is None:
        return False
    host, pid = worker
    return host == socket.gethostname() and not psutil.pid_exists(pid)


def stop_reviews(worker_pid: int) -> list[str]:
    """A planned stop of the worker `worker_pid` of this host: the reviews, diagnoses and fleet runs it is running end
    Cancelled now, whatever the worker manages before it exits (it winds them down; one killed after its
    grace period would leave them Running for ever); the names of those cancelled."""
    with get_client(sync_client=True) as client:
        running = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(
                state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.RUNNING]))
            ),
            work_queue_filter=WorkQueueFilter(
                name=WorkQueueFilterName(
                    any_=[PoolQueue.REVIEWS, PoolQueue.INCIDENTS, PoolQueue.FLEET]
                )
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


def running_shares(client: SyncPrefectClient) -> list[FlowRun]:
    """The watching share runs marked Running, on every worker."""
    return client.read_flow_runs(
        flow_filter=FlowFilter(name=FlowFilterName(any_=[WATCH_FLOW])),
        flow_run_filter=FlowRunFilter(
            state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.RUNNING]))
        ),
        limit=RUNS_LOOKED_AT,
    )


class WatchSupervisor:
    """The watching shares of an inventory's groups, looked after by `check`."""

    def __init__(self, inventory: Inventory):
        self.groups = inventory.watch_groups()
        self.told: set[UUID] = set()  # runs already marked crashed and alerted
        self.said_unwatched: set[str] = set()
        # groups whose failure is told, until one of their runs runs again
        self.failing: set[str] = set()
        self.since = datetime.now(UTC)

    def check(self) -> list[str]:
        """One look at the share runs; what it did, one line each (marked crashed, a group nobody watches)."""
        done: list[str] = []
        if not self.groups:
            return done
        lapsed = self._lapsed()
        with get_client(sync_client=True) as client:
            running = running_shares(client)
            for run in running:
                group, worker = str(run.parameters.get("group")), str(run.parameters.get("worker"))
                why = (
                    "its worker on this host stopped"
                    if orphaned(run)
                    else "its worker stopped renewing its leases"
                    if holder_name(worker, group) in lapsed.get(group, set())
                    else ""
                )
                if not why or run.id in self.told:
                    continue
                self.told.add(run.id)
                client.set_flow_run_state(run.id, Crashed(message=why), force=True)
                done.append(
                    f"watching {group}: run {run.name} crashed ({why}); the other watchers take its share"
                )
                self._tell(self.groups.get(group, []), group, worker, why)
            failed = client.read_flow_runs(
                flow_filter=FlowFilter(name=FlowFilterName(any_=[WATCH_FLOW])),
                flow_run_filter=FlowRunFilter(
                    state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.FAILED])),
                    end_time=FlowRunFilterEndTime(
                        after_=max(self.since, datetime.now(UTC) - FAILED_LOOKBACK)
                    ),
                ),
                limit=RUNS_LOOKED_AT,
            )
        alive = {str(r.parameters.get("group")) for r in running if r.id not in self.told}
        self._recovered(running, failed)
        for run in failed:
            group, worker = str(run.parameters.get("group")), str(run.parameters.get("worker"))
            if run.id in self.told:
                continue
            self.told.add(run.id)
            why = (run.state.message if run.state else "") or "failed"
            done.append(f"watching {group}: run {run.name} failed on {worker}: {why}")
            if group not in self.failing:  # one alert per streak of failures
                self.failing.add(group)
                self._tell(self.groups.get(group, []), group, worker, f"failed: {why}", "failed")
        if datetime.now(UTC) - self.since >= UNWATCHED_AFTER:
            for group in sorted(set(self.groups) - alive - self.said_unwatched):
                self.said_unwatched.add(group)
                done.append(
                    f"watching {group}: no worker watches it (is a worker serving the `watch` queue running?)"
                )
        self.said_unwatched &= set(self.groups) - alive  # said again if it happens again
        return done

    def _recovered(self, running: list[FlowRun], failed: list[FlowRun]) -> None:
        """A group's streak of failures ends when one of its runs started after its latest failure is running."""
        last: dict[str, datetime] = {}
        for run in failed:
            group = str(run.parameters.get("group"))
            if run.end_time is not None:
                last[group] = max(last.get(group, run.end_time), run.end_time)
        for run in running:
            group = str(run.parameters.get("group"))
            after = last.get(group)
            if run.start_time is not None and (after is None or run.start_time > after):
                self.failing.discard(group)

    def _lapsed(self) -> dict[str, set[str]]:
        """Per group, the holders whose heartbeat in the store lapsed (their workers died, on any host)."""
        try:
            backend = open_store().backend
            return {
                group: lapsed_holders(
                    backend, max(LAPSED_MIN, timedelta(seconds=LAPSED_ROUNDS * _every(entries)))
                )
                for group, entries in self.groups.items()
            }
        except StoreUnavailable as exc:
            log.warning("the watchers' heartbeats could not be read: %s", exc)
            return {}

    def _tell(
        self, entries: list[TargetEntry], group: str, worker: str, why: str, how: str = "stopped"
    ) -> None:
        alert = operational.watching_stopped([e.name for e in entries], group, worker, why, how)
        operational.tell(alert, entries, log)

    def stop(self) -> int:
        """Cancel the share runs of the workers this process started (a planned stop); how many."""
        if not self.groups:
            return 0
        mine = {p.pid for p in psutil.Process().children(recursive=True)}
        host = socket.gethostname()
        cancelled = 0
        with get_client(sync_client=True) as client:
            for run in running_shares(client):
                worker = worker_of(run.infrastructure_pid)
                if worker is not None and worker[0] == host and worker[1] in mine:
                    client.set_flow_run_state(run.id, Cancelled(message=STOPPED), force=True)
                    cancelled += 1
        return cancelled


def _every(entries: list[TargetEntry]) -> float:
    return entries[0].watch.every if entries and entries[0].watch is not None else 15.0
