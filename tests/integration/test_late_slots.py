"""Schedule health on a real Prefect server: a slot no worker could start is told once; queued reviews never are.

The session's Prefect test server has no worker, so the test is the worker: it polls a pool's queues
as a worker does (which is what records the poll on the server) or not at all, and gives the slot
runs the states a worker would. Two schedule groups on two pools: one polled, one nobody polls.
A fleet waiting behind the pool's limit used to alert once per queued review (Prefect marks each
Late after 15 s); now only the slots are judged.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from prefect.client.orchestration import SyncPrefectClient, get_client
from prefect.states import Late, Running, Scheduled

from dbcrew.flows.deploy import ensure_pool, schedule_deployment
from dbcrew.flows.queues import PoolQueue
from dbcrew.flows.schedule_health import LateSlots
from dbcrew.flows.targets import review_target
from dbcrew.inventory import parse_inventory
from tests.webhooks import receiving_webhooks

POLLED, IDLE = "slots-polled", "slots-idle"


def polled_by_a_worker(client: SyncPrefectClient, pool: str) -> None:
    """Ask for the pool's runs as a worker does (none is due: the slots' runs are given states below), and
    wait until the server recorded the poll (it does so in the background)."""
    client.get_scheduled_flow_runs_for_work_pool(pool, scheduled_before=datetime.now(UTC))
    for _ in range(120):
        queues = [
            client.read_work_queue_by_name(q, work_pool_name=pool)
            for q in (PoolQueue.FLEET, PoolQueue.REVIEWS)
        ]
        if all(q.last_polled is not None for q in queues):
            return
        time.sleep(0.5)
    raise AssertionError(f"the server never recorded the poll of {pool}")


def test_only_a_slot_no_worker_could_start_is_told_once_per_slot(prefect_server: str) -> None:
    due = datetime.now(UTC) - timedelta(minutes=5)
    with receiving_webhooks() as (hook, received):
        inventory = parse_inventory(
            {
                "targets": [
                    *(
                        {
                            "name": f"nightly-{i}",
                            "url": f"postgresql://monitor@db{i}.example.com/shop",
                            "schedule": "0 3 * * *",
                            "alerts": [f"{hook}/shared"]
                            if i < 5
                            else [f"{hook}/shared", f"{hook}/own"],
                        }
                        for i in range(6)
                    ),
                    {
                        "name": "weekly",
                        "url": "postgresql://monitor@weekly.example.com/shop",
                        "schedule": "0 4 * * 1",
                        "alerts": [f"{hook}/weekly"],
                    },
                ]
            }
        )
        (nightly, nightly_entries), (weekly, weekly_entries) = inventory.schedule_groups().items()
        with get_client(sync_client=True) as client:
            ensure_pool(POLLED, max_reviews=1)
            ensure_pool(IDLE, max_reviews=1)
            on_polled = schedule_deployment(nightly, nightly_entries).apply(work_pool_name=POLLED)
            on_idle = schedule_deployment(weekly, weekly_entries).apply(work_pool_name=IDLE)

            def slot(deployment, state):
                run = client.create_flow_run_from_deployment(
                    deployment, state=Scheduled(scheduled_time=due)
                )
                if state is not None:
                    client.set_flow_run_state(run.id, state, force=True)
                return run

            # The polled pool's slot started; its six reviews queue behind the limit of one, marked Late.
            started = slot(on_polled, Running())
            for entry in nightly_entries:
                client.create_flow_run(
                    review_target,
                    parameters={"request": {"target": entry.name}},
                    state=Late(scheduled_time=due),
                )
            polled_by_a_worker(client, POLLED)
            supervisor = LateSlots(inventory, since=due - timedelta(hours=1))
            assert supervisor.check() == [], "queued reviews of a started slot are not late"

            unstarted = slot(on_idle, None)  # nobody polls its pool
            (said,) = supervisor.check()
            assert said.startswith(
                f"dbcrew: the scheduled health reviews of {weekly.name} due {due:%Y-%m-%d %H:%M UTC} have not started"
            ), said
            assert f"no worker has ever polled the fleet queue of work pool {IDLE}" in said
            assert unstarted.name in said

            # The polled pool's fleet queue paused: its next slot cannot start; one alert for six targets, each
            # alert URL once (the shared one names five of them).
            fleet_queue = client.read_work_queue_by_name(PoolQueue.FLEET, work_pool_name=POLLED)
            client.update_work_queue(fleet_queue.id, is_paused=True)
            blocked = slot(on_polled, None)
            (said,) = supervisor.check()
            assert (
                f"the fleet queue of work pool {POLLED} is paused" in said and blocked.name in said
            )
            assert supervisor.check() == [], "told once"
            client.update_work_queue(fleet_queue.id, is_paused=False)
            assert started.id not in supervisor.told

    assert sorted(str(m["path"]) for m in received) == ["/own", "/shared", "/weekly"], received
    shared = next(m for m in received if m["path"] == "/shared")
    assert "Targets (6): nightly-0, nightly-1" in str(shared["message"]), shared
    assert all("have not started" in str(m["title"]) for m in received)
