"""The engine the in-process worker runs a flow run with: Prefect's, without a per-run events subscription, with
no question about result storage to the server, and on the worker's one API client.

For every flow run of a deployment, Prefect 3.8's engine starts a thread with an event loop of its own that
opens a websocket to the server's events stream, makes a new API client (each loading certifi's CA bundle)
and reads the flow run once more, all to notice that someone outside suspended the run
(`observe_flow_run_suspension`); the thread then wakes every 0.2 s until the run ends. Measured on `bench
fleet` before this change: 30 ms of the worker's CPU and 28 ms of the server's a review, besides the thread's
wake-ups, paid by every review of a fleet. No dbcrew flow suspends, and a review suspended from outside
could not be resumed where it stood (Prefect runs a resumed flow again from its start): a review is
cancelled, never suspended, and cancelling does not go through this observer. So the worker's runs keep
what a suspension from inside the run needs (the run's request registered, as Prefect's engine does) and
open no subscription. Async and generator flows, none of the crew's, run on Prefect's own engine.

Results: what a crew's flow run yields is posted as artifacts and recorded in the store (a review's report,
a fleet's summary); no one reads it back from Prefect, which by default persists nothing either. But a run of
a flow that names no result storage asked the server for its default storage three times (twice for the
storage, once for whether to persist): three requests a review. The worker's runs name Prefect's local
default storage (PREFECT_RESULTS_LOCAL_STORAGE_PATH, read when the worker runs the flow) and persist no
result; only a failed run's exception is written there, as it was while the server named no default storage.

The client: Prefect's engine made a new API client for each flow run in a thread of its own (each loading
certifi's CA bundle, 14-18 ms of CPU, and opening its own connection to the server). The worker's runs share
one (`RunsClient`), as the task threads of one flow run share their run's: each run's thread is given it
through Prefect's client context (`RunClientContext`), which the engine and every `get_client(sync_client=True)`
of the run read. Prefect counts a client's holders without a lock; this one is held and let go from many
threads at once, so it counts under one (a lost count could close it under a running review).

A run that already has its name (the fleet names each review by its target) is not renamed to it again.
"""

from __future__ import annotations

import threading
from collections.abc import Generator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

from prefect._flow_run_suspension import (
    FlowRunSuspensionRequest,
    register_flow_run_suspension_request,
)
from prefect.client.orchestration import SyncPrefectClient
from prefect.client.schemas.objects import FlowRun, State
from prefect.context import ContextModel, SyncClientContext
from prefect.exceptions import PrefectException
from prefect.flow_engine import FlowRunEngine, run_flow
from prefect.flows import Flow
from prefect.settings import (
    PREFECT_API_AUTH_STRING,
    PREFECT_API_KEY,
    PREFECT_API_URL,
    PREFECT_RESULTS_LOCAL_STORAGE_PATH,
)
from prefect.utilities.callables import get_call_parameters, parameters_to_args_kwargs


class WorkerFlowRunEngine(FlowRunEngine[Any, Any]):
    """Prefect's sync flow-run engine whose run registers its suspension request and observes no events, and is
    not renamed when it already has the name its flow gives it."""

    def begin_run(self) -> State[Any]:
        self._flow_run_name_set = self._flow_run_name_set or self.named_already()
        return super().begin_run()

    def named_already(self) -> bool:
        """Whether the run already has the name its flow's `flow_run_name` gives it: the fleet, the schedules'
        slots and the watcher start each review named by its target (dbcrew/flows/starting.py), and the
        engine's rename to the same name was a request a review. A run started otherwise (the UI's form) has a
        generated name and is renamed as before; parameters that do not validate are left to the engine, which
        says so in the run's state."""
        template = self.flow.flow_run_name
        if self.flow_run is None or not isinstance(template, str):
            return False
        try:
            parameters = self.flow.validate_parameters(self.parameters or {})
            return template.format(**parameters) == self.flow_run.name
        except (PrefectException, ValueError, LookupError, AttributeError):
            return False

    @contextmanager
    def setup_flow_run_suspension_request(
        self,
    ) -> Generator[FlowRunSuspensionRequest, None, None]:
        if not self.flow_run:
            raise ValueError("Flow run not set")
        request = self._get_flow_run_suspension_request()
        with register_flow_run_suspension_request(self.flow_run.id, request):
            request.raise_if_requested()
            yield request


class RunsClient(SyncPrefectClient):
    """The worker's API client for all its flow runs, held and let go from their threads at once: its count of
    holders is kept under a lock. Made like `get_client(sync_client=True)` makes one for the current settings."""

    def __init__(self) -> None:
        super().__init__(
            PREFECT_API_URL.value(),
            auth_string=PREFECT_API_AUTH_STRING.value(),
            api_key=PREFECT_API_KEY.value(),
        )
        self._holders = threading.Lock()

    def __enter__(self) -> RunsClient:
        with self._holders:
            super().__enter__()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        with self._holders:
            super().__exit__(*exc_info)


class RunClientContext(SyncClientContext):
    """One run's client context, holding the worker's `RunsClient`: set for the run's thread, it neither makes
    nor closes a client (the worker holds it for its lifetime)."""

    def __init__(self, client: SyncPrefectClient) -> None:
        ContextModel.__init__(self, client=client)

    def __enter__(self) -> RunClientContext:
        ContextModel.__enter__(self)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        ContextModel.__exit__(self, *exc_info)


@cache
def keeping_no_result(flow: Flow[..., Any], storage: Path) -> Flow[..., Any]:
    """`flow` with no result persisted and `storage` named as its result storage (the module's docstring says
    why); made once per flow and storage (a flow's copy builds its parameters' schema again)."""
    return flow.with_options(persist_result=False, result_storage=storage)


def run_flow_run(
    flow: Flow[..., Any], flow_run: FlowRun, client: SyncPrefectClient
) -> State[Any] | Any:
    """Run `flow_run` of `flow` in this thread to its final state, which is returned (as Prefect's
    `run_flow(..., return_type="state")` does), keeping no result in Prefect, on `client` (the worker's)."""
    flow = keeping_no_result(flow, Path(PREFECT_RESULTS_LOCAL_STORAGE_PATH.value()))
    with RunClientContext(client):
        return _run(flow, flow_run)


def _run(flow: Flow[..., Any], flow_run: FlowRun) -> State[Any] | Any:
    if flow.isasync or flow.isgenerator:
        return run_flow(flow, flow_run=flow_run, return_type="state")
    args, kwargs = parameters_to_args_kwargs(flow.fn, flow_run.parameters)
    engine = WorkerFlowRunEngine(
        flow=flow, flow_run=flow_run, parameters=get_call_parameters(flow.fn, args, kwargs)
    )
    with engine.start():
        while engine.is_running():
            with engine.run_context():
                engine.call_flow_fn()
    return engine.state
