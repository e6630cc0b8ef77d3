"""Operators as Prefect tasks: one task run per plan task, submitted to the flow's bounded thread pool."""

from __future__ import annotations

from dataclasses import dataclass

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.futures import PrefectFuture, as_completed

from dbcrew.models import TaskSpec
from operators.registry import OperatorContext
from roles.faults import FaultInjector
from roles.worker import TaskOutcome, perform


@dataclass
class Bundle:
    """What every task of one execution shares; passed by reference, never cached or persisted."""

    ctx: OperatorContext
    injector: FaultInjector
    retries: int


# Live metrics must never come from a cache; the worker does its own retries (self-correction).
@task(cache_policy=NO_CACHE, task_run_name="{spec.id}", persist_result=False)
def run_operator(spec: TaskSpec, bundle: Bundle) -> TaskOutcome:
    return perform(spec, bundle.ctx, bundle.injector, bundle.retries)


class PrefectRunner:
    def __init__(self, bundle: Bundle):
        self._bundle = bundle

    def start(self, spec: TaskSpec) -> PrefectFuture[TaskOutcome]:
        return run_operator.submit(spec, self._bundle)

    def wait_first(self, handles: list[PrefectFuture[TaskOutcome]]) -> PrefectFuture[TaskOutcome]:
        return next(iter(as_completed(handles)))

    def outcome(self, handle: PrefectFuture[TaskOutcome]) -> TaskOutcome:
        return handle.result()
