"""Diagnoses no worker could start: an incident's or an alert's diagnosis run left on the pool's `incidents` queue
while no worker polls it, looked at by `dbcrew server` as it looks at the schedules' slots (schedule_health.py).

A diagnosis waiting on `incidents` behind the queue's own limit (`--max-diagnoses`) is the limit at work, not
trouble, as a review behind `--max-reviews` is: it is never told. One that waited longer than SLOT_GRACE
while no worker polled the queue (every worker started with `--work-queue` lists that leave it out, or
the queue paused) would wait for ever, the incident undiagnosed and nobody told: it is told once per run,
to its target's alert URLs, as the watcher tells a diagnosis whose run Prefect refused ("not diagnosed").
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID

from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    FlowRunFilter,
    FlowRunFilterExpectedStartTime,
    FlowRunFilterState,
    FlowRunFilterStateName,
    WorkQueueFilter,
    WorkQueueFilterName,
)
from prefect.client.schemas.objects import FlowRun
from prefect.client.schemas.sorting import FlowRunSort
from pydantic import ValidationError

from dbcrew.flows.queues import PoolQueue
from dbcrew.flows.schedule_health import (
    SLOT_GRACE,
    SLOTS_LOOKED_AT,
    UNSTARTED,
    QueuePolls,
    queue_polls,
)
from dbcrew.inventory import Inventory
from dbcrew.logs import data_logger
from dbcrew.models.target_run import TargetRun
from dbcrew.roles.report import operational

log = data_logger(__name__)


class StalledDiagnoses:
    """The diagnosis runs of the `incidents` queue that no worker could start, each told once."""

    def __init__(
        self, inventory: Inventory, grace: timedelta = SLOT_GRACE, since: datetime | None = None
    ):
        """`since`: when this supervisor started (now by default): the grace of older runs counts from it, so the
        seconds a restarted worker takes to poll again are not a stalled diagnosis."""
        self.inventory = inventory
        self.grace = grace
        self.since = since or datetime.now(UTC)
        self.told: set[UUID] = set()

    def check(self, now: datetime | None = None) -> list[str]:
        """One look at the unstarted diagnoses; a line for each told now."""
        now = now or datetime.now(UTC)
        if now - self.since <= self.grace:
            return []
        said = []
        with get_client(sync_client=True) as client:
            waiting = client.read_flow_runs(
                flow_run_filter=FlowRunFilter(
                    state=FlowRunFilterState(name=FlowRunFilterStateName(any_=list(UNSTARTED))),
                    expected_start_time=FlowRunFilterExpectedStartTime(before_=now - self.grace),
                ),
                work_queue_filter=WorkQueueFilter(
                    name=WorkQueueFilterName(any_=[PoolQueue.INCIDENTS.value])
                ),
                sort=FlowRunSort.EXPECTED_START_TIME_DESC,
                limit=SLOTS_LOOKED_AT,
            )
            polls: dict[str, QueuePolls] = {}
            for run in waiting:
                if run.id in self.told:
                    continue
                pool = run.work_pool_name or ""
                if pool not in polls:
                    polls[pool] = queue_polls(client, pool, PoolQueue.INCIDENTS)
                if polls[pool].served(now, self.grace):
                    continue  # behind the queue's limit: it starts when a diagnosis ends
                self.told.add(run.id)
                said.append(self._tell(run, polls[pool].why_not()))
        return said

    def _tell(self, run: FlowRun, why: str) -> str:
        """Tell the run's target (its alert URLs) that its diagnosis has not started; the line said."""
        line = f"diagnosis {run.name} has not started: {why}"
        try:
            request = TargetRun.model_validate(run.parameters.get("request", {}))
        except ValidationError:
            return line  # not a run the crew started: nothing to tell a target
        entries = [e for e in self.inventory.targets if e.name == request.target]
        if request.interval is not None:
            alert = operational.not_diagnosed(request.target, request.interval, request.alert, why)
            operational.tell(alert, entries, log, f"the alert of diagnosis {run.name}")
        return line
