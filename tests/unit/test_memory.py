"""Long-term memory in the shared store (a real DuckDB file): learning, reinforcement, hybrid recall, lessons applied as plan edits."""

from __future__ import annotations

from pathlib import Path

import dbcrew.operators  # noqa: F401  (registers operators)
from dbcrew.models import Brief, Strategy
from dbcrew.models.crew import FailedCall, PlanRequest, ReplanRequest
from dbcrew.models.plan import EditKind
from dbcrew.operators.registry import catalogue
from dbcrew.roles.brains.rules import RulesBrain
from dbcrew.roles.crew.capabilities import prune
from dbcrew.roles.crew.memory import Lesson, LongTermMemory, apply_lessons, recall, remembered_fixes
from dbcrew.roles.crew.planner import make_plan
from dbcrew.roles.crew.replanner import replan, score
from dbcrew.store import STORE_ENV, open_store, store_url

BRIEF = Brief(
    server_version="18.6",
    server_version_num=180006,
    database="shop",
    current_user="postgres",
    extensions=["pg_stat_statements"],
    preloaded_libraries=["pg_stat_statements"],
    is_superuser=True,
    can_read_all_stats=True,
)
CATALOGUE = prune(BRIEF, catalogue()).available
TARGET = "7311234567890123456/shop"


def plan() -> Strategy:
    return make_plan(
        RulesBrain(), PlanRequest(scenario="health", brief=BRIEF, catalogue=CATALOGUE), 2
    ).strategy


def swap_lesson(
    strategy: Strategy, operator: str, replacement: str, target: str = TARGET, error: str = ""
) -> Lesson:
    spec = strategy.task(operator)
    fixed = spec.model_copy(update={"id": replacement, "operator": replacement})
    return Lesson(
        target=target,
        operator=operator,
        kind=EditKind.REPLACE,
        fixed=fixed,
        error=error,
        learned_run="r1",
    )


def test_the_store_is_a_file_beside_the_old_memory_unless_the_environment_names_one(
    monkeypatch, tmp_path: Path
):
    monkeypatch.delenv(STORE_ENV)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    assert store_url() == str(tmp_path / ".local" / "share" / "dbcrew" / "store.duckdb")
    monkeypatch.setenv(
        "DBCREW_MEMORY_PATH", str(tmp_path / "old-memory.duckdb")
    )  # the older variable still works
    assert open_store().location == str(tmp_path / "old-memory.duckdb")
    monkeypatch.setenv(STORE_ENV, f"duckdb://{tmp_path / 'elsewhere.duckdb'}")
    assert open_store().location == str(tmp_path / "elsewhere.duckdb")


def test_lessons_are_kept_per_target_and_reinforced_when_the_same_fix_works_again(tmp_path: Path):
    memory = LongTermMemory(open_store(str(tmp_path / "m.duckdb")))
    strategy = plan()
    lesson = swap_lesson(
        strategy,
        "collect_table_stats",
        "collect_table_stats_all",
        error="OperatorMisfit: cannot serve",
    )
    memory.learn([lesson])
    memory.learn([lesson.model_copy(update={"learned_run": "r2"})])
    (kept,) = memory.lessons(TARGET)
    assert (kept.successes, kept.learned_run, kept.fixed.operator) == (
        2,
        "r1",
        "collect_table_stats_all",
    )
    assert memory.lessons("other-cluster/shop") == []
    # A different fix for the same operator replaces the old one and starts counting again.
    params = strategy.task("collect_table_stats").model_copy(
        update={"params": {"window_seconds": 1.0}}
    )
    memory.learn(
        [
            Lesson(
                target=TARGET,
                operator="collect_table_stats",
                kind=EditKind.CHANGE_PARAMS,
                fixed=params,
            )
        ]
    )
    (kept,) = LongTermMemory(open_store(str(tmp_path / "m.duckdb"))).lessons(
        TARGET
    )  # reopened: it persisted
    assert (kept.kind, kept.successes) == (EditKind.CHANGE_PARAMS, 1)


def test_hybrid_recall_takes_only_planned_operators_and_ranks_by_the_error(tmp_path: Path):
    memory = LongTermMemory(open_store(str(tmp_path / "m.duckdb")))
    strategy = plan()
    timeout = swap_lesson(
        strategy,
        "collect_table_stats",
        "collect_table_stats_all",
        error="QueryCanceled: canceling statement due to statement timeout",
    )
    params = Lesson(
        target=TARGET,
        operator="collect_index_stats",
        kind=EditKind.CHANGE_PARAMS,
        fixed=strategy.task("collect_index_stats"),
        error="ValidationError: Extra inputs are not permitted",
    )
    unplanned = Lesson(
        target=TARGET,
        operator="made_up_operator",
        kind=EditKind.CHANGE_PARAMS,
        fixed=strategy.task("collect_settings"),
    )
    memory.learn([timeout, params, unplanned])
    ranked = recall(
        memory, TARGET, strategy, error="validation error: extra inputs are not permitted"
    )
    assert [lesson.operator for lesson in ranked] == ["collect_index_stats", "collect_table_stats"]
    ranked = recall(memory, TARGET, strategy, error="canceling statement due to statement timeout")
    assert ranked[0].operator == "collect_table_stats"
    short_term = [
        swap_lesson(strategy, "collect_table_stats", "collect_table_stats_all", error="this run")
    ]
    assert recall(memory, TARGET, strategy, short_term=short_term)[0].error in (
        "this run",
        params.error,
    )


def test_lessons_become_plan_edits_and_invalid_or_conflicting_ones_are_left_out():
    strategy = plan()
    swap = swap_lesson(strategy, "collect_table_stats", "collect_table_stats_all")
    back = Lesson(
        target=TARGET,
        operator="collect_table_stats_all",
        kind=EditKind.REPLACE,
        fixed=swap.fixed.model_copy(
            update={"id": "collect_table_stats", "operator": "collect_table_stats"}
        ),
    )
    invalid = Lesson(
        target=TARGET,
        operator="collect_index_stats",
        kind=EditKind.CHANGE_PARAMS,
        fixed=strategy.task("collect_index_stats").model_copy(
            update={"params": {"window_seconds": -1}}
        ),
    )
    fixed, edits = apply_lessons(strategy, [swap, back, invalid], CATALOGUE)
    assert [(e.kind.value, e.task_id, e.source) for e in edits] == [
        ("replace", "collect_table_stats", "memory")
    ]
    assert "collect_table_stats_all" in {t.operator for t in fixed.tasks}
    assert fixed.task("collect_index_stats").params == {}
    assert "worked 1x" in edits[0].reason


def test_a_remembered_fix_counts_for_its_error_class_and_not_once_it_failed_in_this_run():
    lesson = swap_lesson(plan(), "collect_table_stats", "collect_table_stats_all").model_copy(
        update={"leaf": "wrong_operator"}
    )
    assert remembered_fixes([lesson], "collect_table_stats", "wrong_operator", []) == [lesson]
    assert remembered_fixes([lesson], "collect_table_stats", "timeout", []) == []  # another class
    tried = [FailedCall(operator="collect_table_stats_all", params=dict(lesson.fixed.params))]
    assert remembered_fixes([lesson], "collect_table_stats", "wrong_operator", tried) == []


def test_the_replan_applies_a_remembered_fix_without_the_brain_and_never_a_failed_call():
    strategy = plan()
    lesson = swap_lesson(strategy, "collect_table_stats", "collect_table_stats_all").model_copy(
        update={"leaf": "wrong_operator"}
    )
    request = ReplanRequest(
        scenario="health",
        brief=BRIEF,
        catalogue=CATALOGUE,
        strategy=strategy,
        completed=[],
        failed="collect_table_stats",
        recommendations=[],
    )
    planned = replan(RulesBrain(), request, 2, remembered=[lesson])
    (edit,) = planned.edits
    assert (edit.kind, edit.source, edit.after.operator) == (
        EditKind.REPLACE,
        "memory",
        "collect_table_stats_all",
    )
    # The same fix, failed earlier in this run: it does not improve the plan, so it is not applied.
    failed = request.model_copy(
        update={
            "failed_before": [
                FailedCall(operator="collect_table_stats_all", params=dict(lesson.fixed.params))
            ]
        }
    )
    assert score(failed, strategy.apply(edit)) > score(request, strategy.apply(edit))
