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
from prefect.client.schemas.objects import FlowRun
from pydantic import BaseModel

from dbcrew.lab.crew_server import CrewServer
from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.models import Report
from tests.e2e.conftest import BETA_PASSWORD

pytestmark = pytest.mark.timeout(900)

SCHEDULES = {"health-0-3-x-x-x": "0 3 * * *", "health-0-5-1-x-x": "0 5 1 * *"}  # the inventory's


@pytest.fixture()
def api(crew_server: CrewServer) -> Iterator[str]:
    """This test's Prefect client talks to the crew's server."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: crew_server.api}):
        yield crew_server.api


def poll(check, what: str, attempts: int = 240):  # a tiny waiting helper
    """Ask again until `check()` gives something truthy; the server and worker act on their own clocks."""
    for _ in range(attempts):
        value = check()
        if value:
            return value
        time.sleep(1.0)
    pytest.fail(f"gave up waiting for {what}")


def finished(client, run_id: UUID):
    """The run's final state, once the worker got it there."""

    def final():
        state = client.read_flow_run(run_id).state
        return state if state is not None and state.is_final() else None

    return poll(final, f"flow run {run_id} to finish", attempts=600)


def test_every_schedule_gets_runs_from_the_servers_scheduler(api: str):
    """One deployment and one cron schedule per schedule group (alpha and beta share theirs), none per target;
    the server's scheduler keeps each one's runs ahead."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        DeploymentFilter,
        DeploymentFilterName,
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType

    with get_client(sync_client=True) as client:
        deployments = {d.id: d for d in client.read_deployments()}
    scheduled = {d.name: d for d in deployments.values() if d.schedules}
    assert sorted(scheduled) == sorted(SCHEDULES)
    assert "2 targets" in (scheduled["health-0-3-x-x-x"].description or "")
    for name, deployment in scheduled.items():
        assert deployment.entrypoint == "dbcrew.flows.fleet.scheduled_reviews"
        assert deployment.parameters == {"schedule": name}
        assert [s.schedule.cron for s in deployment.schedules] == [SCHEDULES[name]]
        assert deployment.work_queue_name == "fleet"
    assert {
        d.name for d in deployments.values() if d.entrypoint == "dbcrew.flows.targets.review_target"
    } == {"on-demand"}, "no deployment per target"

    def runs_ahead() -> dict[str, int] | None:
        with get_client(sync_client=True) as client:
            runs = client.read_flow_runs(
                deployment_filter=DeploymentFilter(name=DeploymentFilterName(any_=list(SCHEDULES))),
                flow_run_filter=FlowRunFilter(
                    state=FlowRunFilterState(
                        type=FlowRunFilterStateType(any_=[StateType.SCHEDULED])
                    )
                ),
            )
        counts = {
            name: sum(
                deployments[r.deployment_id].name == name
                for r in runs
                if r.deployment_id in deployments
            )
            for name in SCHEDULES
        }
        return counts if all(counts.values()) else None

    poll(runs_ahead, "scheduled runs of every schedule's deployment")


def test_the_deployments_offer_a_form_of_choices(api: str):
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        on_demand = client.read_deployment_by_name("review_target/on-demand")
        lab = client.read_deployment_by_name("health_review/lab")
        client.read_deployment_by_name("fleet_review/fleet")
    # The on-demand form is the one target run (TargetRun): the fleet, the watcher and the receiver start the same.
    on_demand_form = on_demand.parameter_openapi_schema
    assert set(on_demand_form["properties"]) == {"request"}
    assert on_demand_form["required"] == ["request"]
    assert on_demand_form["properties"]["request"].get("description")
    form = on_demand_form["definitions"]["TargetRun"]
    assert form["required"] == ["target"]
    assert form["properties"]["target"]["enum"] == ["alpha", "beta", "gone"]
    assert set(form["properties"]) == {
        "target",
        "scenario",
        "brain",
        "window",
        "alert",
        "interval",
        "prometheus",
        "incident",
    }  # no fault injection, no ablations (an incident's diagnosis keeps its causes with it)
    assert all(field.get("description") for field in form["properties"].values())
    signals = on_demand_form["definitions"]["RunIncident"]["properties"]["signals"]
    assert signals["items"] == {"$ref": "#/definitions/IncidentSignal"}
    # The lab form is the one review request: its options with help text, the recovery switches and faults inside.
    lab_form = lab.parameter_openapi_schema
    assert set(lab_form["properties"]) == {"request"}
    request = lab_form["definitions"]["ReviewRequest"]["properties"]
    assert {"target", "scenario", "brain", "settings", "faults"} <= set(request)
    assert all(request[name].get("description") for name in request)
    assert lab_form["definitions"]["Scenario"]["enum"] == ["health", "diagnose"]
    assert request["brain"]["enum"] == ["rules", "openai"]
    assert {"monitor", "gap_narrow"} <= set(lab_form["definitions"]["Ablations"]["properties"])
    assert (
        on_demand.entrypoint == "dbcrew.flows.targets.review_target"
    )  # by module: any machine with dbcrew runs it


FIX_ONE_PLANT_ANOTHER = "ALTER TABLE items ADD PRIMARY KEY (id); CREATE TABLE notes (body text);"
# A problem no review of the session has seen yet, planted in alpha and beta before the fleet's first run: a
# review alerts on the problems new since its target's previous run (dbcrew/roles/report/alerts.py), and an
# earlier file's reviews of the two (test_schedules.py's slot, test_ui.py's review) leave the session's store
# a previous run whose problems are not news. Planted, each first-fleet review has news whatever ran before.
FIRST_FLEET_NEWS = "first_fleet_news"


class FleetRun(BaseModel):
    """A finished fleet run: its summary artifact's rows by target, and its reviews' flow runs by target."""

    text: str
    rows: dict[str, list[str]]
    reviews: dict[str, FlowRun]


def run_fleet(tag: str) -> FleetRun:
    """Start the fleet deployment through the API, as the UI's Run button does, and wait for it."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        ArtifactFilterKey,
        FlowRunFilter,
        FlowRunFilterParentFlowRunId,
    )

    with get_client(sync_client=True) as client:
        fleet = client.read_deployment_by_name("fleet_review/fleet")
        run = client.create_flow_run_from_deployment(fleet.id, parameters={"tag": tag})
        state = finished(client, run.id)
        assert state.is_completed(), state.message
        summary = client.read_artifacts(
            artifact_filter=ArtifactFilter(
                key=ArtifactFilterKey(any_=[f"dbcrew-fleet-{tag}"]),
                flow_run_id=ArtifactFilterFlowRunId(any_=[run.id]),
            )
        )
        children = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(
                parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[run.id])
            )
        )
    text = str(summary[0].data)
    rows = {
        line.split("|")[1].strip(): [cell.strip() for cell in line.split("|")[1:-1]]
        for line in text.splitlines()
        if line.startswith("| ") and "---" not in line
    }
    return FleetRun(text=text, rows=rows, reviews={c.name: c for c in children})


@pytest.fixture(scope="module")
def first_fleet(
    crew_server: CrewServer,
    fleet_pg: EmbeddedPostgres,
    webhook: tuple[str, list[dict[str, object]]],
) -> tuple[FleetRun, int]:
    """The fleet's first run, with a new problem on alpha and beta (FIRST_FLEET_NEWS), and how many alerts the
    receiver had got by its end."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    for name in ("alpha", "beta"):
        fleet_pg.psql(f"CREATE TABLE {FIRST_FLEET_NEWS} (body text);", dbname=name)
    with temporary_settings(updates={PREFECT_API_URL: crew_server.api}):
        return run_fleet("fleet-test"), len(webhook[1])


def report_of(crew_server: CrewServer, review: FlowRun) -> Report:
    """The report a review wrote (its flow run's result is the path, on this one machine's worker)."""
    (path,) = [
        p
        for p in (crew_server.logs.parent / "reports").glob("*/report.json")
        if Report.model_validate_json(p.read_text()).link.endswith(str(review.id))
    ]
    return Report.model_validate_json(path.read_text())


def test_a_fleet_run_reviews_each_target_on_the_pool_and_isolates_the_failure(
    api: str, first_fleet: tuple[FleetRun, int]
):
    fleet, _ = first_fleet
    rows = fleet.rows
    assert "2 of 3 reviews completed." in fleet.text
    assert rows["target"][:5] == ["target", "worst", "problems", "new", "resolved"]
    assert "[completed](" in rows["alpha"][5] and "[completed](" in rows["beta"][5]
    assert "[failed](" in rows["gone"][5] and "cannot connect to" in rows["gone"][6]
    assert rows["alpha"][1] in {"critical", "warning", "info", "none"}
    assert sorted(fleet.reviews) == ["alpha", "beta", "gone"]
    assert all(c.work_queue_name == "reviews" for c in fleet.reviews.values())
    # beta's second alert URL has no listener: the failed delivery is shown on its run, which still completed
    assert "Not delivered" in alert_artifact(fleet.reviews["beta"])
    sent = alert_artifact(fleet.reviews["alpha"])
    assert (
        "Sent to 1 URLs" in sent
        and f"table_without_primary_key on public.{FIRST_FLEET_NEWS}" in sent
    )


def test_a_fleet_review_is_one_flow_run_with_its_artifacts_and_no_subflows_or_task_runs(
    api: str, first_fleet: tuple[FleetRun, int]
):
    """A review of the pool runs its phases inside its own flow run (dbcrew/flows/phases.py InRunPhases): the UI's
    unit per target keeps the plan, report, findings and outcome, and no phase is a flow or task run of its own."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        FlowRunFilter,
        FlowRunFilterId,
        FlowRunFilterParentFlowRunId,
    )

    fleet, _ = first_fleet
    alpha = fleet.reviews["alpha"]
    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[alpha.id]))
        )
        subflows = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(
                parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[alpha.id])
            )
        )
        task_runs = client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[alpha.id]))
        )
    kinds = {(a.key or "").split("-")[1] for a in artifacts}
    assert {"plan", "report", "findings", "outcome"} <= kinds, kinds
    assert subflows == [] and task_runs == [], (
        [r.name for r in subflows],
        [t.name for t in task_runs],
    )


def test_the_workers_runs_leave_their_reports_not_their_workspaces(
    crew_server: CrewServer, first_fleet: tuple[FleetRun, int]
):
    """The reports folder keeps what is read (report, charts); a run's workspace, completed or failed, goes."""
    reports = crew_server.logs.parent / "reports"
    assert len(list(reports.glob("*/report.json"))) >= 2
    assert list(reports.rglob("workspace.duckdb*")) == []


def alert_artifact(review: FlowRun) -> str:
    """What the review's alert artifact says became of its alert."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        ArtifactFilterKey,
    )

    with get_client(sync_client=True) as client:
        (artifact,) = client.read_artifacts(
            artifact_filter=ArtifactFilter(
                flow_run_id=ArtifactFilterFlowRunId(any_=[review.id]),
                key=ArtifactFilterKey(like_="dbcrew-alert-%"),
            )
        )
    return str(artifact.data)


def test_a_second_fleet_run_reports_what_changed_and_alerts_the_new_problems(
    api: str,
    crew_server: CrewServer,
    fleet_pg: EmbeddedPostgres,
    first_fleet: tuple[FleetRun, int],
    webhook: tuple[str, list[dict[str, object]]],
):
    _, alerts_before = first_fleet
    received = webhook[1]
    fleet_pg.psql(FIX_ONE_PLANT_ANOTHER, dbname="alpha")
    fleet = run_fleet("fleet-test")

    alpha = report_of(crew_server, fleet.reviews["alpha"])
    assert alpha.history is not None and alpha.history.previous_run_id is not None
    new = {
        (i.code, i.object) for i in [*alpha.history.new, *alpha.history.regressed] if i.is_problem
    }
    absent = {(i.code, i.object) for i in alpha.history.absent if i.is_problem}
    assert ("table_without_primary_key", "public.notes") in new
    # Fixed once is absent, not yet resolved (dbcrew.roles.report.comparing.RESOLVED_AFTER_ABSENT_RUNS).
    assert ("table_without_primary_key", "public.items") in absent and not new & absent
    assert alpha.history.resolved == [] and fleet.rows["alpha"][3:5] == [str(len(new)), "0"]
    beta = report_of(crew_server, fleet.reviews["beta"])
    assert beta.history is not None and beta.history.persisting
    assert fleet.rows["beta"][3:5] == [
        "0",
        "0",
    ]  # nothing changed there (info findings come and go with the workload)
    assert fleet.rows["gone"][3:5] == ["-", "-"]

    later = received[alerts_before:]
    assert [m["path"] for m in later if m["path"] != "/gone"] == [
        "/alpha"
    ]  # beta has no news; gone fails every time
    (told,) = [m for m in later if m["path"] == "/alpha"]
    body = str(told["message"])
    assert alpha.link and alpha.link in body and "table_without_primary_key on public.notes" in body
    assert "public.items" not in body  # absent is not news
    failures = [m for m in received if m["path"] == "/gone"]
    assert len(failures) == 2 and all(m["type"] == "failure" for m in failures)
    assert BETA_PASSWORD not in json.dumps(received)


def test_a_cli_review_goes_through_the_running_server(
    crew_server: CrewServer,
    fleet_pg: EmbeddedPostgres,
    api: str,
    tmp_path: Path,
    first_fleet: tuple[FleetRun, int],
):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName

    from dbcrew.cli.server import healthy
    from dbcrew.lab.embedded import _free_port

    assert healthy(crew_server.api) and not healthy(f"http://127.0.0.1:{_free_port()}/api")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "dbcrew.cli",
            "review",
            fleet_pg.dsn("alpha"),
            "--window",
            "1",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PREFECT_API_URL": crew_server.api},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads((tmp_path / "report.json").read_text())
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(
                name=FlowRunFilterName(any_=[f"initialize-{report['run_id']}"])
            )
        )
    assert len(runs) == 1  # the run is on the server (and in its UI), not on an ephemeral one

    # The CLI's run lives in the CLI's process, which cancels it when interrupted: no heartbeats (dbcrew/flows/heartbeats.py),
    # whose thread would hold the run's end up to 1 s. A review the worker took from the pool keeps them.
    cli_run = report["link"].rsplit("/", 1)[-1]
    cli_events = poll(
        lambda: (
            (names := flow_run_events(api, cli_run))
            and "prefect.flow-run.Completed" in names
            and names
        ),
        "the CLI run's events on the server",
    )
    assert "prefect.flow-run.heartbeat" not in cli_events, cli_events
    worker_run = next(iter(first_fleet[0].reviews.values())).id
    poll(
        lambda: "prefect.flow-run.heartbeat" in flow_run_events(api, str(worker_run)),
        "a pool review's heartbeat",
    )


def flow_run_events(api: str, run_id: str) -> list[str]:
    """The names of the events the server stored about one flow run."""
    import httpx

    response = httpx.post(
        f"{api}/events/filter",
        json={"filter": {"resource": {"id": [f"prefect.flow-run.{run_id}"]}}, "limit": 50},
        timeout=30,
    )  # the most a page holds
    response.raise_for_status()
    return [event["event"] for event in response.json()["events"]]


def test_a_password_comes_from_a_secret_block_on_the_server(api: str):
    """`password: {secret: NAME}` reads the Prefect Secret block every worker of the pool shares; a missing one
    is a clear target error that names the block, never a traceback or the value."""
    from prefect.blocks.system import Secret

    from dbcrew.errors import TargetError
    from dbcrew.flows.targets import resolve_password
    from dbcrew.inventory import TargetEntry

    Secret(value="s3cret-from-the-server").save("delta-password", overwrite=True)
    entry = TargetEntry.model_validate(
        {
            "name": "delta",
            "url": "postgresql://app@db.example:5432/delta",
            "password": {"secret": "delta-password"},
        }
    )
    assert resolve_password(entry) == "s3cret-from-the-server"
    missing = TargetEntry.model_validate(
        {**entry.model_dump(mode="json"), "password": {"secret": "nobody-saved-this"}}
    )
    with pytest.raises(TargetError, match="no Secret block named 'nobody-saved-this'"):
        resolve_password(missing)


def test_a_run_that_ends_takes_the_next_queued_run_without_waiting_for_the_poll(api: str):
    """The in-process worker asks for scheduled runs as soon as one ends. A worker that polls once, on a queue of
    one run at a time, takes the first of two runs; the second starts only because the first's end asked for
    it (the worker here never polls again)."""
    import anyio
    from prefect.client.orchestration import get_client
    from prefect.deployments.runner import EntrypointType

    from dbcrew.flows.deploy import ensure_pool
    from dbcrew.flows.queues import PoolQueue
    from dbcrew.flows.worker import InProcessWorker
    from tests.e2e.queued_flow import queued_noop

    pool = "next-runs"  # not the crew's pool: its worker must not take these runs
    ensure_pool(pool, max_reviews=1)
    deployment_id = queued_noop.to_deployment(
        name="queued", work_queue_name=PoolQueue.REVIEWS, entrypoint_type=EntrypointType.MODULE_PATH
    ).apply(work_pool_name=pool)
    with get_client(sync_client=True) as client:
        runs = [client.create_flow_run_from_deployment(deployment_id).id for _ in range(2)]

    async def one_poll() -> list[str]:
        async with InProcessWorker(work_pool_name=pool, work_queues=[PoolQueue.REVIEWS]) as worker:
            assert len(await worker.get_and_submit_flow_runs()) == 1, (
                "the queue lets one run at a time through"
            )
            states = [None]
            with anyio.move_on_after(120):
                while not all(s is not None and s.is_final() for s in states):
                    await anyio.sleep(0.5)
                    states = [(await worker.client.read_flow_run(r)).state for r in runs]
        return [s.type.value if s else "NONE" for s in states]

    assert anyio.run(one_poll) == ["COMPLETED", "COMPLETED"]

    # A worker that stops after its one poll waits for the run it took, and that run's end takes no other.
    with get_client(sync_client=True) as client:
        runs = [client.create_flow_run_from_deployment(deployment_id).id for _ in range(2)]

    async def poll_and_stop() -> None:
        async with InProcessWorker(work_pool_name=pool, work_queues=[PoolQueue.REVIEWS]) as worker:
            await worker.get_and_submit_flow_runs()

    anyio.run(poll_and_stop)
    with get_client(sync_client=True) as client:
        assert [client.read_flow_run(r).state.type.value for r in runs] == [
            "COMPLETED",
            "SCHEDULED",
        ]


def test_slots_missed_while_the_server_was_down_collapse_into_one_run_or_are_skipped(api: str):
    """Prefect keeps the runs of slots whose time passed while nothing ran them, and a worker would run them all,
    late and back to back. At start (before its worker polls) `dbcrew server` settles them as each schedule
    group's `missed:` says (the same for each of its targets): the newest runs once (collapse, the default) or
    none does (skip). Runs still ahead stay."""
    from datetime import UTC, datetime, timedelta

    from prefect.client.orchestration import get_client
    from prefect.states import Scheduled

    from dbcrew.flows.deploy import ensure_pool, schedule_deployment
    from dbcrew.flows.schedule_health import settle_missed
    from dbcrew.inventory import Inventory

    pool = "missed-slots"  # no worker polls it: the slots stay missed until settled
    ensure_pool(pool, max_reviews=1)
    entries = [
        {"name": name, "url": "postgresql://nobody@127.0.0.1:1/x", "schedule": "15 3 * * *"}
        for name in ("missed-collapse", "missed-collapse-too", "missed-skip")
    ]
    entries[2]["missed"] = "skip"
    inventory = Inventory.model_validate({"targets": entries})
    started = datetime.now(UTC)
    past: dict[str, list[UUID]] = {}
    ahead: dict[str, UUID] = {}
    with get_client(sync_client=True) as client:
        for group, members in inventory.schedule_groups().items():
            deployment = schedule_deployment(group, members).apply(work_pool_name=pool)
            past[group.name] = [
                client.create_flow_run_from_deployment(
                    deployment, state=Scheduled(scheduled_time=started - timedelta(hours=hours))
                ).id
                for hours in (3, 2, 1)
            ]
            ahead[group.name] = client.create_flow_run_from_deployment(
                deployment, state=Scheduled(scheduled_time=started + timedelta(hours=1))
            ).id

    settled = settle_missed(inventory, started)

    def types(runs: list[UUID]) -> list[str]:
        with get_client(sync_client=True) as client:
            return [client.read_flow_run(run).state_type.value for run in runs]

    assert sorted(past) == ["health-15-3-x-x-x", "health-15-3-x-x-x-skip"]
    assert types(past["health-15-3-x-x-x"]) == ["CANCELLED", "CANCELLED", "SCHEDULED"]
    assert types(past["health-15-3-x-x-x-skip"]) == ["CANCELLED", "CANCELLED", "CANCELLED"]
    assert types(list(ahead.values())) == ["SCHEDULED", "SCHEDULED"]
    kept = settled[0].kept
    assert kept is not None and kept.id == past["health-15-3-x-x-x"][-1]
    assert settled[0].describe() == (
        f"health-15-3-x-x-x (2 targets): 3 missed slots, the latest runs now ({kept.name})"
    )
    assert settled[1].describe() == "health-15-3-x-x-x-skip (1 targets): 3 missed slots, skipped"
