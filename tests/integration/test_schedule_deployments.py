"""Deployments and schedules are bounded by the distinct schedules of the inventory, not by its targets.

Published to the session's Prefect test server as `dbcrew server` publishes: 60 targets on two crons
make two scheduled deployments with one schedule each; the per-target deployment an older dbcrew made
is removed with its scheduled run; a schedule nobody is on any more is removed at the next publish.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from prefect.client.orchestration import SyncPrefectClient, get_client
from prefect.deployments.runner import EntrypointType
from prefect.exceptions import ObjectNotFound
from prefect.schedules import Cron
from prefect.states import Scheduled

from dbcrew.flows.deploy import deploy_inventory, ensure_pool
from dbcrew.flows.queues import PoolQueue
from dbcrew.flows.targets import review_target
from dbcrew.inventory import parse_inventory

POOL = "schedule-bound"


def fleet(crons: dict[str, int]) -> dict[str, object]:
    return {
        "targets": [
            {
                "name": f"db-{n}-{i}",
                "url": f"postgresql://monitor@db{n}-{i}.example.com/app",
                "schedule": cron,
                "window": 1 + i % 5,
            }
            for n, (cron, count) in enumerate(crons.items())
            for i in range(count)
        ]
    }


def scheduled_deployments(client: SyncPrefectClient) -> dict[str, list[str]]:
    """The crew's scheduled deployments on the server: name -> their crons."""
    return {
        d.name: [getattr(s.schedule, "cron", "?") for s in d.schedules]
        for d in client.read_deployments()
        if d.schedules and d.entrypoint and d.entrypoint.startswith("dbcrew.flows.")
    }


def test_sixty_targets_on_two_crons_are_two_deployments_and_old_ones_go(
    prefect_server: str,
) -> None:
    ensure_pool(POOL, max_reviews=2)
    legacy = review_target.to_deployment(
        name="legacy-target",
        parameters={"request": {"target": "legacy-target"}},
        schedules=[Cron("0 3 * * *", timezone="UTC")],
        work_queue_name=PoolQueue.REVIEWS,
        entrypoint_type=EntrypointType.MODULE_PATH,
    ).apply(work_pool_name=POOL)  # what `dbcrew server` deployed per target before
    with get_client(sync_client=True) as client:
        legacy_run = client.create_flow_run_from_deployment(
            legacy, state=Scheduled(scheduled_time=datetime.now(UTC) + timedelta(hours=1))
        )

    names = deploy_inventory(
        parse_inventory(fleet({"0 3 * * *": 58, "30 4 * * 1": 2})), POOL, max_reviews=2
    )

    assert [n for n in names if n.startswith("scheduled_reviews/")] == [
        "scheduled_reviews/health-0-3-x-x-x",
        "scheduled_reviews/health-30-4-x-x-1",
    ]
    assert not any(n.startswith("review_target/db-") for n in names)
    with get_client(sync_client=True) as client:
        assert scheduled_deployments(client) == {
            "health-0-3-x-x-x": ["0 3 * * *"],
            "health-30-4-x-x-1": ["30 4 * * 1"],
        }
        with pytest.raises(ObjectNotFound):
            client.read_deployment(legacy)
        with pytest.raises(ObjectNotFound):
            client.read_flow_run(legacy_run.id)
        shared = client.read_deployment_by_name("scheduled_reviews/health-0-3-x-x-x")
    assert shared.parameters == {"schedule": "health-0-3-x-x-x"}
    assert shared.work_queue_name == "fleet"
    assert (shared.description or "").startswith("health review of each of 58 targets")
    assert "and 48 more" in (shared.description or "")

    deploy_inventory(parse_inventory(fleet({"0 3 * * *": 60})), POOL, max_reviews=2)
    with get_client(sync_client=True) as client:
        assert scheduled_deployments(client) == {"health-0-3-x-x-x": ["0 3 * * *"]}
