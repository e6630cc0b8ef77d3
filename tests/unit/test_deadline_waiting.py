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


def register(monkeypatch: pytest.MonkeyPatch, name: str, like: str, fn: object) -> None:
    """A test operator `name`, of `like`'s role (a painter's can wait, a check's cannot)."""
    monkeypatch.setitem(
        REGISTRY,
        name,
        replace(get(like), name=name, fn=fn, params_model=NoParams, needs=(), prepare=None),
    )


def run(tmp_path: Path, pool: ThreadPoolExecutor, deadline: Deadline) -> ExecutionState:
    """A chart task and an answer task, executed under `deadline` on `pool`."""
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
        def start(self, specs: list[TaskSpec]) -> list[Future[TaskOutcome]]:
            return [pool.submit(perform, spec, ctx, FaultInjector([], target), 0) for spec in specs]

    strategy = Strategy(
        team=[
            AgentSpec(name="painter", role=Role.PAINTER, goal="draw"),
            AgentSpec(name="analyst", role=get("check_bloat").role, goal="answer"),
        ],
        tasks=[
            TaskSpec(id="draw", agent="painter", operator="test_draw"),
            TaskSpec(id="answer", agent="analyst", operator="test_answer"),
        ],
    )
    return execute(strategy, ExecutionState(), PoolRunner(), None, deadline).state


def test_a_chart_still_drawing_when_the_reserve_begins_is_left_out_and_the_answer_is_kept(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    released = threading.Event()

    def draw_forever(_ctx: OperatorContext, _params: NoParams) -> Observation:
        released.wait(timeout=600)
        return Observation(summary="drawn")

    def answer(_ctx: OperatorContext, _params: NoParams) -> Observation:
        return Observation(summary="the cause")

    register(monkeypatch, "test_draw", "paint_table_activity", draw_forever)
    register(monkeypatch, "test_answer", "check_bloat", answer)
    pool = ThreadPoolExecutor(2)
    try:
        state = run(
            tmp_path, pool, Deadline.after(datetime.now(UTC), seconds=1.0, reserve_seconds=0.5)
        )
        assert not released.is_set()  # returned while the chart was still drawing
        answered, drawn = state.outcomes["answer"], state.outcomes["draw"]
        assert answered.status is TaskStatus.DONE and answered.observation.summary == "the cause"
        assert drawn.status is TaskStatus.SKIPPED
        assert drawn.cause is not None and drawn.cause.kind is SkipKind.DEADLINE
        assert "left unfinished, not in the report" in drawn.reason
    finally:
        released.set()
        pool.shutdown(wait=True)


def test_a_chart_starts_only_once_the_answer_is_done(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Both are ready at once; the answer waits (up to 2 s) for the chart to start, which only a chart started
    beside it would do: the chart records that the answer was already done when it began."""
    chart_began, answer_done = threading.Event(), threading.Event()
    seen: list[bool] = []

    def draw(_ctx: OperatorContext, _params: NoParams) -> Observation:
        seen.append(answer_done.is_set())
        chart_began.set()
        return Observation(summary="drawn")

    def answer(_ctx: OperatorContext, _params: NoParams) -> Observation:
        chart_began.wait(timeout=2)
        answer_done.set()
        return Observation(summary="the cause")

    register(monkeypatch, "test_draw", "paint_table_activity", draw)
    register(monkeypatch, "test_answer", "check_bloat", answer)
    with ThreadPoolExecutor(2) as pool:
        state = run(
            tmp_path, pool, Deadline.after(datetime.now(UTC), seconds=3600, reserve_seconds=15)
        )
    assert state.outcomes["draw"].status is TaskStatus.DONE
    assert seen == [True], "the chart began while the answer still ran"
