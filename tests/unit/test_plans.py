"""Planner, validators, reflection and gap-narrow re-planning as plain functions."""

from __future__ import annotations

import pytest

import dbcrew.operators  # noqa: F401  (registers operators)
from dbcrew.models import Brief, Role, TaskSpec
from dbcrew.models.crew import Action, PlanRequest, Recommendation, ReplanRequest
from dbcrew.operators.registry import catalogue
from dbcrew.roles.brains.rules import RulesBrain
from dbcrew.roles.crew.capabilities import prune
from dbcrew.roles.crew.planner import PlanRejected, make_plan, reflect_until_valid
from dbcrew.roles.crew.replanner import diff, narrow, replan
from dbcrew.roles.crew.validators import validate


def brief(**changes: object) -> Brief:
    base = {
        "server_version": "18.6",
        "server_version_num": 180006,
        "database": "shop",
        "current_user": "postgres",
        "extensions": ["pg_stat_statements", "plpgsql"],
        "preloaded_libraries": ["pg_stat_statements"],
        "is_superuser": True,
        "can_read_all_stats": True,
    }
    return Brief(**{**base, **changes})


def request_for(b: Brief) -> PlanRequest:
    return PlanRequest(scenario="health", brief=b, catalogue=prune(b, catalogue()).available)


def test_health_plan_is_valid_and_covers_every_check():
    req = request_for(brief())
    planned = make_plan(RulesBrain(), req, max_rounds=2)
    assert validate(planned.strategy, req.catalogue) == []
    operators_planned = {t.operator for t in planned.strategy.tasks}
    assert {
        "check_duplicate_indexes",
        "check_slow_queries",
        "collect_statements",
        "paint_table_activity",
    } <= operators_planned
    assert (
        "collect_table_stats_all" not in operators_planned
    )  # equivalents are reserves, not duplicates
    roles = {a.role for a in planned.strategy.team}
    assert roles == {Role.EXTRACTOR, Role.TASKER, Role.PAINTER}
    missing = planned.strategy.task("check_missing_indexes")
    assert "collect_statements" in missing.needs  # `uses` wires a soft dependency when present


def test_plan_is_pruned_when_pg_stat_statements_is_missing():
    b = brief(extensions=["plpgsql"], preloaded_libraries=[])
    caps = prune(b, catalogue())
    planned = make_plan(RulesBrain(), request_for(b), max_rounds=2)
    ops = {t.operator for t in planned.strategy.tasks}
    assert "collect_statements" not in ops and "check_slow_queries" not in ops
    assert [(c.check, c.status.value) for c in caps.coverage] == [("check_slow_queries", "skipped")]
    assert "not installed" in caps.coverage[0].reason
    assert [(f.code, f.object) for f in caps.findings] == [
        ("extension_missing", "pg_stat_statements"),
        ("extension_missing", "hypopg"),
    ]


def test_hypopg_brings_the_index_advisor_into_the_plan():
    with_hypopg = {
        t.operator
        for t in make_plan(
            RulesBrain(),
            request_for(brief(extensions=["hypopg", "pg_stat_statements"])),
            max_rounds=2,
        ).strategy.tasks
    }
    without = {
        t.operator
        for t in make_plan(RulesBrain(), request_for(brief()), max_rounds=2).strategy.tasks
    }
    assert "advise_indexes" in with_hypopg and "advise_indexes" not in without


def test_restricted_role_gets_privilege_finding_with_grant():
    caps = prune(
        brief(is_superuser=False, can_read_all_stats=False, current_user="auditor"), catalogue()
    )
    finding = next(f for f in caps.findings if f.code == "privilege_insufficient")
    assert finding.evidence["grant"] == "GRANT pg_read_all_stats TO auditor;"
    for role, quoted in (("Auditor", '"Auditor"'), ("dbcrew-monitor", '"dbcrew-monitor"')):
        caps = prune(
            brief(is_superuser=False, can_read_all_stats=False, current_user=role), catalogue()
        )
        finding = next(f for f in caps.findings if f.code == "privilege_insufficient")
        assert finding.evidence["grant"] == f"GRANT pg_read_all_stats TO {quoted};", (
            "a role's name is quoted: never granted to another role, never a syntax error"
        )


def test_validators_catch_hallucinated_operator_wrong_role_cycle_and_missing_input():
    req = request_for(brief())
    good = make_plan(RulesBrain(), req, max_rounds=2).strategy
    bad = good.insert_task(
        TaskSpec(id="drop_all", agent="health-checker", operator="drop_everything")
    )
    bad = bad.replace_task(
        "check_sessions", bad.task("check_sessions").model_copy(update={"agent": "collector"})
    )
    bad = bad.replace_task(
        "collect_settings",
        bad.task("collect_settings").model_copy(update={"needs": ["check_vacuum_health"]}),
    )
    bad = bad.replace_task(
        "check_sequences", bad.task("check_sequences").model_copy(update={"needs": []})
    )
    kinds = {p.kind for p in validate(bad, req.catalogue)}
    assert {"unknown_operator", "wrong_role", "cycle"} <= kinds
    acyclic = good.replace_task(
        "check_sequences", good.task("check_sequences").model_copy(update={"needs": []})
    )
    assert {p.kind for p in validate(acyclic, req.catalogue)} == {"missing_input"}


def test_reflection_repairs_what_the_validators_found():
    req = request_for(brief())
    good = make_plan(RulesBrain(), req, max_rounds=2).strategy
    bad = good.insert_task(TaskSpec(id="x", agent="nobody", operator="made_up")).replace_task(
        "check_sequences", good.task("check_sequences").model_copy(update={"needs": []})
    )
    fixed = reflect_until_valid(RulesBrain(), req, bad, max_rounds=2)
    assert len(fixed.rounds) == 1 and validate(fixed.strategy, req.catalogue) == []
    assert "x" not in {t.id for t in fixed.strategy.tasks}
    with pytest.raises(PlanRejected):
        reflect_until_valid(RulesBrain(), req, bad, max_rounds=0)


def test_replan_replaces_the_failed_operator_and_keeps_the_rest():
    req = request_for(brief())
    strategy = make_plan(RulesBrain(), req, max_rounds=2).strategy
    rr = ReplanRequest(
        scenario="health",
        brief=req.brief,
        catalogue=req.catalogue,
        strategy=strategy,
        completed=["collect_settings", "collect_activity"],
        failed="collect_table_stats",
        recommendations=[
            Recommendation(action=Action.REPLACE_OPERATOR, task_id="collect_table_stats")
        ],
    )
    result = replan(RulesBrain(), rr, max_rounds=2)
    ids = {t.id for t in result.strategy.tasks}
    assert "collect_table_stats_all" in ids and "collect_table_stats" not in ids
    assert [e.kind for e in result.edits] == ["replace"]
    assert "collect_table_stats_all" in result.strategy.task("check_vacuum_health").needs
    assert result.strategy.task("collect_settings") == strategy.task("collect_settings")


def test_gap_narrow_restores_tasks_outside_the_failed_subgraph():
    req = request_for(brief())
    strategy = make_plan(RulesBrain(), req, max_rounds=2).strategy
    rr = ReplanRequest(
        scenario="health",
        brief=req.brief,
        catalogue=req.catalogue,
        strategy=strategy,
        completed=["collect_settings"],
        failed="collect_statements",
        recommendations=[],
    )
    greedy = strategy.remove_tasks(
        {"collect_settings", "check_vacuum_health", "collect_statements", "check_slow_queries"}
    )
    accepted, refused = narrow(rr, diff(strategy, greedy))
    narrowed = strategy.apply_all(accepted)
    # check_settings reads collect_settings' output too: rewiring it is outside the failed subgraph as well.
    assert sorted(r.split(":")[0] for r in refused) == [
        "remove check_vacuum_health",
        "remove collect_settings",
        "reorder check_settings",
    ]
    assert {"collect_settings", "check_vacuum_health"} <= {t.id for t in narrowed.tasks}
    assert "check_slow_queries" not in {
        t.id for t in narrowed.tasks
    }  # inside the subgraph: allowed to go


def test_every_scenario_has_a_playbook_whose_categories_hold_operators():
    from dbcrew.roles.brains.playbooks import PLAYBOOKS
    from dbcrew.vocabulary import Scenario

    assert set(PLAYBOOKS) == set(Scenario)
    categories = {entry.category for entry in catalogue()}
    for scenario, drawn in PLAYBOOKS.items():
        assert drawn and set(drawn) <= categories, scenario
        plan = RulesBrain().plan(
            PlanRequest(scenario=scenario, brief=brief(), catalogue=catalogue())
        )
        assert plan.tasks and validate(plan, catalogue()) == [], scenario
