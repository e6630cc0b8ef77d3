"""Operating the crew with real processes: `dbcrew server`, its worker, schedules, a fleet run through the API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from uuid import UUID

import pytest

from lab.crew_server import CrewServer
from lab.embedded import EmbeddedPostgres

pytestmark = pytest.mark.timeout(900)

SCHEDULED = ("alpha", "beta", "gone")


@pytest.fixture()
def api(crew_server: CrewServer) -> Iterator[str]:
    """This test's Prefect client talks to the crew's server."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: crew_server.api}):
        yield crew_server.api


def poll(check, what: str, attempts: int = 240):  # noqa: ANN001, ANN201 - a tiny waiting helper
    """Ask again until `check()` gives something truthy; the server and worker act on their own clocks."""
    for _ in range(attempts):
        value = check()
        if value:
            return value
        time.sleep(1.0)
    pytest.fail(f"gave up waiting for {what}")


def finished(client, run_id: UUID):  # noqa: ANN001, ANN201
    """The run's final state, once the worker got it there."""
    def final():  # noqa: ANN202
        state = client.read_flow_run(run_id).state
        return state if state is not None and state.is_final() else None

    return poll(final, f"flow run {run_id} to finish", attempts=600)


def test_every_schedule_gets_runs_from_the_servers_scheduler(api: str):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (DeploymentFilter, DeploymentFilterName, FlowRunFilter,
                                                FlowRunFilterState, FlowRunFilterStateType)
    from prefect.client.schemas.objects import StateType

    def scheduled() -> dict[str, int] | None:
        with get_client(sync_client=True) as client:
            runs = client.read_flow_runs(
                deployment_filter=DeploymentFilter(name=DeploymentFilterName(any_=list(SCHEDULED))),
                flow_run_filter=FlowRunFilter(state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.SCHEDULED]))))
            deployments = {d.id: d.name for d in client.read_deployments()}
        counts = {name: sum(deployments.get(r.deployment_id) == name for r in runs) for name in SCHEDULED}
        return counts if all(counts.values()) else None

    counts = poll(scheduled, "scheduled runs of every target's deployment")
    assert set(counts) == set(SCHEDULED) and min(counts.values()) >= 1


def test_the_deployments_offer_a_form_of_choices(api: str):
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        on_demand = client.read_deployment_by_name("review_target/on-demand")
        lab = client.read_deployment_by_name("health_review/lab")
        client.read_deployment_by_name("fleet_review/fleet")
    form = on_demand.parameter_openapi_schema["properties"]
    assert form["target"]["enum"] == ["alpha", "beta", "gone"]
    assert set(form) == {"target", "scenario", "brain", "window", "alert"}  # no fault injection, no ablations
    assert all(form[name].get("description") for name in form)
    assert {"faults", "monitor", "gap_narrow"} <= set(lab.parameter_openapi_schema["properties"])
    assert on_demand.entrypoint == "flows.targets.review_target"  # by module: any machine with dbcrew runs it


def test_a_fleet_run_reviews_each_target_on_the_pool_and_isolates_the_failure(api: str):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        fleet = client.read_deployment_by_name("fleet_review/fleet")
        run = client.create_flow_run_from_deployment(fleet.id, parameters={"tag": "fleet-test"})
        state = finished(client, run.id)
        assert state.is_completed(), state.message
        summary = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["dbcrew-fleet-fleet-test"])))
        children = client.read_flow_runs()
    text = str(summary[0].data)
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| ") and "---" not in line}
    assert "2 of 3 reviews completed." in text
    assert "[completed](" in rows["alpha"] and "[completed](" in rows["beta"]
    assert "[failed](" in rows["gone"] and "cannot connect to postgresql://postgres@127.0.0.1:" in rows["gone"]
    assert rows["alpha"].split("|")[2].strip() in {"critical", "warning", "info", "none"}
    reviews = [c for c in children if c.parent_task_run_id is not None and c.name in {"alpha", "beta", "gone"}]
    assert sorted(c.name for c in reviews) == ["alpha", "beta", "gone"]
    assert all(c.work_queue_name == "reviews" for c in reviews)


def test_a_cli_review_goes_through_the_running_server(crew_server: CrewServer, fleet_pg: EmbeddedPostgres, api: str,
                                                     tmp_path: Path):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName

    from cli.server import healthy
    from lab.embedded import _free_port

    assert healthy(crew_server.api) and not healthy(f"http://127.0.0.1:{_free_port()}/api")
    result = subprocess.run([sys.executable, "-m", "cli", "review", fleet_pg.dsn("alpha"), "--window", "1", "--out", str(tmp_path)],
                            capture_output=True, text=True, timeout=600, env={**os.environ, "PREFECT_API_URL": crew_server.api})
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads((tmp_path / "report.json").read_text())
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=[f"initialize-{report['run_id']}"])))
    assert len(runs) == 1  # the run is on the server (and in its UI), not on an ephemeral one
