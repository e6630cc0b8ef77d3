"""Long-term memory across runs on a real PostgreSQL, and the monitor's instructions under a test error tree."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb

from dbcrew.error_tree import load_tree
from dbcrew.lab.shop import DemoShop
from dbcrew.models import Brief, Report, Strategy
from dbcrew.models.crew import Action, Alert, Recommendation
from dbcrew.models.faults import FaultSpec
from dbcrew.models.plan import EditKind
from dbcrew.roles.brains.rules import RulesBrain
from dbcrew.roles.crew.context import RunContext
from dbcrew.roles.crew.execution import ExecutionResult, ExecutionState, execute
from dbcrew.roles.crew.memory import Lesson, LongTermMemory, target_identity
from dbcrew.roles.crew.monitor import Monitor
from dbcrew.roles.crew.run import ThreadRunner, with_remembered_fixes
from dbcrew.roles.spine import PlainPhases
from dbcrew.roles.spine import review as review_run
from dbcrew.settings.run import Ablations, Settings
from dbcrew.store import open_store
from dbcrew.targets import parse_target
from dbcrew.workspace import Workspace

WINDOW = 1.0

TEST_TREE = """
name: error
description: any failure
children:
  - name: pipeline
    description: a step failed while running
    children:
      - name: bad_parameter
        description: an operator was called with parameters that do not validate
        examples: ["ValidationError: Input should be greater than or equal to 0", "Extra inputs are not permitted"]
        remedy: {kind: instruction, action: change_params}
      - name: broken_dependency
        description: a task read an input that was not produced yet
        examples: ["CatalogException: Table with name settings does not exist", "Catalog Error table does not exist"]
        remedy: {kind: instruction, action: reorder}
  - name: logic
    description: the plan is wrong
    children:
      - name: wrong_operator
        description: the operator cannot serve this target
        examples: ["OperatorMisfit: cannot serve this target"]
        remedy: {kind: replan, action: replace_operator}
"""


def run_for(dsn: str, out: Path, faults: list[str], **switches: bool) -> RunContext:
    return RunContext(
        target=parse_target(dsn),
        out_dir=out,
        faults=[FaultSpec.parse(f) for f in faults],
        settings=Settings(
            window_seconds=WINDOW, activity_samples=2, ablations=Ablations(**switches)
        ),
    )


def review(run: RunContext, phases: type = PlainPhases) -> Report:
    return review_run(run, phases)


def test_second_run_on_a_target_starts_with_the_fix_in_its_plan(
    shop: DemoShop, tmp_path: Path, private_store: Path
):
    first = review(run_for(shop.dsn, tmp_path / "first", ["collect_table_stats:misfit"]))
    assert first.phases.replans == 1 and first.phases.lessons_applied == 0
    # Memory lives outside the run directory, keyed by the cluster's system identifier and the database.
    assert private_store.exists() and not private_store.is_relative_to(tmp_path / "first")
    with duckdb.connect(str(private_store), read_only=True) as conn:
        (target,) = conn.execute("SELECT DISTINCT target FROM lessons").fetchone()
    assert target.endswith("/shop") and target.split("/")[0].isdigit()

    second_run = run_for(shop.dsn, tmp_path / "second", ["collect_table_stats:misfit"])
    init = PlainPhases.initialize(second_run)
    operators = {t.operator for t in init.strategy.tasks}
    known = LongTermMemory(open_store(str(private_store))).lessons(target)
    assert "collect_table_stats_all" in operators and "collect_table_stats" not in operators, (
        init.identity,
        known,
    )
    assert [(e.kind.value, e.source) for e in init.edits] == [("replace", "memory")]

    second = review(second_run)
    assert (second.phases.alerts, second.phases.replans, second.phases.lessons_applied) == (0, 0, 1)
    assert all(c.status.value == "ran" for c in second.coverage)
    assert (
        LongTermMemory(open_store(str(private_store))).lessons(target)[0].successes == 2
    )  # the fix worked again


def test_timeout_fixed_by_an_instruction_is_remembered_too(shop: DemoShop, tmp_path: Path):
    review(run_for(shop.dsn, tmp_path / "first", ["collect_table_stats:timeout"]))
    second = review(run_for(shop.dsn, tmp_path / "second", ["collect_table_stats:timeout"]))
    assert second.phases.alerts == 0 and second.edits[0].source == "memory"


def test_without_memory_nothing_is_kept_or_used(
    shop: DemoShop, tmp_path: Path, private_store: Path
):
    review(run_for(shop.dsn, tmp_path / "first", ["collect_table_stats:misfit"], memory=False))
    store = open_store(str(private_store))  # the run is in the history, but it taught nothing
    (target,) = store.targets()
    assert store.lessons(target.target) == []
    review(run_for(shop.dsn, tmp_path / "learn", ["collect_table_stats:misfit"]))
    blind = review(
        run_for(shop.dsn, tmp_path / "blind", ["collect_table_stats:misfit"], memory=False)
    )
    assert blind.phases.replans == 1 and blind.phases.lessons_applied == 0


def test_sensory_and_short_term_memory_land_in_the_run_workspace(shop: DemoShop, tmp_path: Path):
    run = run_for(shop.dsn, tmp_path, ["check_sessions:timeout"], memory=False)
    review(run)
    workspace = Workspace(run.workspace_path)
    sensory = {
        r["task_id"]: r["status"]
        for r in workspace.query("SELECT task_id, status FROM memory_sensory")
    }
    kinds = {r["kind"] for r in workspace.query("SELECT DISTINCT kind FROM memory_short_term")}
    assert sensory["check_sessions"] == "failed" and sensory["collect_settings"] == "done"
    assert kinds == {"attempt", "decision"}


class TreePhases(PlainPhases):
    """The plain phases with the monitor walking a small test tree whose remedies are change_params and reorder."""

    tree_path: Path

    @classmethod
    def execute(
        cls, run: RunContext, brief: Brief, strategy: Strategy, state: ExecutionState
    ) -> ExecutionResult:
        with ThreadPoolExecutor(max_workers=run.settings.max_workers) as pool:
            return execute(
                strategy,
                state,
                ThreadRunner(run, brief, pool),
                Monitor(lambda: load_tree(cls.tree_path), RulesBrain()),
            )


def tree_phases(tmp_path: Path) -> type[TreePhases]:
    path = tmp_path / "tree.yaml"
    path.write_text(TEST_TREE)
    return type("Phases", (TreePhases,), {"tree_path": path})


def test_change_params_instruction_repairs_rejected_parameters(shop: DemoShop, tmp_path: Path):
    run = run_for(shop.dsn, tmp_path / "run", ["collect_index_stats:bad_param"], reflection=False)
    report = review(run, tree_phases(tmp_path))
    decision = report.decisions[0]
    assert (decision.leaf, decision.remedy) == ("bad_parameter", "instruction: change_params {}")
    edit = report.edits[0]
    assert (edit.kind.value, edit.before.params, edit.after.params) == (
        "change_params",
        {"window_seconds": -1},
        {},
    )
    assert all(c.status.value == "ran" for c in report.coverage)
    # The repaired parameters are a lesson: the next run's plan carries them from the start.
    again = review(
        run_for(shop.dsn, tmp_path / "again", ["collect_index_stats:bad_param"], reflection=False),
        tree_phases(tmp_path),
    )
    assert again.phases.alerts == 0 and again.edits[0].source == "memory"


def test_reorder_instruction_runs_the_task_after_its_producers(shop: DemoShop, tmp_path: Path):
    run = run_for(
        shop.dsn, tmp_path, ["check_vacuum_health:lost_dependency"], reflection=False, memory=False
    )
    # A thread for every task: the check, its needs lost, starts with the collectors whatever its
    # place in the plan, so it reads tables they have not landed yet (with 8 threads, a plan that
    # lists it after eight collectors starts it only once one of them is done).
    run.settings.max_workers = 64  # more threads than the plan has tasks
    report = review(run, tree_phases(tmp_path))
    decision = report.decisions[0]
    assert (decision.task_id, decision.leaf) == ("check_vacuum_health", "broken_dependency")
    edit = report.edits[0]
    assert (edit.kind.value, edit.before.needs) == ("reorder", [])
    assert {"collect_table_stats", "collect_settings"} <= set(edit.after.needs)
    assert {c.check: c.status.value for c in report.coverage}["check_vacuum_health"] == "ran"
    assert ("autovacuum_disabled", "public.cart_items") in {
        (f.code, f.object) for f in report.findings
    }


def test_replan_recommendations_carry_the_fix_memory_recalls_for_the_error(
    shop: DemoShop, tmp_path: Path, private_store: Path
):
    run = run_for(shop.dsn, tmp_path, [], memory=False)
    init = PlainPhases.initialize(run)
    identity = target_identity(run.target, init.brief)
    spec = init.strategy.task("collect_table_stats")
    fixed = spec.model_copy(
        update={"id": "collect_table_stats_all", "operator": "collect_table_stats_all"}
    )
    LongTermMemory(open_store(str(private_store))).learn(
        [
            Lesson(
                target=identity,
                operator=spec.operator,
                kind=EditKind.REPLACE,
                fixed=fixed,
                error="OperatorMisfit: collect_table_stats cannot serve this target",
            )
        ]
    )
    alert = Alert(
        task_id=spec.id,
        agent=spec.agent,
        operator=spec.operator,
        error_type="OperatorMisfit",
        message="collect_table_stats cannot serve this target",
    )
    result = ExecutionResult(
        strategy=init.strategy,
        state=ExecutionState(),
        replan_for=alert,
        recommendations=[
            Recommendation(action=Action.REPLACE_OPERATOR, task_id=spec.id, detail="wrong_operator")
        ],
    )
    (recommendation,) = with_remembered_fixes(run, init.brief, result)
    assert recommendation.detail.startswith(
        "wrong_operator; memory: collect_table_stats failed before"
    )
    assert "running it as collect_table_stats_all" in recommendation.detail
    assert init.identity == ""  # memory was off for the initial run: nothing was looked up
