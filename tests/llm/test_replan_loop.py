"""ROMAS Algorithm 1 over a real brain: refused differences regenerated, differences that do not improve the plan dropped.

The planner's proposals come from the scripted OpenAI-compatible server through the real client;
the gap-narrow rules, the regeneration and the improvement check are the product's own.
"""

from __future__ import annotations

import json

from dbcrew.lab.scripted_llm import Reply, ScriptedServer
from dbcrew.models import Strategy
from dbcrew.roles.crew.replanner import replan
from tests.llm.test_brain_bounds import brain
from tests.unit.test_plan_edits import plan, replan_request

FAILED = "collect_table_stats"
COMPLETED = ["collect_settings", "collect_activity", "collect_index_stats"]


def fixed(old: Strategy) -> Strategy:
    """The equivalent collector in place of the failed one: the difference that closes the gap."""
    spec = old.task(FAILED)
    return old.replace_task(
        FAILED,
        spec.model_copy(
            update={"id": "collect_table_stats_all", "operator": "collect_table_stats_all"}
        ),
    )


def touching_completed(old: Strategy, task_id: str) -> Strategy:
    """A difference the gap-narrow rules refuse: a completed task outside the failed subgraph changed."""
    return old.change_params(
        task_id, {"samples": 3} if task_id == "collect_activity" else {"window_seconds": 1.0}
    )


def reply(strategy: Strategy) -> Reply:
    return Reply(content=strategy.model_dump_json())


def replan_prompts(server: ScriptedServer) -> list[str]:
    return [
        r["messages"][1]["content"]
        for r in server.requests
        if r["messages"][1]["content"].startswith("Re-plan scenario")
    ]


def test_a_refused_difference_is_regenerated_and_the_regenerated_fix_applied(
    server: ScriptedServer,
):
    old = plan()
    server.replies = [reply(touching_completed(old, "collect_activity")), reply(fixed(old))]
    result = replan(
        brain(server), replan_request(old, FAILED, COMPLETED), max_rounds=2, reflection=False
    )
    assert result.regenerations == 1 and result.rejected == []
    assert [(e.kind.value, e.task_id, e.after.operator) for e in result.edits] == [
        ("replace", FAILED, "collect_table_stats_all")
    ]
    first, second = replan_prompts(server)
    assert "refused" not in first
    # The second request tells the brain what was refused, and why.
    assert (
        "change_params collect_activity: outside the failed subgraph of collect_table_stats"
        in second
    )


def test_regeneration_stops_after_n_times_and_the_refusal_is_recorded(server: ScriptedServer):
    old = plan()
    server.replies = [
        reply(touching_completed(old, task))
        for task in ("collect_activity", "collect_index_stats", "collect_activity")
    ]
    result = replan(
        brain(server),
        replan_request(old, FAILED, COMPLETED),
        max_rounds=2,
        reflection=False,
        max_regenerations=2,
    )
    assert result.regenerations == 2 and len(replan_prompts(server)) == 3 and result.edits == []
    assert result.rejected == [
        "change_params collect_activity: outside the failed subgraph of collect_table_stats"
    ]


def test_a_difference_that_does_not_improve_the_plan_is_dropped_and_recorded(
    server: ScriptedServer,
):
    old = plan()
    proposal = fixed(old)
    keys = proposal.task("check_primary_keys")
    # Inside the failed subgraph and not completed, so the gap-narrow rules accept it, but it changes nothing that failed.
    proposal = proposal.replace_task(
        keys.id, keys.model_copy(update={"needs": [*keys.needs, "collect_settings"]})
    )
    server.replies = [reply(proposal)]
    result = replan(
        brain(server), replan_request(old, FAILED, COMPLETED), max_rounds=2, reflection=False
    )
    assert result.regenerations == 0
    assert [(e.kind.value, e.task_id) for e in result.edits] == [("replace", FAILED)]
    assert len(result.rejected) == 1 and result.rejected[0].startswith(
        "reorder check_primary_keys: does not improve the plan"
    )
    assert "collect_settings" not in result.strategy.task("check_primary_keys").needs
    assert json.loads(result.strategy.model_dump_json())["round"] == old.round + 1
