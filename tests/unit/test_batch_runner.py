"""A batch of operators that shares one Prefect task run still answers for each plan task on its own."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from dbcrew.flows.runner import Batch, Bundle
from dbcrew.models import TaskSpec
from dbcrew.operators.registry import OperatorContext
from dbcrew.roles.crew.execution import FutureRunner
from dbcrew.roles.crew.faults import FaultInjector
from dbcrew.settings.run import Settings
from dbcrew.targets import parse_target
from dbcrew.workspace import Workspace


def test_a_task_run_that_ends_before_starting_its_operators_fails_each_task_instead_of_leaving_it_waiting(
    tmp_path: Path,
):
    target = parse_target("postgresql://u@127.0.0.1:1/db")
    specs = [
        TaskSpec(id=name, agent="collector", operator=name)
        for name in ("collect_sessions", "collect_locks")
    ]
    with ThreadPoolExecutor(max_workers=2) as pool:
        bundle = Bundle(
            ctx=OperatorContext(
                target=target,
                workspace=Workspace(tmp_path / "w.duckdb"),
                settings=Settings(),
                brief=None,
                run_dir=tmp_path,
            ),
            injector=FaultInjector([], target),
            retries=0,
            pool=pool,
        )
        batch = Batch(specs, bundle)
        batch.abandon(None)  # type: ignore[arg-type]  # the task run's end, before its body ran
        assert all(handle.done() for handle in batch.handles)
        runner = FutureRunner()
        assert runner.wait_first(batch.handles) is batch.handles[0]
        for handle, spec in zip(batch.handles, specs, strict=True):
            with pytest.raises(
                RuntimeError, match=f"task run of {spec.id} ended before starting it"
            ):
                runner.outcome(handle)
        with pytest.raises(
            RuntimeError
        ):  # a late body starts nothing: every task was already answered for
            batch.run()
