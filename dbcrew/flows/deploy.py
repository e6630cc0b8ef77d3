"""Deploy the crew to a Prefect server: a work pool of in-process workers (dbcrew/flows/worker.py), the inventory, and its deployments.

Scheduled reviews are one deployment and one cron schedule per schedule group (targets that share a
cron, scenario and `missed:`; dbcrew.inventory.ScheduleGroup), not per target: each slot's run
(dbcrew/flows/fleet.py `scheduled_reviews`) starts one review per target of the group on the pool, so
what the Prefect scheduler keeps ahead grows with the distinct schedules, never with the fleet.

Deployments name their flows by module path (`dbcrew.flows.targets.review_target`), so a worker on any
machine with dbcrew installed runs them; nothing points at this machine's files. The pool has four
queues (dbcrew/flows/queues.py): `reviews` (its concurrency limit is the fleet's overall limit), `fleet`
(the fleet runs that wait for reviews must never take a review's slot), `incidents` (the diagnoses an
incident or an alert starts, with a limit of their own and polled first, so they never wait behind the
fleet) and `watch`: a worker that serves it (every worker of the pool, unless `--work-queue` names
others) runs its own share of the watching (dbcrew/flows/watching.py WatchShares), so the watching has
no deployment; older versions' watching deployments are deleted at the next deploy.
"""

from __future__ import annotations

from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import WorkPoolCreate, WorkQueueUpdate
from prefect.deployments.runner import RunnerDeployment
from prefect.exceptions import ObjectNotFound
from prefect.schedules import Cron
from prefect.types.entrypoint import EntrypointType

from dbcrew.errors import UsageError
from dbcrew.flows.dispatch import ran_sync
from dbcrew.flows.fleet import fleet_review, scheduled_reviews
from dbcrew.flows.queues import MAX_DIAGNOSES, PRIORITIES, PoolQueue
from dbcrew.flows.review import health_review
from dbcrew.flows.targets import ON_DEMAND, publish_inventory, review_target
from dbcrew.flows.worker import WORKER_TYPE, InProcessWorker
from dbcrew.inventory import Inventory, ScheduleGroup, TargetEntry
from dbcrew.models.target_run import TargetRun

POOL = "dbcrew"


def ensure_pool(pool: str, max_reviews: int, max_diagnoses: int = MAX_DIAGNOSES) -> None:
    """A work pool of the crew's in-process workers with its queues, each at its priority: `max_reviews` reviews
    and `max_diagnoses` diagnoses at once over every worker. An existing pool's queues are set the same way (a
    pool made before `incidents` gets it)."""
    limits = {PoolQueue.REVIEWS: max_reviews, PoolQueue.INCIDENTS: max_diagnoses}
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
        # Highest priority first, each through the pool's own route: there Prefect moves the queue that held a
        # priority down rather than share it (the client's update_work_queue takes the older /work_queues route,
        # which left `reviews` and the pool's `default` both at 2 in a pool made before `incidents`).
        for queue in sorted(PoolQueue, key=PRIORITIES.__getitem__):
            limit, priority = limits.get(queue), PRIORITIES[queue]
            try:
                client.read_work_queue_by_name(queue, work_pool_name=pool)
            except ObjectNotFound:
                client.create_work_queue(
                    queue, work_pool_name=pool, concurrency_limit=limit, priority=priority
                )
                continue
            client.request(
                "PATCH",
                "/work_pools/{work_pool_name}/queues/{name}",
                path_params={"work_pool_name": pool, "name": queue.value},
                json=WorkQueueUpdate(concurrency_limit=limit, priority=priority).model_dump(
                    mode="json", exclude_unset=True
                ),
            )


SHOWN_TARGETS = 10  # targets named in a schedule's description or alert; the rest are counted


def some_names(entries: list[TargetEntry]) -> str:
    """The first SHOWN_TARGETS names and how many more: a schedule of a thousand targets is not listed whole."""
    names = [e.name for e in entries]
    more = len(names) - SHOWN_TARGETS
    return ", ".join(names[:SHOWN_TARGETS]) + (f" and {more} more" if more > 0 else "")


def schedule_deployment(group: ScheduleGroup, entries: list[TargetEntry]) -> RunnerDeployment:
    """The schedule group's deployment: its cron schedule, its name the one parameter. Its runs wait for their
    reviews on the fleet queue, never in a review's slot; the targets are read when a slot fires."""
    return ran_sync(
        scheduled_reviews.to_deployment(
            name=group.name,
            parameters={"schedule": group.name},
            schedules=[Cron(group.cron, timezone="UTC")],
            description=f"{group.scenario.value} review of each of {len(entries)} targets on "
            f"`{group.cron}` (UTC), missed slots: {group.missed.value}: {some_names(entries)}",
            tags=["dbcrew", "scheduled"],
            work_queue_name=PoolQueue.FLEET,
            entrypoint_type=EntrypointType.MODULE_PATH,
        )
    )


def on_demand_deployment(inventory: Inventory) -> RunnerDeployment:
    """The run form of the UI: the target is a choice among the inventory's names."""
    made = review_target.to_deployment(
        name=ON_DEMAND,
        description="Review a database of the inventory now: choose the target, scenario and brain",
        tags=["dbcrew", ON_DEMAND],
        work_queue_name=PoolQueue.REVIEWS,
        entrypoint_type=EntrypointType.MODULE_PATH,
    )
    deployment = ran_sync(made)
    # Prefect builds the form from the flow's signature; the names are only known now (no public setter).
    form = deployment._parameter_openapi_schema.definitions[TargetRun.__name__]
    form["properties"]["target"]["enum"] = inventory.names()
    return deployment


def deployments_of(inventory: Inventory) -> list[RunnerDeployment]:
    made = [
        *(schedule_deployment(g, entries) for g, entries in inventory.schedule_groups().items()),
        on_demand_deployment(inventory),
        health_review.to_deployment(
            name="lab",
            description="Any URL, with fault injection and the ablation switches (for experiments)",
            tags=["dbcrew", "lab"],
            work_queue_name=PoolQueue.REVIEWS,
            entrypoint_type=EntrypointType.MODULE_PATH,
        ),
        fleet_review.to_deployment(
            name="fleet",
            description="Review every target of the inventory (or those with a tag) on the pool",
            tags=["dbcrew", "fleet"],
            work_queue_name=PoolQueue.FLEET,
            entrypoint_type=EntrypointType.MODULE_PATH,
        ),
    ]
    return [ran_sync(d) for d in made]


def deploy_inventory(
    inventory: Inventory,
    pool: str = POOL,
    max_reviews: int = 2,
    max_diagnoses: int = MAX_DIAGNOSES,
) -> list[str]:
    """Publish the inventory and (re)create every deployment; drops the deployments of targets and schedules no
    longer listed (and the per-target schedules of an older publish), with the runs they had scheduled.

    Returns the deployments' full names (flow/deployment).
    """
    publish_inventory(inventory)
    ensure_pool(pool, max_reviews, max_diagnoses)
    deployments = deployments_of(inventory)
    for deployment in deployments:
        deployment.apply(work_pool_name=pool)
    keep = {(d.entrypoint, d.name) for d in deployments}
    mine = {
        "dbcrew.flows.targets.review_target",
        "dbcrew.flows.fleet.scheduled_reviews",
        "dbcrew.flows.watching.watch_targets",  # no longer deployed: the workers run their shares
    }
    with get_client(sync_client=True) as client:
        for stale in client.read_deployments():
            if stale.entrypoint in mine and (stale.entrypoint, stale.name) not in keep:
                client.delete_deployment(stale.id)
    return [d.full_name for d in deployments]
