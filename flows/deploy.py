"""Deploy the crew to a Prefect server: a work pool of in-process workers (flows/worker.py), the inventory, and its deployments.

Deployments name their flows by module path (`flows.targets.review_target`), so a worker on any
machine with dbcrew installed runs them; nothing points at this machine's files. The pool has three
queues: `reviews` (its concurrency limit is the fleet's overall limit), `fleet` (the fleet runs
that wait for reviews must never take a review's slot) and `watch`: a worker that serves it (every
worker of the pool, unless `--work-queue` names others) runs its own share of the watching
(flows/watching.py WatchShares), so the watching has no deployment; older versions' watching
deployments are deleted at the next deploy.
"""

from __future__ import annotations

from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import WorkPoolCreate
from prefect.deployments.runner import RunnerDeployment
from prefect.exceptions import ObjectNotFound
from prefect.schedules import Cron
from prefect.types.entrypoint import EntrypointType

from dbcrew.errors import UsageError
from dbcrew.inventory import Inventory, TargetEntry
from flows.dispatch import ran_sync
from flows.fleet import fleet_review
from flows.review import health_review
from flows.targets import ON_DEMAND, publish_inventory, review_target
from flows.worker import WATCH_QUEUE, WORKER_TYPE, InProcessWorker

POOL = "dbcrew"
REVIEW_QUEUE = "reviews"
FLEET_QUEUE = "fleet"


def ensure_pool(pool: str, max_reviews: int) -> None:
    """A work pool of the crew's in-process workers with the two queues; `max_reviews` reviews at once over every worker."""
    with get_client(sync_client=True) as client:
        try:
            existing_pool = client.read_work_pool(pool)
        except ObjectNotFound:
            client.create_work_pool(
                WorkPoolCreate(
                    name=pool,
                    type=WORKER_TYPE,
                    base_job_template=InProcessWorker.get_default_base_job_template(),
                )
            )
        else:
            if existing_pool.type != WORKER_TYPE:
                raise UsageError(
                    f"work pool {pool!r} on this server is of type {existing_pool.type!r}, not {WORKER_TYPE!r}: "
                    f"choose another --pool, or delete it (`prefect work-pool delete {pool}`)"
                )
        for queue, limit in ((REVIEW_QUEUE, max_reviews), (FLEET_QUEUE, None), (WATCH_QUEUE, None)):
            try:
                existing = client.read_work_queue_by_name(queue, work_pool_name=pool)
                client.update_work_queue(existing.id, concurrency_limit=limit)
            except ObjectNotFound:
                client.create_work_queue(queue, work_pool_name=pool, concurrency_limit=limit)


def target_deployment(entry: TargetEntry) -> RunnerDeployment:
    """The target's own deployment: its cron schedule, its name fixed as the one parameter."""
    deployment = review_target.to_deployment(
        name=entry.name,
        parameters={"target": entry.name},
        schedules=[Cron(entry.schedule, timezone="UTC")] if entry.schedule else None,
        description=f"{entry.scenario} review of {entry.name}"
        + (f" on `{entry.schedule}` (UTC)" if entry.schedule else ""),
        tags=["dbcrew", *entry.tags],
        work_queue_name=REVIEW_QUEUE,
        entrypoint_type=EntrypointType.MODULE_PATH,
    )
    return ran_sync(deployment)


def on_demand_deployment(inventory: Inventory) -> RunnerDeployment:
    """The run form of the UI: the target is a choice among the inventory's names."""
    made = review_target.to_deployment(
        name=ON_DEMAND,
        description="Review a database of the inventory now: choose the target, scenario and brain",
        tags=["dbcrew", ON_DEMAND],
        work_queue_name=REVIEW_QUEUE,
        entrypoint_type=EntrypointType.MODULE_PATH,
    )
    deployment = ran_sync(made)
    # Prefect builds the form from the flow's signature; the names are only known now (no public setter).
    deployment._parameter_openapi_schema.properties["target"]["enum"] = inventory.names()
    return deployment


def deployments_of(inventory: Inventory) -> list[RunnerDeployment]:
    made = [
        *(target_deployment(entry) for entry in inventory.targets),
        on_demand_deployment(inventory),
        health_review.to_deployment(
            name="lab",
            description="Any URL, with fault injection and the ablation switches (for experiments)",
            tags=["dbcrew", "lab"],
            work_queue_name=REVIEW_QUEUE,
            entrypoint_type=EntrypointType.MODULE_PATH,
        ),
        fleet_review.to_deployment(
            name="fleet",
            description="Review every target of the inventory (or those with a tag) on the pool",
            tags=["dbcrew", "fleet"],
            work_queue_name=FLEET_QUEUE,
            entrypoint_type=EntrypointType.MODULE_PATH,
        ),
    ]
    return [ran_sync(d) for d in made]


def deploy_inventory(inventory: Inventory, pool: str = POOL, max_reviews: int = 2) -> list[str]:
    """Publish the inventory and (re)create every deployment; drops targets' deployments no longer listed.

    Returns the deployments' full names (flow/deployment).
    """
    publish_inventory(inventory)
    ensure_pool(pool, max_reviews)
    deployments = deployments_of(inventory)
    for deployment in deployments:
        deployment.apply(work_pool_name=pool)
    keep = {(d.entrypoint, d.name) for d in deployments}
    mine = {
        "flows.targets.review_target",
        "flows.watching.watch_targets",
    }  # the latter: no longer deployed
    with get_client(sync_client=True) as client:
        for stale in client.read_deployments():
            if stale.entrypoint in mine and (stale.entrypoint, stale.name) not in keep:
                client.delete_deployment(stale.id)
    return [d.full_name for d in deployments]
