"""Schedule health: the slots of the inventory's schedules that nothing started, at `dbcrew server`'s start and while it runs.

A schedule is one deployment per schedule group (dbcrew/flows/deploy.py), and each of its slots is one run
of `scheduled_reviews` on the pool's fleet queue, which starts one review per target on the reviews
queue (dbcrew/flows/fleet.py). What is judged is the slot, never a review:

- A review waiting in the reviews queue behind the pool's limit (`--max-reviews`) is the limit doing
  its work, not lateness: Prefect's server marks it Late after 15 s all the same, which is why the
  late alert used to be told once per queued review (220 false alerts for a fleet of 120). It is
  never told.
- A slot is told when, for longer than SLOT_GRACE, no worker could start it: its run is still
  Scheduled or Late (no worker polls the fleet queue, or the queue is paused), or its run started
  and its reviews wait with no worker polling the reviews queue. Once per slot, to the union of the
  group's alert URLs (each URL hears it once, however many targets name it).
- A diagnosis (the watcher's or the Alertmanager receiver's) waits on the `incidents` queue, never on
  `reviews`, so a slot's reviews cannot hold it up; whether a worker could start it is judged the same
  way, by that queue's polls, in dbcrew/flows/diagnosis_health.py.
SLOT_GRACE is the time Prefect's own server gives a queue before it calls it not ready (60 s without a
poll); a worker asks every few seconds (5 s under `dbcrew server`, 10 s by Prefect's default). The
grace counts from the later of the slot's time and the supervisor's own start, so the seconds a
restarted worker takes to poll again are not a missed slot.

Slots missed while `dbcrew server` was down are settled once at its start, before its worker polls
(`settle_missed`): Prefect's scheduler makes runs ahead of time and never removes the ones whose time
passed (a redeploy deletes only future ones), so a worker would take them all at once and run them
late, back to back. `missed:` is part of the schedule group, so every target of a group asks the same:
collapse keeps the group's newest slot (one review of each of its targets, now), skip keeps none (each
target's next review is the next slot); the others end Cancelled with the reason. That is what each
target's `missed:` meant when it had a schedule of its own, since one slot reviews each target once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum
from uuid import UUID

from prefect.client.orchestration import SyncPrefectClient, get_client
from prefect.client.schemas.filters import (
    DeploymentFilter,
    DeploymentFilterId,
    FlowFilter,
    FlowFilterName,
    FlowRunFilter,
    FlowRunFilterExpectedStartTime,
    FlowRunFilterState,
    FlowRunFilterStateName,
    FlowRunFilterStateType,
)
from prefect.client.schemas.objects import FlowRun, StateType
from prefect.client.schemas.sorting import FlowRunSort
from prefect.exceptions import ObjectNotFound
from prefect.states import Cancelled

from dbcrew.flows.deploy import some_names
from dbcrew.flows.queues import PoolQueue
from dbcrew.inventory import Inventory, MissedSlots, ScheduleGroup, TargetEntry
from dbcrew.logs import data_logger
from dbcrew.roles.report import operational

log = data_logger(__name__)

SCHEDULE_FLOW = "scheduled_reviews"
SLOTS_LOOKED_AT = 200  # slot runs read per look: a pool without a worker piles them up
SLOT_GRACE = timedelta(seconds=60)
UNSTARTED = (
    "Scheduled",
    "Late",
)  # a slot's run no worker took (Prefect's names of the Scheduled type)


@dataclass(frozen=True)
class QueuePolls:
    """What a work queue says of its workers: when one last asked it for runs, and whether it is paused."""

    pool: str
    name: str
    last_polled: datetime | None
    paused: bool

    def served(self, now: datetime, grace: timedelta) -> bool:
        return not self.paused and self.last_polled is not None and now - self.last_polled <= grace

    def why_not(self) -> str:
        """Why its runs wait, said to a person."""
        where = f"the {self.name} queue of work pool {self.pool}"
        if self.paused:
            return f"{where} is paused"
        if self.last_polled is None:
            return f"no worker has ever polled {where}"
        return f"no worker has polled {where} since {self.last_polled:%Y-%m-%d %H:%M:%S UTC}"


class SlotStage(Enum):
    UNSTARTED = "unstarted"  # its run is Scheduled or Late
    STARTED = "started"  # its run is Pending or Running: its reviews are on the reviews queue
    OTHER = "other"  # ended, or waiting for a retry: nothing for schedule health to judge


def stage_of(run: FlowRun) -> SlotStage:
    if run.state_type is StateType.SCHEDULED and run.state_name in UNSTARTED:
        return SlotStage.UNSTARTED
    if run.state_type in (StateType.PENDING, StateType.RUNNING):
        return SlotStage.STARTED
    return SlotStage.OTHER


def slot_trouble(
    stage: SlotStage,
    due: datetime,
    fleet: QueuePolls,
    reviews: QueuePolls,
    now: datetime,
    grace: timedelta = SLOT_GRACE,
) -> str | None:
    """Why no worker could start this slot, or None while nothing is wrong with it.

    `due`: when the slot could first have started (its time, or the supervisor's start if later). Reviews
    queued behind the pool's limit are nothing wrong: only the queues' polls are read, never the reviews.
    """
    if now - due <= grace:
        return None
    if stage is SlotStage.UNSTARTED:
        cause = fleet.why_not() if not fleet.served(now, grace) else None
        return f"its run did not start within {grace.total_seconds():g} s: " + (
            cause
            or f"a worker polls the {fleet.name} queue of work pool {fleet.pool} but took none of it"
        )
    if stage is SlotStage.STARTED and not reviews.served(now, grace):
        return f"its reviews wait: {reviews.why_not()}"
    return None


def queue_polls(client: SyncPrefectClient, pool: str, name: str) -> QueuePolls:
    try:
        queue = client.read_work_queue_by_name(name, work_pool_name=pool)
    except ObjectNotFound:
        return QueuePolls(pool, name, None, paused=False)
    return QueuePolls(pool, name, queue.last_polled, queue.is_paused)


class LateSlots:
    """The slots of the inventory's schedules that no worker could start (`slot_trouble`), each told once."""

    def __init__(
        self,
        inventory: Inventory,
        known: Iterable[UUID] = (),
        grace: timedelta = SLOT_GRACE,
        since: datetime | None = None,
    ):
        """`known`: slot runs already accounted for (the one a collapse of missed slots keeps, starting now).
        `since`: when this supervisor started (now by default): the grace of older slots counts from it."""
        self.groups = {g.name: (g, entries) for g, entries in inventory.schedule_groups().items()}
        self.told: set[UUID] = set(known)
        self.grace = grace
        self.since = since or datetime.now(UTC)

    def check(self, now: datetime | None = None) -> list[str]:
        """One look at the slots not yet ended; a line for each slot told now."""
        if not self.groups:
            return []
        now = now or datetime.now(UTC)
        said = []
        with get_client(sync_client=True) as client:
            runs = client.read_flow_runs(
                flow_filter=FlowFilter(name=FlowFilterName(any_=[SCHEDULE_FLOW])),
                flow_run_filter=FlowRunFilter(
                    state=FlowRunFilterState(
                        type=FlowRunFilterStateType(
                            any_=[StateType.SCHEDULED, StateType.PENDING, StateType.RUNNING]
                        )
                    ),
                    expected_start_time=FlowRunFilterExpectedStartTime(before_=now - self.grace),
                ),
                sort=FlowRunSort.EXPECTED_START_TIME_DESC,  # the newest: older ones were told before
                limit=SLOTS_LOOKED_AT,
            )
            polls: dict[tuple[str, str], QueuePolls] = {}

            def polled(pool: str, name: str) -> QueuePolls:
                if (pool, name) not in polls:
                    polls[pool, name] = queue_polls(client, pool, name)
                return polls[pool, name]

            for run in runs:
                group = self.groups.get(str(run.parameters.get("schedule", "")))
                if run.id in self.told or group is None or run.expected_start_time is None:
                    continue
                pool = run.work_pool_name or ""
                why = slot_trouble(
                    stage_of(run),
                    max(run.expected_start_time, self.since),
                    polled(pool, run.work_queue_name or PoolQueue.FLEET),
                    polled(pool, PoolQueue.REVIEWS),
                    now,
                    self.grace,
                )
                if why is None:
                    continue
                self.told.add(run.id)
                said.append(self._tell(run, *group, why))
        return said

    def _tell(
        self, run: FlowRun, group: ScheduleGroup, entries: list[TargetEntry], why: str
    ) -> str:
        alert = operational.slot_late(
            group, run.name, run.expected_start_time, why, len(entries), some_names(entries)
        )
        operational.tell(alert, entries, log, f"the alert of slot {run.name}")
        return f"{alert.title} (run {run.name}): {why}"


@dataclass(frozen=True)
class SettledSlots:
    """One schedule's slots that were due while nothing ran them, as settled."""

    schedule: str
    targets: int
    count: int
    kept: FlowRun | None  # the one that runs now (collapse); None when all were skipped

    def describe(self) -> str:
        done = f"the latest runs now ({self.kept.name})" if self.kept else "skipped"
        return f"{self.schedule} ({self.targets} targets): {self.count} missed slots, {done}"


def settle_missed(inventory: Inventory, due_before: datetime) -> list[SettledSlots]:
    """Cancel the slots of each schedule due before `due_before` that nothing started, but for its newest when
    the group's `missed:` is collapse; what was settled, for each schedule that had any. Only the names
    Scheduled and Late: a run waiting for a retry is a started slot's own business."""
    settled = []
    with get_client(sync_client=True) as client:
        for group, entries in inventory.schedule_groups().items():
            try:
                deployment = client.read_deployment_by_name(f"{SCHEDULE_FLOW}/{group.name}")
            except ObjectNotFound:
                continue
            overdue = client.read_flow_runs(
                deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment.id])),
                flow_run_filter=FlowRunFilter(
                    state=FlowRunFilterState(name=FlowRunFilterStateName(any_=list(UNSTARTED))),
                    expected_start_time=FlowRunFilterExpectedStartTime(before_=due_before),
                ),
                sort=FlowRunSort.EXPECTED_START_TIME_DESC,
                limit=SLOTS_LOOKED_AT,
            )
            kept = overdue[:1] if group.missed is MissedSlots.COLLAPSE else []
            why = (
                f"missed while dbcrew server was down; collapsed into run {kept[0].name}"
                if kept
                else "missed while dbcrew server was down; skipped (missed: skip)"
            )
            for run in overdue[len(kept) :]:
                client.set_flow_run_state(run.id, Cancelled(message=why), force=True)
            if overdue:
                settled.append(
                    SettledSlots(group.name, len(entries), len(overdue), kept[0] if kept else None)
                )
    return settled
