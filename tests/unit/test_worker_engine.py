"""The engine the in-process worker runs its flow runs with (dbcrew/flows/worker_engine.py): no events
subscription a run, no question about result storage to the server, the worker's one client. Checked without a
server: what Prefect's own engine would have asked it is made to fail the test."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from uuid import uuid4

import pytest
from prefect import get_client
from prefect._flow_run_suspension import mark_flow_run_suspension_requested
from prefect.client.schemas.objects import FlowRun
from prefect.context import SyncClientContext
from prefect.filesystems import LocalFileSystem
from prefect.flow_engine import FlowRunEngine
from prefect.results import get_result_store
from prefect.settings import PREFECT_API_URL, temporary_settings
from prefect.states import Suspended

from dbcrew.flows.targets import review_target
from dbcrew.flows.worker_engine import (
    RunClientContext,
    RunsClient,
    WorkerFlowRunEngine,
    keeping_no_result,
)
from tests.e2e.queued_flow import queued_noop


@pytest.fixture()
def observers(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The flow runs Prefect's per-run suspension observer was started for (none is: it is recorded only)."""
    started: list[object] = []

    @contextmanager
    def observe(flow_run_id, request, polling_interval=10):
        started.append(flow_run_id)
        yield

    monkeypatch.setattr("prefect.flow_engine.observe_flow_run_suspension", observe)
    return started


def a_deployment_run() -> FlowRun:
    return FlowRun(flow_id=uuid4(), deployment_id=uuid4(), name="db01")


def test_a_run_of_the_worker_registers_its_suspension_request_and_observes_no_events(observers):
    run = a_deployment_run()
    engine = WorkerFlowRunEngine(flow=queued_noop, flow_run=run)
    with engine.setup_flow_run_suspension_request() as request:
        assert mark_flow_run_suspension_requested(run.id, Suspended()), (
            "a suspension from inside the run must still reach it"
        )
        assert request.is_requested()
    assert observers == [], "an events subscription was opened for the run"
    assert not mark_flow_run_suspension_requested(run.id, Suspended()), (
        "the request outlived the run"
    )

    # Prefect's own engine does open one for a deployment's run: what the worker's engine leaves out.
    with FlowRunEngine(flow=queued_noop, flow_run=run).setup_flow_run_suspension_request():
        pass
    assert observers == [run.id]


def test_a_flow_of_the_worker_names_its_result_storage_and_persists_no_result(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    def asked(*_: object) -> None:
        raise AssertionError("the server was asked for its default result storage")

    monkeypatch.setattr("prefect.results._read_server_default_result_storage_block_id", asked)
    flow = keeping_no_result(review_target, tmp_path)
    assert flow.persist_result is False, "persisting or not would be asked of the server"
    assert flow.name == review_target.name and flow.flow_run_name == review_target.flow_run_name
    store = get_result_store().update_for_flow(flow, _sync=True)
    assert isinstance(store.result_storage, LocalFileSystem)
    assert Path(store.result_storage.basepath) == tmp_path
    assert keeping_no_result(review_target, tmp_path) is flow, "made once per flow and storage"

    with pytest.raises(AssertionError, match="default result storage"):
        get_result_store().update_for_flow(review_target, _sync=True)


def test_the_runs_of_a_worker_share_its_client_and_none_closes_it():
    """Each run's thread sees the worker's client as its own (the engine and get_client read it there); runs
    holding and letting go of it from many threads at once leave it open for the next run."""
    import threading

    with temporary_settings(updates={PREFECT_API_URL: "http://127.0.0.1:9/api"}):
        shared = RunsClient().__enter__()
    seen: list[object] = []

    def run() -> None:
        with RunClientContext(shared):
            with (
                SyncClientContext.get_or_create() as engine_context
            ):  # as the engine takes its client
                seen.append(engine_context.client)
            for _ in range(2000):
                with get_client(sync_client=True) as client:  # as Block.load or run_deployment do
                    if client is not shared:
                        seen.append(client)
        assert SyncClientContext.get() is None, "the run's context outlived it"

    threads = [threading.Thread(target=run) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == [shared] * 8
    assert not shared._closed, "the runs closed the worker's client"
    shared.__exit__(None, None, None)
    assert shared._closed


def test_a_run_already_named_as_its_flow_names_it_is_not_renamed_and_another_is():
    def engine(name: str, target: object) -> WorkerFlowRunEngine:
        run = FlowRun(flow_id=uuid4(), deployment_id=uuid4(), name=name)
        return WorkerFlowRunEngine(
            flow=review_target, flow_run=run, parameters={"request": {"target": target}}
        )

    assert engine("db01", "db01").named_already(), "the fleet's review, named by its target"
    assert not engine("fuzzy-cat", "db01").named_already(), "a run of the UI's form"
    assert not engine("db01", ["not", "a", "name"]).named_already(), (
        "left to the engine's validation"
    )
