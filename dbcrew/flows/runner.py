"""Operators as Prefect tasks: one task run per batch of plan tasks that became ready together.

Each task run is Prefect work on both sides (the engine's states and events in the worker, their
ingestion in the server): measured at ~32 task runs per health review, it was most of Prefect's
share of a review. So the operators that `execute` starts at one moment share one task run, named
after them; inside it each operator runs on the execution's thread pool, concurrently, and hands
its outcome back through its own future as soon as it ends, so the monitor still sees one outcome
per plan task, when it happens, and a dependent starts as soon as what it needs is done.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.futures import PrefectFuture

from dbcrew.models import TaskSpec
from dbcrew.operators.registry import OperatorContext
from dbcrew.roles.crew.execution import FutureRunner
from dbcrew.roles.crew.faults import FaultInjector
from dbcrew.roles.crew.worker import TaskOutcome, perform


@dataclass
class Bundle:
    """What every task of one execution shares; passed by reference, never cached or persisted."""

    ctx: OperatorContext
    injector: FaultInjector
    retries: int
    pool: ThreadPoolExecutor


class Batch:
    """Plan tasks started together, with one future per task for the monitor.

    A plain object (not a dataclass or a model), so Prefect neither walks nor records it as a parameter.
    Each task is claimed once: by `run`, which starts its operator, or by `abandon`, which fails the
    tasks of a task run that ended before starting them, so no future is left waiting forever.
    """

    def __init__(self, specs: list[TaskSpec], bundle: Bundle):
        self.specs = specs
        self.bundle = bundle
        self.handles: list[Future[TaskOutcome]] = [Future() for _ in specs]
        self._claimed: set[int] = set()
        self._lock = threading.Lock()

    def _claim(self, index: int) -> bool:
        with self._lock:
            if index in self._claimed:
                return False
            self._claimed.add(index)
            return True

    def run(self) -> list[TaskOutcome]:
        for index, (spec, handle) in enumerate(zip(self.specs, self.handles, strict=True)):
            if self._claim(index):
                b = self.bundle
                b.pool.submit(perform, spec, b.ctx, b.injector, b.retries).add_done_callback(
                    partial(_settle, handle)
                )
        return [handle.result() for handle in self.handles]

    def abandon(self, _: PrefectFuture[list[TaskOutcome]]) -> None:
        for index, handle in enumerate(self.handles):
            if self._claim(index):
                handle.set_exception(
                    RuntimeError(f"the task run of {self.specs[index].id} ended before starting it")
                )


def _settle(handle: Future[TaskOutcome], done: Future[TaskOutcome]) -> None:
    error = done.exception()
    if error is None:
        handle.set_result(done.result())
    else:
        handle.set_exception(error)


# Live metrics must never come from a cache; the worker does its own retries (self-correction).
@task(cache_policy=NO_CACHE, task_run_name="{operators}", persist_result=False)
def run_operators(operators: str, batch: Batch) -> list[TaskOutcome]:
    """The operators of `batch`, concurrently; `operators` names them for the UI."""
    return batch.run()


class PrefectRunner(FutureRunner):
    def __init__(self, bundle: Bundle):
        self._bundle = bundle
        self.task_runs: list[PrefectFuture[list[TaskOutcome]]] = []

    def start(self, specs: list[TaskSpec]) -> list[Future[TaskOutcome]]:
        batch = Batch(specs, self._bundle)
        future = run_operators.submit(", ".join(spec.id for spec in specs), batch)
        future.add_done_callback(batch.abandon)
        self.task_runs.append(future)
        return batch.handles
