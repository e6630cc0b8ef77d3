"""The crew's worker: it takes flow runs from the work pool and runs each in a thread of its own process.

A process worker starts a new Python for every flow run: on 2 cores that costs ~2.5 s of CPU
(importing Prefect, DuckDB, the crew) and as much wall time before a review starts, more
than a warm review itself. This worker imports the crew once and runs every flow run it takes in
a thread. Each review is still its own flow run of the pool: the server schedules it, the pool's
queues and limits apply, the UI shows it, and workers on several machines share the pool
(`prefect worker start --pool dbcrew` on each finds this worker type through the
`prefect.collections` entry point of the dbcrew package). It runs only deployments whose flow is installed
(module-path entrypoints without pull steps, which is what `dbcrew server` deploys): pulling code
into a long-lived shared process would change its working directory and imports under other runs.

A worker that is stopped (SIGTERM or Ctrl-C: `dbcrew server` stopping, a service manager) used to
abandon its run threads and exit under them: a review then failed on "cannot schedule new futures
after shutdown" and alerted its target's URLs of a failure nobody had. Now the stop asks the runs
to wind down (dbcrew.stopping, as a CLI review's Ctrl-C does) and waits for them, up to
WIND_DOWN_SECONDS; a flow that ends because of it returns `planned_stop()`: Cancelled, no alert.
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import socket
import threading
from typing import Any, cast

import anyio
import anyio.abc
from prefect.client.orchestration import PrefectClient
from prefect.client.schemas.objects import FlowRun, State
from prefect.flows import Flow
from prefect.states import Cancelled
from prefect.utilities.importtools import import_object
from prefect.workers.base import BaseJobConfiguration, BaseVariables, BaseWorker, BaseWorkerResult

from dbcrew import stopping
from dbcrew.flows.kept_reads import KeptReads
from dbcrew.flows.queues import PoolQueue
from dbcrew.flows.worker_engine import RunsClient, run_flow_run

WORKER_TYPE = "dbcrew-in-process"
WORKER_STOPPED = "its worker stopped (a planned stop)"
# How long a stopping worker waits for its runs to wind down: below `dbcrew server`'s 15 s before SIGKILL.
WIND_DOWN_SECONDS = 10.0


def planned_stop() -> State[Any] | None:
    """The state a flow run ends in when its process was asked to stop (its worker is stopping): Cancelled,
    which no one is alerted of; None when nothing asked. A flow returns it instead of its result or its error:
    what a stop cut short is neither a failure nor news."""
    why = stopping.requested()
    return Cancelled(message=why) if why else None


def run_identifier(run_id: object) -> str:
    """The flow run's infrastructure id: host, worker PID and run. Not a bare PID: cancelling one run must not
    signal the worker; the host and PID let a supervisor on that host tell a run whose worker died (dbcrew/flows/supervision.py)."""
    return f"{socket.gethostname()}:{os.getpid()}:{run_id}"


def worker_of(identifier: str | None) -> tuple[str, int] | None:
    """(host, worker PID) of a run_identifier; None for another worker type's id."""
    host, _, rest = (identifier or "").partition(":")
    pid, _, _run = rest.partition(":")
    return (host, int(pid)) if host and pid.isdigit() else None


class InProcessJobConfiguration(BaseJobConfiguration):
    """A flow run's job as this worker runs it: in its own process, whose environment the run already has.

    Prefect's base configuration renders every Prefect setting into environment variables for each
    flow run (`_base_environment`), for a new process to inherit: about 15 ms of CPU a run (and
    the largest single cost of the worker's own in a profile of a fleet), for an environment no
    process here is started with."""

    @classmethod
    def _base_environment(cls) -> dict[str, str]:
        return {}


class InProcessResult(BaseWorkerResult):
    """What the worker reports of one flow run (exit 0: the engine already set the run's final state)."""


class InProcessWorker(BaseWorker[InProcessJobConfiguration, BaseVariables, InProcessResult]):
    type = WORKER_TYPE
    job_configuration = InProcessJobConfiguration
    job_configuration_variables = BaseVariables
    _description = (
        "Runs each flow run in a thread of the worker's own process: the crew is imported once, "
        "every review is still a flow run of the pool."
    )
    _display_name = "dbcrew in-process"
    _shares: Any = (
        None  # dbcrew.flows.watching.WatchShares, while this worker serves the watch queue
    )
    _runs_client: RunsClient | None = None  # the API client of every flow run it runs, while set up

    async def setup(self) -> None:
        """Set up, then start this worker's share of the watching when it serves the `watch` queue (every queue
        of the pool unless `--work-queue` names others): each worker watches a share of the watched targets.
        The worker's client keeps its deployment and flow reads a while (dbcrew/flows/kept_reads.py)."""
        await super().setup()
        self._runs_client = RunsClient().__enter__()
        self._stop_on_terminate()
        self._client = cast(PrefectClient, KeptReads(self.client))
        if not self._work_queues or PoolQueue.WATCH in self._work_queues:
            from dbcrew.flows.watching import (
                WatchShares,
            )  # imports the watcher: only a worker that watches pays for it

            self._shares = WatchShares(self.name)
        self._freeze_imports()
        if self._shares is not None:
            self._shares.start()

    def _freeze_imports(self) -> None:
        """Leave the crew's imported modules out of every later garbage collection (`gc.freeze`).

        A worker runs reviews and watches for days in one process holding about 200,000 objects of
        Prefect's and the crew's modules, and each full collection walked all of them (100-170 ms on a
        2-core host) for garbage that is never there: a review run in process spent a tenth of its CPU so.
        The flows are imported first so their modules are among the frozen; what is garbage now is
        collected before, so nothing frozen is garbage."""
        from dbcrew.flows import fleet, incident_diagnosis, review  # noqa: F401

        gc.collect()
        gc.freeze()

    def _stop_on_terminate(self) -> None:
        """A SIGTERM cancels the task that runs this worker, in its event loop: the stop then winds down as a
        cancellation does (`teardown`, `_wind_down`). Prefect's `worker start` turns a SIGTERM into a SIGINT to
        itself, whose KeyboardInterrupt surfaces wherever the main thread is at that moment; where code caught
        it there, the worker never stopped (a py-spy dump of one, minutes after "Received SIGTERM": its event
        loop idle, its watch share waiting). Only a worker whose loop runs in the main thread (the CLI's) can
        take the signal; one started elsewhere keeps Prefect's handling."""
        task = asyncio.current_task()
        if task is None or threading.current_thread() is not threading.main_thread():
            return
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)

    async def teardown(self, *exc_info: Any) -> None:
        """Stop the watching share first (its leases released at once, its runs Cancelled), then tear down."""
        if self._shares is not None:
            await anyio.to_thread.run_sync(self._shares.stop, WIND_DOWN_SECONDS)
            self._shares = None
        # Prefect's teardown waits for the runs this worker started, which use the runs' client.
        await super().teardown(*exc_info)
        if self._runs_client is not None:
            self._runs_client.__exit__(*exc_info)
            self._runs_client = None

    async def run(
        self,
        flow_run: FlowRun,
        configuration: InProcessJobConfiguration,
        task_status: anyio.abc.TaskStatus[Any] | None = None,
    ) -> InProcessResult:
        flow = await self.installed_flow(flow_run)
        client = self._runs_client
        if client is None:
            raise RuntimeError("the worker runs flow runs only while it is set up")
        identifier = run_identifier(flow_run.id)
        if task_status is not None:
            task_status.started(identifier)
        ended = threading.Event()

        def execute() -> Any:
            try:
                # no events subscription a run, the worker's one client (worker_engine.py)
                return run_flow_run(flow, flow_run, client)
            finally:
                ended.set()

        try:
            state = await anyio.to_thread.run_sync(execute, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            await self._wind_down(ended)
            raise
        self._logger.debug("flow run %s ended %s", flow_run.id, getattr(state, "type", state))
        if self._runs_task_group is not None:
            self._runs_task_group.start_soon(self._take_next_runs)
        return InProcessResult(identifier=identifier, status_code=0)

    async def _propose_submitting_state(self, flow_run: FlowRun) -> None:
        """No Submitting state between Pending and Running: Prefect's worker proposes it while a run's
        infrastructure starts, and this worker starts none (the run's thread is running it a moment later).
        One state change a review less, the most expensive kind of request the Prefect server answers
        (its orchestration rules, an event): 1 of the 4 a fleet review made."""

    async def _wind_down(self, ended: threading.Event) -> None:
        """The worker is stopping: ask this process's runs to wind down and wait (shielded from the stop's own
        cancellation) until this one has ended, or WIND_DOWN_SECONDS have passed."""
        stopping.request(WORKER_STOPPED)
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(ended.wait, WIND_DOWN_SECONDS)

    async def _take_next_runs(self) -> None:
        """Ask for scheduled runs as soon as one ends, instead of at the next poll.

        A run's end frees its slot in the pool's queue, and a fleet waits its turn there: with the
        poll interval of `dbcrew server` (5 s) each review would wait 2.5 s on average for a slot
        already free. It runs once the finished run's own worker slot is released (the caller does
        that before it next yields). Runs that several ends would take twice are claimed once:
        the worker skips the ones it is submitting, and the server lets one proposal of Pending
        through. A failure is left to the regular poll, which meets and logs it the same way. A
        worker that is stopping takes nothing more: its teardown waits for the runs it started.
        """
        if not self.is_setup:
            return
        try:
            await self.get_and_submit_flow_runs()
        except Exception as error:  # noqa: BLE001 - the task group would end the worker with it
            self._logger.warning(
                "asking for the next flow runs after one ended failed (the next poll retries): %s",
                error,
            )

    async def installed_flow(self, flow_run: FlowRun) -> Flow[..., Any]:
        """The deployment's flow, imported from this process's installed packages."""
        if flow_run.deployment_id is None:
            raise ValueError(
                f"flow run {flow_run.id} has no deployment: this worker runs deployments only"
            )
        deployment = await self.client.read_deployment(flow_run.deployment_id)
        entrypoint = deployment.entrypoint or ""
        if ":" in entrypoint or not entrypoint or deployment.pull_steps:
            raise ValueError(
                f"deployment {deployment.name!r} ({entrypoint or 'no entrypoint'}) needs its code pulled; "
                f"the {WORKER_TYPE} worker runs installed flows (module-path entrypoints) only"
            )
        flow = import_object(entrypoint)
        if not isinstance(flow, Flow):
            raise ValueError(f"{entrypoint} is not a flow")
        return flow
