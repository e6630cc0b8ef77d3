"""Each LLM expert observes the views its area calls for (dbcrew/roles/diagnosis/tools.py: views_for),
matched as the planner matches operators to an alert; the views of the window as a whole go to all."""

from __future__ import annotations

import pytest

import dbcrew.operators  # noqa: F401  (registers operators)
from dbcrew.operators.diagnose.facts import FactsRecord
from dbcrew.operators.diagnose.views import GENERAL_VIEWS
from dbcrew.operators.registry import Operator, catalogue
from dbcrew.operators.window.evidence import WindowEvidence
from dbcrew.roles.brains.playbooks import EXPERT_PREFIX
from dbcrew.roles.diagnosis.tools import OBSERVE, DiagnosisTools, views, views_for

EXPERTS = [
    e.name.removeprefix(EXPERT_PREFIX) for e in catalogue() if e.name.startswith(EXPERT_PREFIX)
]


def names(ops: tuple[Operator, ...]) -> set[str]:
    return {op.name for op in ops}


def test_each_expert_observes_its_areas_views_and_not_the_unrelated_ones():
    locks = names(views_for("locks"))
    assert "waits" in locks and not {"statements", "plans", "tables"} & locks
    query = names(views_for("query"))
    assert {"statements", "plans"} <= query and not {"waits", "settings"} & query
    # an area spanning two views gets both: WAL flush waits and synchronous_commit
    assert {"waits", "settings"} <= names(views_for("configuration"))
    assert {"tables", "plans"} <= names(views_for("index"))
    for expert in EXPERTS:
        chosen = names(views_for(expert))
        assert GENERAL_VIEWS <= chosen, expert
        assert chosen < names(tuple(views())) or expert == "workload", expert
    # an expert the catalogue does not hold observes every view, as before views were matched
    assert views_for("no_such_expert") == tuple(views())


def test_an_expert_is_offered_and_may_call_only_its_views():
    window = WindowEvidence(started_at=0.0, seconds=10.0, interval=1.0)
    tools = DiagnosisTools(FactsRecord(window=window, alert="")).for_expert("locks")
    assert "waits" in tools.names() and "plans" not in tools.names()
    observe = next(s["function"] for s in tools.specs() if s["function"]["name"] == OBSERVE)
    what = observe["parameters"]["properties"]["what"]["enum"]
    assert what == [op.name for op in views_for("locks")]
    assert "limit" not in observe["parameters"]["properties"]  # the statements view's parameter
    assert tools.run("waits", {})[0].startswith("{")
    with pytest.raises(KeyError):
        tools.run("plans", {})
