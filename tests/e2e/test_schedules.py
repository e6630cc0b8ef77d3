"""A schedule shared by several targets, on `dbcrew server`: one deployment, its slot reviews each target, and the
reviews it queues behind the pool's limit are not late.

The crew server's inventory (tests/e2e/conftest.py) puts alpha and beta on one cron: one deployment,
`scheduled_reviews/health-0-3-x-x-x`, whose slot is started here as its schedule would start it.
The reviews queue's limit is set to 0 meanwhile, so every review the slot starts waits behind it
until Prefect's server has marked each Late (its late-runs service, after 15 s by default, 2 s on the test
server: tests/e2e/conftest.py SOON_LATE): the old supervisor
alerted each of them. To know the supervisor has looked since, a second slot is made that no worker
can start (the fleet queue paused, the slot two minutes old): its alert is the sign, and the only
alert the receiver may get from schedule health, once per alert URL of the group.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from prefect.client.orchestration import SyncPrefectClient, get_client
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterKey,
    FlowRunFilter,
    FlowRunFilterParentFlowRunId,
)
from prefect.client.schemas.objects import FlowRun
from prefect.states import Scheduled

from dbcrew.flows.deploy import POOL
from dbcrew.flows.queues import PoolQueue
from dbcrew.lab.crew_server import CrewServer
from dbcrew.lab.waiting import wait_for

pytestmark = pytest.mark.timeout(900)

SCHEDULE = "health-0-3-x-x-x"


@pytest.fixture()
def client(crew_server: CrewServer) -> Iterator[SyncPrefectClient]:
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with (
        temporary_settings(updates={PREFECT_API_URL: crew_server.api}),
        get_client(sync_client=True) as client,
    ):
        yield client


def reviews_of(client: SyncPrefectClient, slot: FlowRun) -> list[FlowRun]:
    return client.read_flow_runs(
        flow_run_filter=FlowRunFilter(
            parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[slot.id])
        )
    )


def test_a_shared_schedules_slot_reviews_each_target_and_its_queued_reviews_are_not_late(
    client: SyncPrefectClient, webhook: tuple[str, list[dict[str, object]]]
) -> None:
    received = webhook[1]
    before = len(received)
    deployment = client.read_deployment_by_name(f"scheduled_reviews/{SCHEDULE}")
    reviews_queue = client.read_work_queue_by_name(PoolQueue.REVIEWS, work_pool_name=POOL)
    fleet_queue = client.read_work_queue_by_name(PoolQueue.FLEET, work_pool_name=POOL)
    client.update_work_queue(reviews_queue.id, concurrency_limit=0)  # every review waits behind it
    stuck = None
    try:
        slot = client.create_flow_run_from_deployment(deployment.id)  # what its schedule does
        waiting = wait_for(
            lambda: (
                (runs := reviews_of(client, slot))
                and len(runs) == 2
                and all(r.state_name == "Late" for r in runs)
                and runs
            ),
            "the slot's two reviews to be marked Late while they wait for the pool's limit",
        )
        assert sorted(r.name for r in waiting) == ["alpha", "beta"]  # per-target run names

        client.update_work_queue(fleet_queue.id, is_paused=True)
        stuck = client.create_flow_run_from_deployment(
            deployment.id,
            state=Scheduled(scheduled_time=datetime.now(UTC) - timedelta(minutes=2)),
        )
        wait_for(
            lambda: [m for m in received[before:] if "have not started" in str(m["title"])],
            "the alert of the slot no worker could start",
        )
    finally:
        if stuck is not None:
            client.delete_flow_run(stuck.id)
        client.update_work_queue(fleet_queue.id, is_paused=False)
        client.update_work_queue(
            reviews_queue.id, concurrency_limit=reviews_queue.concurrency_limit
        )

    done = wait_for(
        lambda: (state := client.read_flow_run(slot.id).state) and state.is_final() and state,
        "the slot's run to end once its reviews could run",
        seconds=600,
    )
    assert done.is_completed(), done.message
    reviews = {r.name: r for r in reviews_of(client, slot)}
    assert sorted(reviews) == ["alpha", "beta"]
    assert all(r.state is not None and r.state.is_completed() for r in reviews.values())
    assert all("fleet-test" in r.tags for r in reviews.values()), (
        "each review carries its target's tags"
    )
    (summary,) = client.read_artifacts(
        artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[f"dbcrew-schedule-{SCHEDULE}"]))
    )
    assert "2 of 2 reviews completed." in str(summary.data)

    later = received[before:]
    assert [m for m in later if "is late" in str(m["title"])] == [], "no review was told late"
    told = [m for m in later if "have not started" in str(m["title"])]
    assert sorted(str(m["path"]) for m in told) == ["/alpha", "/beta"], "one slot, each URL once"
    assert stuck is not None and all(stuck.name in str(m["message"]) for m in told)
    assert "is paused" in str(told[0]["message"])
