"""Gap-narrow re-planning: the smallest change to the strategy that closes the gap the monitor found.

The brain proposes a new strategy; each difference from the old one is checked against the rules
(completed tasks stay as they are; only the failed task's subgraph may change). A difference that
breaks a rule is regenerated from the old plan. The result is validated like any plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel

from dbcrew.llm.base import Brain
from dbcrew.models import Strategy
from dbcrew.models.crew import ReplanRequest
from roles.planner import as_plan_request, reflect_until_valid


class PlanEdit(BaseModel):
    kind: str  # replace | insert | remove | change_params | add_agent
    task_id: str
    detail: str = ""


@dataclass
class Replanned:
    strategy: Strategy
    edits: list[PlanEdit] = field(default_factory=list)
    regenerated: list[str] = field(default_factory=list)


def diff(old: Strategy, new: Strategy) -> list[PlanEdit]:
    old_tasks = {t.id: t for t in old.tasks}
    new_tasks = {t.id: t for t in new.tasks}
    edits = []
    removed = [i for i in old_tasks if i not in new_tasks]
    inserted = [i for i in new_tasks if i not in old_tasks]
    for old_id, new_id in zip(removed, inserted, strict=False):
        edits.append(PlanEdit(kind="replace", task_id=old_id, detail=f"{old_tasks[old_id].operator} -> {new_tasks[new_id].operator}"))
    edits += [PlanEdit(kind="remove", task_id=i, detail=old_tasks[i].operator) for i in removed[len(inserted):]]
    edits += [PlanEdit(kind="insert", task_id=i, detail=new_tasks[i].operator) for i in inserted[len(removed):]]
    for task_id in old_tasks.keys() & new_tasks.keys():
        if old_tasks[task_id].params != new_tasks[task_id].params:
            edits.append(PlanEdit(kind="change_params", task_id=task_id, detail=str(new_tasks[task_id].params)))
    for agent in new.team:
        if old.agent(agent.name) is None:
            edits.append(PlanEdit(kind="add_agent", task_id="", detail=f"{agent.name} ({agent.role})"))
    return edits


def enforce_gap_narrow(request: ReplanRequest, proposed: Strategy) -> tuple[Strategy, list[str]]:
    """Restore every task outside the failed subgraph that the proposal changed or dropped."""
    old = request.strategy
    allowed = old.downstream(request.failed)
    fixed = proposed
    regenerated = []
    for spec in old.tasks:
        if spec.id in allowed:
            continue
        current = next((t for t in fixed.tasks if t.id == spec.id), None)
        if current is None:
            fixed = fixed.insert_task(spec)
            regenerated.append(spec.id)
        elif (current.operator, current.params, current.agent) != (spec.operator, spec.params, spec.agent):
            fixed = fixed.replace_task(spec.id, spec)
            regenerated.append(spec.id)
        if old.agent(spec.agent) is not None and fixed.agent(spec.agent) is None:
            fixed = fixed.add_agent(old.agent(spec.agent))  # type: ignore[arg-type]
    return fixed, regenerated


def replan(brain: Brain, request: ReplanRequest, max_rounds: int) -> Replanned:
    proposed = brain.replan(request)
    narrowed, regenerated = enforce_gap_narrow(request, proposed)
    valid = reflect_until_valid(brain, as_plan_request(request), narrowed, max_rounds).strategy
    return Replanned(strategy=valid, edits=diff(request.strategy, valid), regenerated=regenerated)
