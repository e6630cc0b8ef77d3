"""Gap-narrow re-planning: the smallest change to the strategy that closes the gap the monitor found.

The brain proposes a new strategy; the difference from the old one is read as plan edits
(replace, insert, remove, reorder, change parameters, add an agent). Each edit is checked against
the rules that keep a re-plan small:
  1. touch only the failed task's subgraph (the failed task and what depends on it);
  2. keep completed tasks whose inputs did not change;
  3. prefer editing a task to adding an agent (an agent of the same role already in the team
     takes the task instead).
Accepted edits are applied to a copy of the old strategy, and the result is validated like any
plan (and reflected on, when reflection is on). Without gap narrowing (an ablation) the brain's
whole proposal is taken, and the crew reruns everything.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx

from dbcrew.llm.base import Brain
from dbcrew.models import Strategy
from dbcrew.models.crew import ReplanRequest
from dbcrew.models.plan import EditKind, PlanEdit
from dbcrew.vocabulary import EditSource
from roles.planner import as_plan_request, reflect_until_valid

# Applying in this order keeps every intermediate plan's references meaningful.
APPLY_ORDER = (EditKind.ADD_AGENT, EditKind.REPLACE, EditKind.INSERT, EditKind.CHANGE_PARAMS, EditKind.REORDER,
               EditKind.REMOVE)


@dataclass
class Replanned:
    strategy: Strategy
    edits: list[PlanEdit] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)  # proposed edits the gap-narrow rules refused, and why


def diff(old: Strategy, new: Strategy, source: EditSource = EditSource.REPLAN, reason: str = "") -> list[PlanEdit]:
    """The plan edits that turn `old` into `new`, in the order they can be applied."""
    old_tasks = {t.id: t for t in old.tasks}
    new_tasks = {t.id: t for t in new.tasks}
    edits = [PlanEdit(kind=EditKind.ADD_AGENT, agent=a, source=source, reason=reason)
             for a in new.team if old.agent(a.name) is None]
    inserted = [i for i in new_tasks if i not in old_tasks]
    renamed: dict[str, str] = {}
    for old_id in (i for i in old_tasks if i not in new_tasks):
        # A task that took over what the removed one produced replaces it; anything else is a removal.
        partner = next((i for i in inserted if set(new_tasks[i].produces) == set(old_tasks[old_id].produces)
                        and i not in renamed.values()), None)
        if partner is not None:
            renamed[old_id] = partner
            edits.append(PlanEdit(kind=EditKind.REPLACE, task_id=old_id, before=old_tasks[old_id], after=new_tasks[partner],
                                  source=source, reason=reason))
        else:
            edits.append(PlanEdit(kind=EditKind.REMOVE, task_id=old_id, before=old_tasks[old_id], source=source, reason=reason))
    edits += [PlanEdit(kind=EditKind.INSERT, task_id=i, after=new_tasks[i], source=source, reason=reason)
              for i in inserted if i not in renamed.values()]
    for task_id in (i for i in old_tasks if i in new_tasks):
        before, after = old_tasks[task_id], new_tasks[task_id]
        needs_before = [renamed.get(n, n) for n in before.needs]
        same_call = (before.operator, before.agent, before.produces, before.optional) == \
            (after.operator, after.agent, after.produces, after.optional)
        if not same_call or (before.params != after.params and needs_before != after.needs):
            kind = EditKind.REPLACE
        elif before.params != after.params:
            kind = EditKind.CHANGE_PARAMS
        elif set(needs_before) != set(after.needs):
            kind = EditKind.REORDER
        else:
            continue
        edits.append(PlanEdit(kind=kind, task_id=task_id, before=before, after=after, source=source, reason=reason))
    return sorted(edits, key=lambda e: APPLY_ORDER.index(e.kind))


def narrow(request: ReplanRequest, edits: list[PlanEdit]) -> tuple[list[PlanEdit], list[str]]:
    """Accept the edits that respect the gap-narrow rules; say why each other one was refused."""
    old = request.strategy
    allowed = old.downstream(request.failed)
    completed = set(request.completed)
    graph = old.graph()
    edited: set[str] = set()
    reassign: dict[str, str] = {}
    accepted: list[PlanEdit] = []
    refused: list[str] = []
    for edit in edits:
        if edit.kind is EditKind.ADD_AGENT:
            assert edit.agent is not None
            existing = next((a for a in old.team if a.role == edit.agent.role), None)
            if existing is not None:
                reassign[edit.agent.name] = existing.name
                refused.append(f"add_agent {edit.agent.name}: {existing.name} has the {edit.agent.role.value} role already;"
                               " its tasks go to it instead")
                continue
            accepted.append(edit)
            continue
        if edit.after is not None and edit.after.agent in reassign:
            edit = edit.model_copy(update={"after": edit.after.model_copy(update={"agent": reassign[edit.after.agent]})})
            if edit.after == edit.before:
                continue  # the task only moved to the refused agent: with its own agent it needs no edit
        if edit.kind is EditKind.INSERT:
            accepted.append(edit)
            continue
        if edit.task_id not in allowed:
            refused.append(f"{edit.kind.value} {edit.task_id}: outside the failed subgraph of {request.failed}")
            continue
        inputs_changed = edit.task_id in graph and bool(nx.ancestors(graph, edit.task_id) & edited)
        if edit.task_id in completed and not inputs_changed:
            refused.append(f"{edit.kind.value} {edit.task_id}: completed, and its inputs did not change")
            continue
        edited.add(edit.task_id)
        accepted.append(edit)
    return accepted, refused


def replan(brain: Brain, request: ReplanRequest, max_rounds: int, *, gap_narrow: bool = True,
           reflection: bool = True) -> Replanned:
    """The re-planned strategy; one the brain cannot make valid becomes the rules brain's, through its fall-back."""
    return brain.with_fallback("re-plan", lambda planner: _replan(planner, request, max_rounds, gap_narrow, reflection))


def _replan(brain: Brain, request: ReplanRequest, max_rounds: int, gap_narrow: bool, reflection: bool) -> Replanned:
    proposed = brain.replan(request)
    why = "; ".join(r.detail for r in request.recommendations if r.detail)
    reason = f"re-plan after {request.failed} failed" + (f" ({why})" if why else "")
    edits = diff(request.strategy, proposed, reason=reason)
    if gap_narrow:
        accepted, refused = narrow(request, edits)
        strategy = request.strategy.apply_all(accepted)  # a copy: the old plan stays as it was
    else:
        accepted, refused, strategy = edits, [], proposed
    if reflection:
        reflected = reflect_until_valid(brain, as_plan_request(request), strategy, max_rounds)
        if reflected.rounds:
            strategy = reflected.strategy
            accepted = diff(request.strategy, strategy, reason=f"{reason}, after reflection")
    return Replanned(strategy=strategy.model_copy(update={"round": request.strategy.round + 1}), edits=accepted,
                     rejected=refused)
