"""The one way a target's run is started on the pool: a `TargetRun` as a run of the on-demand deployment.

The fleet and the schedules' slots (one review per target: dbcrew/flows/fleet.py), the watcher (a
diagnosis per incident: dbcrew/flows/watching.py) and the Alertmanager receiver (a diagnosis per
alert: dbcrew/flows/alertmanager.py) all ask for a run of `review_target` the same way, so its
parameters are the one typed value the flow validates, whoever builds it. The run is named by its
target from the start (not only once a worker takes it), and the call does not wait for it.

A run goes to its deployment's queue (`reviews`) unless the caller names another: the watcher and the
receiver put their diagnoses on `incidents` (dbcrew/flows/queues.py), where they never wait behind a fleet.
"""

from __future__ import annotations

from prefect.client.schemas.objects import FlowRun
from prefect.deployments import run_deployment

from dbcrew.flows.dispatch import ran_sync
from dbcrew.flows.queues import PoolQueue
from dbcrew.flows.targets import ON_DEMAND_DEPLOYMENT
from dbcrew.models.target_run import TargetRun


def start_run(
    request: TargetRun,
    tags: list[str],
    deployment: str = ON_DEMAND_DEPLOYMENT,
    child: bool = False,
    queue: PoolQueue | None = None,
) -> FlowRun:
    """Start `request` as a run of `deployment` (flow/deployment, a deployment of review_target), tagged `tags`;
    the flow run, scheduled. `child`: shown as a subflow of the flow run that starts it (the fleet's reviews);
    otherwise a run of its own, which outlives the one that started it (an incident's diagnosis). `queue`: the pool's
    queue it waits on, when not the deployment's own."""
    return ran_sync(
        run_deployment(
            deployment,
            parameters={"request": request.model_dump(mode="json", exclude_defaults=True)},
            flow_run_name=request.target,
            tags=tags,
            timeout=0,
            as_subflow=child,
            work_queue_name=queue.value if queue is not None else None,
        )
    )
