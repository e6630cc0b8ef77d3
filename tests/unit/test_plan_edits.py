"""Plan edits on the Strategy, the diff that reads a proposal as edits, and the gap-narrow rules."""

from __future__ import annotations

import dbcrew.operators  # noqa: F401  (registers operators)
from dbcrew.models import AgentSpec, Brief, Role, Strategy, TaskSpec
from dbcrew.models.crew import Action, PlanRequest, Recommendation, ReplanRequest
from dbcrew.models.faults import FaultKind, FaultSpec
from dbcrew.models.plan import EditKind, PlanEdit
from dbcrew.operators.registry import catalogue
from dbcrew.roles.brains.rules import RulesBrain
from dbcrew.roles.crew.capabilities import prune
from dbcrew.roles.crew.faults import damage_plan
from dbcrew.roles.crew.monitor import repaired_params
from dbcrew.roles.crew.planner import make_plan, reflect_until_valid
from dbcrew.roles.crew.replanner import diff, narrow, replan
from dbcrew.roles.crew.validators import validate

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
REQUEST = PlanRequest(scenario="health", brief=BRIEF, catalogue=prune(BRIEF, catalogue()).available)


def plan() -> Strategy:
    return make_plan(RulesBrain(), REQUEST, max_rounds=2).strategy


def replan_request(
    strategy: Strategy, failed: str, completed: list[str], action: Action = Action.REPLACE_OPERATOR
) -> ReplanRequest:
    return ReplanRequest(
        scenario="health",
        brief=BRIEF,
        catalogue=REQUEST.catalogue,
        strategy=strategy,
        completed=completed,
        failed=failed,
        recommendations=[Recommendation(action=action, task_id=failed, detail="test")],
    )


def test_each_edit_returns_a_new_strategy_and_leaves_the_old_one_alone():
    old = plan()
    spec = old.task("collect_table_stats")
    new = spec.model_copy(
        update={"id": "collect_table_stats_all", "operator": "collect_table_stats_all"}
    )
    edited = old.apply_all(
        [
            PlanEdit(kind=EditKind.REPLACE, task_id=spec.id, before=spec, after=new),
            PlanEdit(
                kind=EditKind.CHANGE_PARAMS,
                task_id="collect_index_stats",
                before=old.task("collect_index_stats"),
                after=old.task("collect_index_stats").model_copy(
                    update={"params": {"window_seconds": 2.0}}
                ),
            ),
            PlanEdit(
                kind=EditKind.REMOVE, task_id="check_sequences", before=old.task("check_sequences")
            ),
        ]
    )
    assert "collect_table_stats" in {t.id for t in old.tasks} and "check_sequences" in {
        t.id for t in old.tasks
    }
    assert (
        "collect_table_stats_all" in edited.task("check_vacuum_health").needs
    )  # dependents follow the replacement
    assert "collect_table_stats_all" in edited.agent("collector").tools
    assert edited.task("collect_index_stats").params == {"window_seconds": 2.0}
    assert "check_sequences" not in {t.id for t in edited.tasks}
    assert validate(edited, REQUEST.catalogue) == []


def test_diff_reads_a_proposal_as_edits_that_rebuild_it():
    old = plan()
    spec = old.task("collect_table_stats")
    proposal = old.replace_task(
        spec.id,
        spec.model_copy(
            update={"id": "collect_table_stats_all", "operator": "collect_table_stats_all"}
        ),
    )
    proposal = proposal.change_params("collect_activity", {"samples": 3})
    proposal = proposal.remove_tasks({"check_sequences"})
    vacuum = proposal.task("check_primary_keys")
    proposal = proposal.replace_task(
        vacuum.id, vacuum.model_copy(update={"needs": [*vacuum.needs, "collect_settings"]})
    )
    edits = diff(old, proposal)
    assert sorted((e.kind.value, e.task_id) for e in edits) == [
        ("change_params", "collect_activity"),
        ("remove", "check_sequences"),
        ("reorder", "check_primary_keys"),
        ("replace", "collect_table_stats"),
    ]
    rebuilt = old.apply_all(edits)
    assert {t.id: t for t in rebuilt.tasks} == {t.id: t for t in proposal.tasks}


def test_gap_narrow_refuses_edits_outside_the_failed_subgraph_and_on_completed_tasks():
    old = plan()
    request = replan_request(
        old, "collect_statements", completed=["collect_settings", "collect_activity"]
    )
    proposal = old.change_params("collect_settings", {}).change_params(
        "collect_activity", {"samples": 2}
    )
    proposal = proposal.change_params("collect_statements", {"window_seconds": 1.0})
    accepted, refused = narrow(request, diff(old, proposal))
    assert [e.task_id for e in accepted] == ["collect_statements"]
    assert refused == [
        "change_params collect_activity: outside the failed subgraph of collect_statements"
    ]


def test_gap_narrow_prefers_editing_a_task_to_adding_an_agent():
    old = plan()
    request = replan_request(old, "check_sessions", completed=[], action=Action.ADD_AGENT)
    helper = AgentSpec(name="second-checker", role=Role.TASKER, goal="check sessions")
    moved = old.task("check_sessions").model_copy(update={"agent": "second-checker"})
    proposal = old.add_agent(helper).replace_task("check_sessions", moved)
    accepted, refused = narrow(request, diff(old, proposal))
    assert [
        e.kind.value for e in accepted
    ] == [] and "health-checker has the tasker role already" in refused[0]
    # The agent is really missing: adding it is the edit the plan needs.
    lacking = old.model_copy(update={"team": [a for a in old.team if a.role is not Role.PAINTER]})
    result = replan(
        RulesBrain(),
        replan_request(lacking, "paint_table_activity", [], Action.ADD_AGENT),
        max_rounds=2,
    )
    assert [e.kind.value for e in result.edits] == ["add_agent"] and result.strategy.agent(
        "painter"
    ) is not None


def test_without_gap_narrow_the_whole_proposal_is_taken():
    old = plan()
    request = replan_request(
        old,
        "collect_table_stats",
        completed=[
            t.id for t in old.tasks if t.id.startswith("collect_") and t.id != "collect_table_stats"
        ],
    )
    narrow_result = replan(RulesBrain(), request, max_rounds=2)
    wide_result = replan(RulesBrain(), request, max_rounds=2, gap_narrow=False)
    assert (
        [e.kind.value for e in narrow_result.edits]
        == [e.kind.value for e in wide_result.edits]
        == ["replace"]
    )
    assert wide_result.rejected == [] and wide_result.strategy.round == old.round + 1


def test_plan_faults_damage_the_draft_and_reflection_repairs_them():
    faults = [
        FaultSpec(operator="collect_index_stats", kind=FaultKind.BAD_PARAM),
        FaultSpec(operator="paint_table_activity", kind=FaultKind.MISSING_AGENT),
        FaultSpec(operator="check_vacuum_health", kind=FaultKind.LOST_DEPENDENCY),
    ]
    damaged = damage_plan(plan(), faults)
    kinds = {p.kind for p in validate(damaged, REQUEST.catalogue)}
    assert kinds == {"bad_params", "missing_agent", "missing_input"}
    repaired = reflect_until_valid(RulesBrain(), REQUEST, damaged, max_rounds=2)
    assert (
        validate(repaired.strategy, REQUEST.catalogue) == []
        and repaired.strategy.task("collect_index_stats").params == {}
    )
    assert str(FaultSpec.parse("collect_index_stats:bad_param")) == "collect_index_stats:bad_param"


def test_monitor_keeps_only_the_parameters_an_operator_accepts():
    assert repaired_params("collect_activity", {"window_seconds": -1, "samples": 3}) == {
        "samples": 3
    }
    assert repaired_params("collect_settings", {"window_seconds": 2}) == {}
    assert repaired_params("collect_index_stats", {"window_seconds": 2}) == {"window_seconds": 2}


def test_a_task_edit_keeps_the_task_frozen_and_typed():
    edit = PlanEdit(
        kind=EditKind.INSERT,
        task_id="x",
        after=TaskSpec(id="x", agent="collector", operator="collect_settings"),
    )
    assert edit.describe() == "insert collect_settings"
    assert PlanEdit.model_validate_json(edit.model_dump_json()) == edit
