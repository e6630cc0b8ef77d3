"""The in-process worker's job for a flow run: the run executes in the worker's own process, so no
environment is rendered for a process that is never started."""

from __future__ import annotations

from uuid import uuid4

from prefect.client.schemas.objects import FlowRun

from dbcrew.flows.worker import InProcessJobConfiguration


def test_a_flow_runs_job_carries_its_run_id_and_no_copy_of_the_prefect_settings(monkeypatch):
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:4200/api")
    run = FlowRun(flow_id=uuid4(), name="alpha")
    job = InProcessJobConfiguration()
    job.prepare_for_flow_run(run)
    assert job.env["PREFECT__FLOW_RUN_ID"] == str(run.id)
    assert "PREFECT_API_URL" not in job.env and all(k.startswith("PREFECT__") for k in job.env), (
        job.env
    )
    assert job.name == "alpha"
