"""Operators' preparations run off the critical path when a plan starts (dbcrew/roles/crew/preparing.py)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from dbcrew.models import TaskSpec
from dbcrew.operators.figures import warm_up
from dbcrew.operators.registry import REGISTRY, get
from dbcrew.roles.crew.preparing import preparations, start_preparing


def task(operator: str, n: int = 0) -> TaskSpec:
    return TaskSpec(id=f"{operator}-{n}", agent="worker", operator=operator)


def test_the_painters_prepare_their_charts_and_the_checks_prepare_nothing():
    assert preparations([task("check_bloat"), task("paint_table_activity")]) == [warm_up]
    assert preparations([task("paint_abnormal_metrics"), task("paint_table_activity")]) == [
        warm_up
    ]  # once, shared
    assert preparations([task("check_bloat"), task("collect_settings")]) == []
    assert (
        start_preparing([task("check_bloat")]) is None
    )  # no thread for a plan with nothing to prepare


def test_each_preparation_runs_once_in_a_background_thread_and_a_failing_one_stops_nothing(
    monkeypatch: pytest.MonkeyPatch,
):
    import threading

    ran: list[tuple[str, str]] = []

    def failing() -> None:
        ran.append(("failing", threading.current_thread().name))
        raise RuntimeError("no such library")

    def loading() -> None:
        ran.append(("loading", threading.current_thread().name))

    monkeypatch.setitem(
        REGISTRY, "prep_a", replace(get("check_bloat"), name="prep_a", prepare=failing)
    )
    monkeypatch.setitem(
        REGISTRY, "prep_b", replace(get("check_bloat"), name="prep_b", prepare=loading)
    )
    thread = start_preparing(
        [task("prep_a"), task("prep_b"), task("prep_a", 1), task("check_bloat")]
    )
    assert thread is not None
    thread.join(timeout=30)
    assert ran == [("failing", "dbcrew-prepare"), ("loading", "dbcrew-prepare")]


EXITS_WHILE_PREPARING = """
import sys, time
from dataclasses import replace
from pathlib import Path
from dbcrew.models import TaskSpec
from dbcrew.operators.registry import REGISTRY, get
from dbcrew.roles.crew.preparing import start_preparing

def slow() -> None:
    time.sleep(0.5)
    Path(sys.argv[1]).write_text("prepared")

REGISTRY["prep_slow"] = replace(get("check_bloat"), name="prep_slow", prepare=slow)
start_preparing([TaskSpec(id="prep_slow", agent="a", operator="prep_slow")])
"""


def test_a_process_ending_while_a_preparation_runs_waits_for_it_instead_of_cutting_it_off(
    tmp_path: Path,
):
    """The run is over and the process exits at once: the preparation still completes. A thread cut
    off at exit inside a C++ extension (matplotlib laying out a font) aborts the whole process."""
    import subprocess
    import sys

    done = tmp_path / "done"
    result = subprocess.run(
        [sys.executable, "-c", EXITS_WHILE_PREPARING, str(done)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert done.read_text() == "prepared"


WARMED = """
import sys
from dbcrew.operators.figures import warm_up
assert "matplotlib" not in sys.modules
warm_up()
from matplotlib.mathtext import MathTextParser
print("matplotlib.backends.backend_agg" in sys.modules, MathTextParser._parser is not None)
"""


def test_warming_up_loads_matplotlib_and_its_canvas_and_not_the_mathtext_grammar_no_chart_uses():
    """In a fresh process: matplotlib and its Agg canvas imported; the mathtext grammar (~0.3 s to build) left
    alone, since the log axes are labelled in plain text (dbcrew.operators.figures.plain_log_ticks)."""
    out = subprocess.run(
        [sys.executable, "-c", WARMED], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    assert out.split() == ["True", "False"]


def test_an_unknown_operator_prepares_nothing_here_its_task_fails_on_its_own():
    assert preparations([task("no_such_operator"), task("paint_table_activity")]) == [warm_up]


def test_a_plan_starts_preparing_its_tasks_when_it_begins(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    """`execute` starts the preparations of the tasks it has yet to run, before the first of them finishes."""
    import threading
    from concurrent.futures import Future, ThreadPoolExecutor

    from dbcrew.models import AgentSpec, Role, Strategy
    from dbcrew.operators.registry import NoParams, Observation, OperatorContext
    from dbcrew.roles.crew.execution import ExecutionState, FutureRunner, execute
    from dbcrew.roles.crew.faults import FaultInjector
    from dbcrew.roles.crew.worker import TaskOutcome, perform
    from dbcrew.settings.run import Settings
    from dbcrew.targets import parse_target
    from dbcrew.workspace import Workspace

    prepared = threading.Event()

    def draw(_ctx: OperatorContext, _params: NoParams) -> Observation:
        assert prepared.wait(timeout=30), "the task ran to its end before its preparation started"
        return Observation(summary="drawn")

    monkeypatch.setitem(
        REGISTRY,
        "prep_draw",
        replace(
            get("paint_table_activity"),
            name="prep_draw",
            fn=draw,
            params_model=NoParams,
            needs=(),
            prepare=prepared.set,
        ),
    )
    target = parse_target(
        "postgresql://u@127.0.0.1:1/db"
    )  # never reached: the operator draws nothing from it
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
        team=[AgentSpec(name="painter", role=Role.PAINTER, goal="draw")],
        tasks=[TaskSpec(id="draw", agent="painter", operator="prep_draw")],
    )
    with ThreadPoolExecutor(1) as pool:
        result = execute(strategy, ExecutionState(), PoolRunner(pool), None)
    assert result.state.outcomes["draw"].status.value == "done", result.state.outcomes["draw"]
