"""Property: any sequence of valid plan edits keeps the strategy a plan the validators accept.

The machine starts from the rules brain's health plan over the real operator catalogue and
applies edits of every kind, each one drawn so that it is valid on the plan as it stands (a
replacement produces at least what the task produced, an insert reads only what some task
produces, a removal takes a task nothing waits for, new dependencies never come from
downstream). After every edit the plan must validate (dbcrew/roles/crew/validators.py), the plan it was
applied to must be unchanged, and the diff from the first plan must rebuild the current one.
"""

from __future__ import annotations

from typing import Any

import annotated_types
import networkx as nx
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import dbcrew.operators  # noqa: F401  (registers operators)
from dbcrew.models import AgentSpec, Brief, CatalogueEntry, Role, Strategy, TaskSpec
from dbcrew.models.crew import PlanRequest
from dbcrew.models.plan import EditKind, PlanEdit
from dbcrew.operators.registry import REGISTRY, catalogue
from dbcrew.roles.brains.rules import RulesBrain
from dbcrew.roles.crew.capabilities import prune
from dbcrew.roles.crew.planner import make_plan
from dbcrew.roles.crew.replanner import diff
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
CATALOGUE = prune(BRIEF, catalogue()).available
ENTRIES = {e.name: e for e in CATALOGUE}
FIRST_PLAN = make_plan(
    RulesBrain(), PlanRequest(scenario="health", brief=BRIEF, catalogue=CATALOGUE), max_rounds=2
).strategy
FIRST_PLAN_COPY = FIRST_PLAN.model_copy(deep=True)


def params_for(operator: str) -> st.SearchStrategy[dict[str, Any]]:
    """Parameters the operator's model accepts: any subset of its fields, each within its bounds."""
    fields = {}
    for name, info in REGISTRY[operator].params_model.model_fields.items():
        low = next((m.ge for m in info.metadata if isinstance(m, annotated_types.Ge)), 0)
        high = next((m.le for m in info.metadata if isinstance(m, annotated_types.Le)), 10_000)
        numbers = (
            st.integers(int(low), int(high))
            if "int" in str(info.annotation)
            else st.floats(float(low), float(high))
        )
        fields[name] = st.none() | numbers if "None" in str(info.annotation) else numbers
    return st.fixed_dictionaries({}, optional=fields)


def producers(strategy: Strategy, artifact: str, exclude: set[str]) -> list[str]:
    return [
        t.id
        for t in strategy.tasks
        if t.id not in exclude and artifact in ENTRIES[t.operator].produces
    ]


def draw_needs(
    data: st.DataObject, strategy: Strategy, entry: CatalogueEntry, exclude: set[str]
) -> list[str] | None:
    """One producer of each artifact the operator reads, plus any other allowed tasks; None when one is missing."""
    needs: list[str] = []
    for artifact in entry.needs:
        options = producers(strategy, artifact, exclude)
        if not options:
            return None
        needs.append(data.draw(st.sampled_from(options)))
    allowed = [t.id for t in strategy.tasks if t.id not in exclude]
    extra = (
        data.draw(st.lists(st.sampled_from(allowed), max_size=2, unique=True)) if allowed else []
    )
    return sorted(set(needs) | set(extra))


def by_id(strategy: Strategy) -> dict[str, TaskSpec]:
    """Tasks by id, their dependencies as a set (their order means nothing)."""
    return {t.id: t.model_copy(update={"needs": sorted(set(t.needs))}) for t in strategy.tasks}


class PlanEdits(RuleBasedStateMachine):
    @initialize()
    def start(self) -> None:
        self.strategy = FIRST_PLAN
        self.fresh = 0

    def name(self, prefix: str) -> str:
        self.fresh += 1
        return f"{prefix}_{self.fresh}"

    def agent_for(self, data: st.DataObject, role: Role) -> str | None:
        agents = [a.name for a in self.strategy.team if a.role is role]
        return data.draw(st.sampled_from(agents)) if agents else None

    def apply(self, edit: PlanEdit) -> None:
        """Apply one edit; the strategy it was applied to must stay as it was."""
        snapshot = self.strategy.model_copy(deep=True)
        edited = self.strategy.apply(edit)
        assert self.strategy == snapshot
        self.strategy = edited

    @rule(data=st.data())
    def replace(self, data: st.DataObject) -> None:
        task = data.draw(st.sampled_from(self.strategy.tasks))
        old = ENTRIES[task.operator]
        candidates = [
            e
            for e in CATALOGUE
            if set(e.produces) >= set(old.produces)
            and any(a.role is e.role for a in self.strategy.team)
        ]
        entry = data.draw(st.sampled_from(candidates))
        downstream = self.strategy.downstream(task.id)
        needs = draw_needs(data, self.strategy, entry, downstream)
        if needs is None:
            return
        new_id = data.draw(st.sampled_from([task.id, self.name(entry.name)]))
        after = TaskSpec(
            id=new_id,
            agent=self.agent_for(data, entry.role) or "",
            operator=entry.name,
            params=data.draw(params_for(entry.name)),
            needs=needs,
            produces=list(entry.produces),
            optional=task.optional,
        )
        self.apply(PlanEdit(kind=EditKind.REPLACE, task_id=task.id, before=task, after=after))

    @rule(data=st.data())
    def insert(self, data: st.DataObject) -> None:
        entry = data.draw(st.sampled_from(CATALOGUE))
        agent = self.agent_for(data, entry.role)
        needs = draw_needs(data, self.strategy, entry, set())
        if agent is None or needs is None:
            return
        after = TaskSpec(
            id=self.name(entry.name),
            agent=agent,
            operator=entry.name,
            params=data.draw(params_for(entry.name)),
            needs=needs,
            produces=list(entry.produces),
            optional=data.draw(st.booleans()),
        )
        self.apply(PlanEdit(kind=EditKind.INSERT, task_id=after.id, after=after))

    @precondition(lambda self: any(not self.waited_for(t.id) for t in self.strategy.tasks))
    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        task = data.draw(
            st.sampled_from([t for t in self.strategy.tasks if not self.waited_for(t.id)])
        )
        self.apply(PlanEdit(kind=EditKind.REMOVE, task_id=task.id, before=task))

    def waited_for(self, task_id: str) -> bool:
        return any(task_id in t.needs for t in self.strategy.tasks)

    @rule(data=st.data())
    def reorder(self, data: st.DataObject) -> None:
        task = data.draw(st.sampled_from(self.strategy.tasks))
        needs = draw_needs(
            data, self.strategy, ENTRIES[task.operator], self.strategy.downstream(task.id)
        )
        if needs is None:
            return
        after = task.model_copy(update={"needs": needs})
        self.apply(PlanEdit(kind=EditKind.REORDER, task_id=task.id, before=task, after=after))

    @rule(data=st.data())
    def change_params(self, data: st.DataObject) -> None:
        task = data.draw(st.sampled_from(self.strategy.tasks))
        after = task.model_copy(update={"params": data.draw(params_for(task.operator))})
        self.apply(PlanEdit(kind=EditKind.CHANGE_PARAMS, task_id=task.id, before=task, after=after))

    @rule(role=st.sampled_from(Role))
    def add_agent(self, role: Role) -> None:
        agent = AgentSpec(name=self.name(f"extra-{role.value}"), role=role, goal="help")
        self.apply(PlanEdit(kind=EditKind.ADD_AGENT, agent=agent))

    @invariant()
    def the_plan_validates(self) -> None:
        assert validate(self.strategy, CATALOGUE) == []
        assert nx.is_directed_acyclic_graph(self.strategy.graph())

    @invariant()
    def the_first_plan_is_untouched(self) -> None:
        assert FIRST_PLAN == FIRST_PLAN_COPY

    @invariant()
    def the_diff_rebuilds_the_plan(self) -> None:
        rebuilt = FIRST_PLAN.apply_all(diff(FIRST_PLAN, self.strategy))
        assert by_id(rebuilt) == by_id(self.strategy)
        assert {(a.name, a.role) for a in rebuilt.team} == {
            (a.name, a.role) for a in self.strategy.team
        }
        assert validate(rebuilt, CATALOGUE) == []


PlanEdits.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_any_sequence_of_valid_edits_keeps_a_valid_plan = PlanEdits.TestCase
