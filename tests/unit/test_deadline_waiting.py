"""The run stops waiting for work that can wait once its deadline's reserve begins (dbcrew/roles/crew/execution.py).

On a saturated host a chart started in good time took 46 s of wall for a fraction of a CPU-second and held the
report past its deadline. Here a chart that cannot finish (it waits on an event the test sets only afterwards)
shows, by construction on any host, that the run returns without it, says so, and keeps what the answer needs.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dbcrew.deadline import Deadline
from dbcrew.models import AgentSpec, Role, Strategy, TaskSpec
from dbcrew.models.report import SkipKind
from dbcrew.operators.registry import REGISTRY, NoParams, Observation, OperatorContext, get
from dbcrew.roles.crew.execution import ExecutionState, FutureRunner, execute
from dbcrew.roles.crew.faults import FaultInjector
from dbcrew.roles.crew.worker import TaskOutcome, perform
from dbcrew.settings.run import Settings
from dbcrew.targets import parse_target
from dbcrew.vocabulary import TaskStatus
from dbcrew.workspace import Workspace


def test_a_chart_still_drawing_when_the_reserve_begins_is_left_out_and_the_answer_is_kept(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    released = threading.Event()

    def draw_forever(_ctx: OperatorContext, _params: NoParams) -> Observation:
        released.wait(timeout=600)
        return Observation(summary="drawn")

    def answer(_ctx: OperatorContext, _params: NoParams) -> Observation:
        return Observation(summary="the cause")

    painter = get("paint_table_activity")
    monkeypatch.setitem(
        REGISTRY,
        "slow_draw",
        replace(
            painter,
            name="slow_draw",
            fn=draw_forever,
            params_model=NoParams,
            needs=(),
            prepare=None,
        ),
    )
    monkeypatch.setitem(
        REGISTRY,
        "quick_answer",
        replace(
            get("check_bloat"),
            name="quick_answer",
            fn=answer,
            params_model=NoParams,
            needs=(),
            prepare=None,
        ),
    )
    target = parse_target(
        "postgresql://u@127.0.0.1:1/db"
    )  # never reached: neither operator reads it
    ctx = OperatorContext(
        target=target,
        workspace=Workspace(tmp_path / "w.duckdb"),
        settings=Settings(),
        brief=None,
        run_dir=tmp_path,
    )

    class PoolRunner(FutureRunner):
        def __init__(self, pool: ThreadPoolExecutor) -> None:
            self.pool = pool

        def start(self, specs: list[TaskSpec]) -> list[Future[TaskOutcome]]:
            return [
                self.pool.submit(perform, spec, ctx, FaultInjector([], target), 0) for spec in specs
            ]

    strategy = Strategy(
        team=[
            AgentSpec(name="painter", role=Role.PAINTER, goal="draw"),
            AgentSpec(name="analyst", role=get("check_bloat").role, goal="answer"),
        ],
        tasks=[
            TaskSpec(id="draw", agent="painter", operator="slow_draw"),
            TaskSpec(id="answer", agent="analyst", operator="quick_answer"),
        ],
    )
    deadline = Deadline.after(datetime.now(UTC), seconds=1.0, reserve_seconds=0.5)
    pool = ThreadPoolExecutor(2)
    try:
        result = execute(strategy, ExecutionState(), PoolRunner(pool), None, deadline)
        assert not released.is_set()  # returned while the chart was still drawing
        answered, drawn = result.state.outcomes["answer"], result.state.outcomes["draw"]
        assert answered.status is TaskStatus.DONE and answered.observation.summary == "the cause"
        assert drawn.status is TaskStatus.SKIPPED
        assert drawn.cause is not None and drawn.cause.kind is SkipKind.DEADLINE
        assert "left unfinished, not in the report" in drawn.reason
    finally:
        released.set()
        pool.shutdown(wait=True)
