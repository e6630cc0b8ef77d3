"""What the crew's worker asks of the Prefect server for each flow run, on the session's real test server: the
deployment and the flow read once a while (KeptReads), no Submitting state, no CSRF token asked of a server
that issues none."""

from __future__ import annotations

import anyio
import pytest

from dbcrew.cli.server import issues_csrf_tokens
from dbcrew.lab.embedded import _free_port

pytestmark = pytest.mark.prefect


def test_kept_reads_answer_from_what_they_kept_each_caller_its_own_copy(prefect_server: str):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import DeploymentUpdate

    from dbcrew.flows.deploy import ensure_pool
    from dbcrew.flows.kept_reads import KeptReads
    from tests.e2e.queued_flow import queued_noop

    ensure_pool("kept-reads", max_reviews=1)  # no worker polls it
    deployment_id = queued_noop.to_deployment(
        name="kept-reads", job_variables={"env": {"A": "1"}}
    ).apply(work_pool_name="kept-reads")

    async def reads() -> tuple[object, ...]:
        async with get_client() as client:
            kept = KeptReads(client, keep_seconds=3600)
            first = await kept.read_deployment(deployment_id)
            first.job_variables["env"]["B"] = (
                "2"  # as Prefect's worker merges a run's variables in place
            )
            second = await kept.read_deployment(deployment_id)
            await client.update_deployment(deployment_id, DeploymentUpdate(description="changed"))
            still = await kept.read_deployment(deployment_id)
            fresh = await KeptReads(client, keep_seconds=0).read_deployment(deployment_id)
            flow = await kept.read_flow(first.flow_id)
            return (
                second.job_variables,
                (first.description, still.description, fresh.description),
                flow.name,
            )

    job_variables, (before, still, fresh), flow = anyio.run(reads)
    assert job_variables == {"env": {"A": "1"}}, "a caller's change reached the next one"
    assert before != "changed" and still == before, "kept: the deployment as first read"
    assert fresh == "changed", "read again once its time is up"
    assert flow == "queued_noop"


def test_a_run_of_the_in_process_worker_goes_from_pending_to_running_with_no_submitting_state(
    prefect_server: str,
):
    from prefect.client.orchestration import get_client
    from prefect.deployments.runner import EntrypointType

    from dbcrew.flows.deploy import ensure_pool
    from dbcrew.flows.queues import PoolQueue
    from dbcrew.flows.worker import InProcessWorker
    from tests.e2e.queued_flow import queued_noop

    pool = "no-submitting"  # no other worker polls it
    ensure_pool(pool, max_reviews=1)
    deployment_id = queued_noop.to_deployment(
        name="no-submitting",
        work_queue_name=PoolQueue.REVIEWS,
        entrypoint_type=EntrypointType.MODULE_PATH,
    ).apply(work_pool_name=pool)
    with get_client(sync_client=True) as client:
        run_id = client.create_flow_run_from_deployment(deployment_id).id

    async def one_poll() -> None:
        async with InProcessWorker(work_pool_name=pool, work_queues=[PoolQueue.REVIEWS]) as worker:
            await worker.get_and_submit_flow_runs()  # a worker that stops waits for the run it took

    anyio.run(one_poll)
    with get_client(sync_client=True) as client:
        states = client.read_flow_run_states(run_id)
    assert [s.name for s in sorted(states, key=lambda s: s.timestamp)] == [
        "Scheduled",
        "Pending",
        "Running",
        "Completed",
    ]


def test_the_csrf_probe_tells_a_server_that_issues_no_tokens(prefect_server: str):
    assert not issues_csrf_tokens(prefect_server), "Prefect's default: CSRF protection off"
    # A server that cannot be asked is taken to issue them: its clients keep asking, as Prefect's do.
    assert issues_csrf_tokens(f"http://127.0.0.1:{_free_port()}/api")


def test_the_inventory_is_read_again_only_when_its_published_digest_changed(
    prefect_server: str,
):
    """A process answers from its last read of the published inventory while the digest published beside it is
    the same, and reads the block again once a publish (from any process) changed it: a change is seen at
    once, an unchanged inventory is never read whole again."""
    from prefect.variables import Variable

    from dbcrew.flows.targets import (
        INVENTORY_BLOCK,
        INVENTORY_VERSION,
        InventoryBlock,
        publish_inventory,
        published_entry,
        published_inventory,
    )
    from dbcrew.inventory import Inventory

    def inventory(**urls: str) -> Inventory:
        return Inventory.model_validate(
            {"targets": [{"name": n, "url": u} for n, u in urls.items()]}
        )

    def block_alone(kept: Inventory) -> None:  # the block changed, its digest not (yet)
        InventoryBlock(inventory=kept.model_dump(mode="json")).save(INVENTORY_BLOCK, overwrite=True)

    publish_inventory(inventory(x="postgresql://app@one.example/x"))
    assert published_entry("x").url == "postgresql://app@one.example/x"
    first = published_inventory()
    # The block rewritten behind the digest's back: this process keeps its read (it did not read the block).
    block_alone(inventory(x="postgresql://app@two.example/x"))
    assert published_inventory() is first
    assert published_entry("x").url == "postgresql://app@one.example/x"
    # A publish (here or on another machine) changes the digest: seen at the next read, new names too.
    publish_inventory(
        inventory(x="postgresql://app@three.example/x", y="postgresql://app@three.example/y")
    )
    assert published_entry("x").url == "postgresql://app@three.example/x"
    assert published_entry("y").url == "postgresql://app@three.example/y"
    # An inventory published without a digest (an older dbcrew): the block is read every time.
    Variable.unset(INVENTORY_VERSION)
    block_alone(inventory(x="postgresql://app@four.example/x"))
    assert published_entry("x").url == "postgresql://app@four.example/x"
    block_alone(inventory(x="postgresql://app@five.example/x"))
    assert published_entry("x").url == "postgresql://app@five.example/x"


def test_a_targets_review_slot_is_held_by_one_run_at_a_time_and_given_back(
    prefect_server: str, monkeypatch: pytest.MonkeyPatch
):
    """Two runs of one target: the second waits, refused, until the first gives the slot back (no timing: the
    first holds it until the second was refused once), and no slot is left taken after."""
    import threading

    from prefect import flow
    from prefect.client.orchestration import get_client

    from dbcrew import stopping
    from dbcrew.flows import target_slots
    from dbcrew.flows.target_slots import target_limit, target_slot

    name = "slot-one"
    with get_client(sync_client=True) as client:
        client.upsert_global_concurrency_limit_by_name(target_limit(name), 1)
    said: list[str] = []
    refused, give_back = threading.Event(), threading.Event()

    waited = stopping.pause

    def pause(seconds: float) -> bool:
        refused.set()
        return waited(min(seconds, 0.5))

    monkeypatch.setattr(target_slots.stopping, "pause", pause)

    @flow(name="slot_holder")
    def holder(tag: str) -> None:
        with target_slot(name, 60.0):
            said.append(f"{tag} in")
            if tag == "first":
                give_back.wait(timeout=300)
            said.append(f"{tag} out")

    first = threading.Thread(target=holder, args=("first",))
    first.start()
    second = threading.Thread(target=holder, args=("second",))
    while "first in" not in said and first.is_alive():
        threading.Event().wait(0.1)
    second.start()
    assert refused.wait(timeout=300), "the second run was never refused the slot"
    assert said == ["first in"], said
    give_back.set()
    first.join(timeout=300)
    second.join(timeout=300)
    assert said == ["first in", "first out", "second in", "second out"]
    with get_client(sync_client=True) as client:
        limit = client.read_global_concurrency_limit_by_name(target_limit(name))
    assert limit.active_slots == 0, "a slot was left taken"


def test_the_in_process_worker_leaves_the_crews_modules_out_of_garbage_collections(
    prefect_server: str,
):
    import gc

    from dbcrew.flows import review
    from dbcrew.flows.deploy import ensure_pool
    from dbcrew.flows.queues import PoolQueue
    from dbcrew.flows.worker import InProcessWorker

    def collected() -> set[int]:
        """What a full collection walks: every tracked object outside the frozen ones."""
        return {id(o) for o in gc.get_objects()}

    gc.unfreeze()  # another worker of this test process may have frozen them already
    assert id(review.__dict__) in collected()
    pool = "frozen-imports"
    ensure_pool(pool, max_reviews=1)

    async def set_up() -> None:
        async with InProcessWorker(work_pool_name=pool, work_queues=[PoolQueue.REVIEWS]):
            pass

    anyio.run(set_up)
    assert gc.get_freeze_count() > 0
    assert id(review.__dict__) not in collected(), "the review flow's module is frozen"
