"""An incident's diagnosis never waits behind the fleet: the pool's `incidents` queue, on the session's real Prefect
test server.

`ensure_pool` makes the queue with its own concurrency limit at the highest priority (Prefect hands a worker
the runs of its queues in priority order), in a new pool and in one made before the queue existed. A
diagnosis started the way the watcher starts one (dbcrew/flows/watching.py `start_diagnosis`) lands on
`incidents` while the `reviews` queue's one slot is taken and another review waits there, and a worker's
poll takes the diagnosis, which runs to its end on a real PostgreSQL, while the review still waits. A
diagnosis no worker could start (no worker polls `incidents`) is told once, to its target's alert URLs;
one waiting behind the limit of a polled queue is not.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import UUID

import anyio
import pytest
from prefect.client.orchestration import SyncPrefectClient, get_client
from prefect.client.schemas.actions import WorkPoolCreate
from prefect.states import Running, Scheduled

from dbcrew.flows.deploy import deploy_inventory, ensure_pool
from dbcrew.flows.diagnosis_health import StalledDiagnoses
from dbcrew.flows.queues import PoolQueue
from dbcrew.flows.starting import start_run
from dbcrew.flows.watching import start_diagnosis
from dbcrew.flows.worker import WORKER_TYPE, InProcessWorker
from dbcrew.inventory import parse_inventory
from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.models.incident import IncidentSignal
from dbcrew.models.interval import PastInterval
from dbcrew.models.target_run import TargetRun
from dbcrew.store.samples import Incident
from tests.webhooks import receiving_webhooks

pytestmark = pytest.mark.prefect

RUN_SECONDS = 300  # a bound on the diagnosis's run on a loaded host, never a speed asserted


def queues_of(client: SyncPrefectClient, pool: str) -> dict[str, tuple[int, int | None]]:
    """The pool's queues: name -> (priority, concurrency limit), in the order Prefect polls them."""
    return {
        q.name: (q.priority, q.concurrency_limit)
        for q in client.read_work_queues(work_pool_name=pool)
    }


def test_the_incidents_queue_has_its_own_limit_and_is_polled_first_in_a_new_pool_and_an_older_one(
    prefect_server: str,
) -> None:
    ensure_pool("incidents-new", max_reviews=3, max_diagnoses=2)
    with get_client(sync_client=True) as client:
        made = queues_of(client, "incidents-new")
        # a pool as an older dbcrew made it: no incidents queue, reviews polled first
        client.create_work_pool(WorkPoolCreate(name="incidents-older", type=WORKER_TYPE))
        for queue, limit in (("reviews", 2), ("fleet", None), ("watch", None)):
            client.create_work_queue(
                queue, work_pool_name="incidents-older", concurrency_limit=limit
            )
    ensure_pool("incidents-older", max_reviews=4, max_diagnoses=1)
    with get_client(sync_client=True) as client:
        older = queues_of(client, "incidents-older")

    assert list(made)[:4] == ["incidents", "reviews", "fleet", "watch"], made
    assert made["incidents"] == (1, 2) and made["reviews"][1] == 3, made
    assert list(older)[:4] == ["incidents", "reviews", "fleet", "watch"], older
    assert older["incidents"] == (1, 1) and older["reviews"][1] == 4, older


def test_a_diagnosis_the_watcher_starts_runs_while_the_reviews_queue_is_full(
    prefect_server: str,
    pg: EmbeddedPostgres,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DBCREW_REPORTS_DIR", str(tmp_path / "reports"))
    pool = "incidents-first"  # no other worker polls it
    inventory = parse_inventory(
        {
            "targets": [
                {"name": "routine-db", "url": pg.dsn()},
                {"name": "incident-db", "url": pg.dsn(), "watch": {"every": 5}},
            ]
        }
    )
    deploy_inventory(inventory, pool, max_reviews=1, max_diagnoses=1)
    with get_client(sync_client=True) as client:
        # the fleet's reviews: one holds the reviews queue's only slot, the next waits behind it
        holding = start_run(TargetRun(target="routine-db"), ["dbcrew", "fleet-test"])
        client.set_flow_run_state(holding.id, Running(), force=True)
    waiting = start_run(TargetRun(target="routine-db"), ["dbcrew", "fleet-test"])

    now = datetime.now(UTC)
    incident = Incident(
        target="incident-db",
        started_at=now - timedelta(minutes=2),
        ended_at=now - timedelta(minutes=1),
        closed=True,
        signals=[IncidentSignal(name="act.wait_lock", baseline_median=0.0, peak=3.5, z=40.0)],
    )
    entry = inventory.get("incident-db")
    diagnosis = start_diagnosis(
        entry, incident, PastInterval(start=incident.started_at, end=incident.ended_at)
    )
    assert diagnosis.work_queue_name == "incidents"
    assert waiting.work_queue_name == "reviews"

    async def one_poll() -> list[str]:
        async with InProcessWorker(
            work_pool_name=pool, work_queues=[PoolQueue.REVIEWS, PoolQueue.INCIDENTS]
        ) as worker:
            taken = [str(r.id) for r in await worker.get_and_submit_flow_runs()]
            with anyio.move_on_after(RUN_SECONDS):
                while not (run := await worker.client.read_flow_run(diagnosis.id)).state or not (
                    run.state.is_final()
                ):
                    await anyio.sleep(1.0)
        return taken

    try:
        taken = anyio.run(one_poll)
        with get_client(sync_client=True) as client:
            ended = client.read_flow_run(diagnosis.id)
            still = client.read_flow_run(waiting.id)
    finally:
        with get_client(sync_client=True) as client:
            for run in (holding, waiting):
                client.delete_flow_run(run.id)

    assert taken == [str(diagnosis.id)], "the worker took the diagnosis and no review"
    assert ended.state is not None and ended.state.is_completed(), ended.state
    assert still.state is not None and still.state.is_scheduled(), still.state


def test_a_diagnosis_no_worker_could_start_is_told_once_and_one_behind_the_limit_never(
    prefect_server: str,
) -> None:
    pool = "incidents-unpolled"  # no worker polls it
    due = datetime.now(UTC) - timedelta(minutes=5)
    with receiving_webhooks() as (hook, received):
        inventory = parse_inventory(
            {
                "targets": [
                    {
                        "name": "stalled-db",
                        "url": "postgresql://monitor@stalled.example.com/shop",
                        "alerts": [f"{hook}/stalled"],
                    }
                ]
            }
        )
        deploy_inventory(inventory, pool, max_reviews=1, max_diagnoses=1)
        request = TargetRun(
            target="stalled-db",
            interval=PastInterval(start=due - timedelta(minutes=3), end=due),
            alert="act.wait_lock 0 -> 3.5",
        )
        with get_client(sync_client=True) as client:
            on_demand = client.read_deployment_by_name("review_target/on-demand")

            def waiting_diagnosis() -> UUID:
                return client.create_flow_run_from_deployment(
                    on_demand.id,
                    parameters={"request": request.model_dump(mode="json", exclude_defaults=True)},
                    state=Scheduled(scheduled_time=due),
                    work_queue_name=PoolQueue.INCIDENTS.value,
                ).id

            stalled = waiting_diagnosis()
            supervisor = StalledDiagnoses(inventory, since=due - timedelta(hours=1))
            (said,) = supervisor.check()
            assert f"no worker has ever polled the incidents queue of work pool {pool}" in said, (
                said
            )
            assert supervisor.check() == [], "told once"

            # A worker polls the queue now: a diagnosis waiting there is behind the limit, not stalled.
            client.get_scheduled_flow_runs_for_work_pool(
                pool,
                work_queue_names=[PoolQueue.INCIDENTS.value],
                scheduled_before=due - timedelta(hours=1),
            )
            for _ in range(120):  # the server records the poll in the background
                if client.read_work_queue_by_name(
                    PoolQueue.INCIDENTS, work_pool_name=pool
                ).last_polled:
                    break
                time.sleep(0.5)
            queued = waiting_diagnosis()
            assert supervisor.check() == [], "waiting on a polled queue is not stalled"
            for run in (stalled, queued):
                client.delete_flow_run(run)

    assert [m["path"] for m in received] == ["/stalled"], received
    assert "stalled-db" in str(received[0]["title"]) and "not diagnosed" in str(
        received[0]["title"]
    )
    assert "no worker has ever polled the incidents queue" in str(received[0]["message"])
