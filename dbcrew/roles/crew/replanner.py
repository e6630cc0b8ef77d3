"""Gap-narrow re-planning: the smallest change to the strategy that closes the gap the monitor found.

The brain proposes a new strategy; the difference from the old one is read as plan edits
(replace, insert, remove, reorder, change parameters, add an agent). Each edit is checked against
the rules that keep a re-plan small:
  1. touch only the failed task's subgraph (the failed task and what depends on it);
  2. keep completed tasks whose inputs did not change;
  3. prefer editing a task to adding an agent (an agent of the same role already in the team
     takes the task instead).
A proposal with refused edits is regenerated (the brain is told what was refused and why) at most
`max_regenerations` times; what a regenerated proposal adds to the accepted edits is kept. Then
each accepted edit must improve the plan (ROMAS Algorithm 1, lines 11-14): the plan's score is
(whether the failed task still runs as it failed, how many validator problems it has), and an edit
that does not lower it is dropped and recorded; a supporting edit (an added agent, an inserted
task) stays only if the plan without it scores worse. Accepted edits are applied to a copy of the
old strategy, and the result is validated like any plan (and reflected on, when reflection is on).
Without gap narrowing (an ablation) the brain's whole proposal is taken, and the crew reruns everything.

Memory comes first. A lesson for the failed operator and its error class on this target (recalled
by the caller) is applied as the re-plan's edit without asking the brain, through the same
gap-narrow rules and improvement check; the brain is asked only when no remembered fix improves the
plan. And the run's short-term memory is read: a plan that brings back a call that already failed in
this run (`request.failed_before`) does not improve on it, so no re-plan repeats a failed fix.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx

from dbcrew.llm.base import Brain
from dbcrew.models import Strategy
from dbcrew.models.crew import ReplanRequest
from dbcrew.models.plan import EditKind, PlanEdit
from dbcrew.roles.crew.memory import Lesson, apply_lessons, repeats
from dbcrew.roles.crew.planner import as_plan_request, reflect_until_valid
from dbcrew.roles.crew.validators import validate
from dbcrew.vocabulary import EditSource

# Applying in this order keeps every intermediate plan's references meaningful.
APPLY_ORDER = (
    EditKind.ADD_AGENT,
    EditKind.REPLACE,
    EditKind.INSERT,
    EditKind.CHANGE_PARAMS,
    EditKind.REORDER,
    EditKind.REMOVE,
)


@dataclass
class Replanned:
    strategy: Strategy
    edits: list[PlanEdit] = field(default_factory=list)
    rejected: list[str] = field(
        default_factory=list
    )  # proposed edits refused or dropped as not improving, and why
    regenerations: int = (
        0  # proposals asked again because the gap-narrow rules refused some of their edits
    )


def diff(
    old: Strategy, new: Strategy, source: EditSource = EditSource.REPLAN, reason: str = ""
) -> list[PlanEdit]:
    """The plan edits that turn `old` into `new`, in the order they can be applied."""
    old_tasks = {t.id: t for t in old.tasks}
    new_tasks = {t.id: t for t in new.tasks}
    edits = [
        PlanEdit(kind=EditKind.ADD_AGENT, agent=a, source=source, reason=reason)
        for a in new.team
        if old.agent(a.name) is None
    ]
    inserted = [i for i in new_tasks if i not in old_tasks]
    renamed: dict[str, str] = {}
    for old_id in (i for i in old_tasks if i not in new_tasks):
        # A task that took over what the removed one produced replaces it; anything else is a removal.
        partner = next(
            (
                i
                for i in inserted
                if set(new_tasks[i].produces) == set(old_tasks[old_id].produces)
                and i not in renamed.values()
            ),
            None,
        )
        if partner is not None:
            renamed[old_id] = partner
            edits.append(
                PlanEdit(
                    kind=EditKind.REPLACE,
                    task_id=old_id,
                    before=old_tasks[old_id],
                    after=new_tasks[partner],
                    source=source,
                    reason=reason,
                )
            )
        else:
            edits.append(
                PlanEdit(
                    kind=EditKind.REMOVE,
                    task_id=old_id,
                    before=old_tasks[old_id],
                    source=source,
                    reason=reason,
                )
            )
    edits += [
        PlanEdit(kind=EditKind.INSERT, task_id=i, after=new_tasks[i], source=source, reason=reason)
        for i in inserted
        if i not in renamed.values()
    ]
    for task_id in (i for i in old_tasks if i in new_tasks):
        before, after = old_tasks[task_id], new_tasks[task_id]
        needs_before = [renamed.get(n, n) for n in before.needs]
        same_call = (before.operator, before.agent, before.produces, before.optional) == (
            after.operator,
            after.agent,
            after.produces,
            after.optional,
        )
        if not same_call or (before.params != after.params and needs_before != after.needs):
            kind = EditKind.REPLACE
        elif before.params != after.params:
            kind = EditKind.CHANGE_PARAMS
        elif set(needs_before) != set(after.needs):
            kind = EditKind.REORDER
        else:
            continue
        edits.append(PlanEdit.of_task(kind, before, after, source, reason))
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
                refused.append(
                    f"add_agent {edit.agent.name}: {existing.name} has the {edit.agent.role.value} role already;"
                    " its tasks go to it instead"
                )
                continue
            accepted.append(edit)
            continue
        if edit.after is not None and edit.after.agent in reassign:
            edit = edit.model_copy(
                update={
                    "after": edit.after.model_copy(update={"agent": reassign[edit.after.agent]})
                }
            )
            if edit.after == edit.before:
                continue  # the task only moved to the refused agent: with its own agent it needs no edit
        if edit.kind is EditKind.INSERT:
            accepted.append(edit)
            continue
        if edit.task_id not in allowed:
            refused.append(
                f"{edit.kind.value} {edit.task_id}: outside the failed subgraph of {request.failed}"
            )
            continue
        inputs_changed = edit.task_id in graph and bool(nx.ancestors(graph, edit.task_id) & edited)
        if edit.task_id in completed and not inputs_changed:
            refused.append(
                f"{edit.kind.value} {edit.task_id}: completed, and its inputs did not change"
            )
            continue
        edited.add(edit.task_id)
        accepted.append(edit)
    return accepted, refused


def regenerated(
    brain: Brain, request: ReplanRequest, reason: str, max_regenerations: int
) -> tuple[list[PlanEdit], list[str], int]:
    """The accepted edits of the brain's proposal and of its regenerations, the refusals left, and how many regenerations it took.

    A proposal is asked again, told what was refused and why, while something is refused, at most
    `max_regenerations` times, and no longer once a regeneration is refused the same way.
    """
    accepted, refused = narrow(
        request, diff(request.strategy, brain.replan(request), reason=reason)
    )
    rounds = 0
    while refused and rounds < max_regenerations:
        rounds += 1
        again, still = narrow(
            request,
            diff(
                request.strategy,
                brain.replan(request.model_copy(update={"refused": refused})),
                reason=f"{reason}, regenerated",
            ),
        )
        touched = {(e.kind, e.task_id, e.agent.name if e.agent else None) for e in accepted}
        accepted += [
            e
            for e in again
            if (e.kind, e.task_id, e.agent.name if e.agent else None) not in touched
        ]
        if still == refused:
            break
        refused = still
    return sorted(accepted, key=lambda e: APPLY_ORDER.index(e.kind)), refused, rounds


SUPPORTING = (EditKind.ADD_AGENT, EditKind.INSERT)


def score(request: ReplanRequest, strategy: Strategy) -> tuple[int, int]:
    """Lower is better: (1 while the failed task would run again exactly as it failed, or the plan
    brings back a call that already failed in this run; the validators' problems)."""
    failed = request.strategy.task(request.failed)
    same = next((t for t in strategy.tasks if t.id == failed.id), None)
    still = same is not None and (same.operator, same.agent, same.params, same.needs) == (
        failed.operator,
        failed.agent,
        failed.params,
        failed.needs,
    )
    done = set(request.completed)
    again = any(
        repeats(t, request.failed_before)
        for t in strategy.tasks
        if t.id not in done and t not in request.strategy.tasks
    )
    return int(still or again), len(validate(strategy, request.catalogue))


def improving(request: ReplanRequest, edits: list[PlanEdit]) -> tuple[list[PlanEdit], list[str]]:
    """The edits that improve the plan, and a record of each one dropped because it did not."""
    supporting = [e for e in edits if e.kind in SUPPORTING]
    current = request.strategy.apply_all(supporting)
    best = score(request, current)
    kept: list[PlanEdit] = []
    pending = [e for e in edits if e.kind not in SUPPORTING]
    progress = True
    while (
        progress
    ):  # passes until none improves: removing a dependent helps only once its upstream is gone
        progress = False
        for edit in list(pending):
            candidate = current.apply(edit)
            if (now := score(request, candidate)) < best:
                kept.append(edit)
                pending.remove(edit)
                current, best, progress = candidate, now, True
    dropped = [
        f"{e.kind.value} {e.task_id}: does not improve the plan (score {score(request, current.apply(e))} against {best})"
        for e in pending
    ]
    for edit in supporting:
        without = request.strategy.apply_all([e for e in supporting if e is not edit] + kept)
        if score(request, without) > best:
            kept.append(edit)
        else:
            dropped.append(
                f"{edit.kind.value} {edit.task_id or (edit.agent.name if edit.agent else '')}: does not improve the plan"
            )
    return sorted(kept, key=lambda e: APPLY_ORDER.index(e.kind)), dropped


def replan(
    brain: Brain,
    request: ReplanRequest,
    max_rounds: int,
    *,
    gap_narrow: bool = True,
    reflection: bool = True,
    max_regenerations: int = 2,
    remembered: list[Lesson] | None = None,
) -> Replanned:
    """The re-planned strategy: a `remembered` fix (long-term memory: the failed operator's lessons for its
    error class) when one improves the plan, else the brain's; one the brain cannot make valid becomes
    the rules brain's, through its fall-back."""
    if remembered and gap_narrow:
        from_memory = _remembered(request, remembered)
        if from_memory is not None:
            return from_memory
    return brain.with_fallback(
        "re-plan",
        lambda planner: _replan(
            planner, request, max_rounds, gap_narrow, reflection, max_regenerations
        ),
    )


def _remembered(request: ReplanRequest, lessons: list[Lesson]) -> Replanned | None:
    """The first remembered fix that the gap-narrow rules accept and that improves the plan, applied to
    the failed task; None when none does."""
    for lesson in lessons:
        _, edits = apply_lessons(request.strategy, [lesson], request.catalogue, request.failed)
        accepted, refused = narrow(request, edits)
        kept, dropped = improving(request, accepted)
        if not kept:
            continue
        strategy = request.strategy.apply_all(kept)
        return Replanned(
            strategy=strategy.model_copy(update={"round": request.strategy.round + 1}),
            edits=kept,
            rejected=refused + dropped,
        )
    return None


def _replan(
    brain: Brain,
    request: ReplanRequest,
    max_rounds: int,
    gap_narrow: bool,
    reflection: bool,
    max_regenerations: int,
) -> Replanned:
    why = "; ".join(r.detail for r in request.recommendations if r.detail)
    reason = f"re-plan after {request.failed} failed" + (f" ({why})" if why else "")
    rounds = 0
    if gap_narrow:
        accepted, refused, rounds = regenerated(brain, request, reason, max_regenerations)
        accepted, dropped = improving(request, accepted)
        refused += dropped
        strategy = request.strategy.apply_all(accepted)  # a copy: the old plan stays as it was
    else:
        proposed = brain.replan(request)
        accepted, refused, strategy = diff(request.strategy, proposed, reason=reason), [], proposed
    if reflection:
        reflected = reflect_until_valid(brain, as_plan_request(request), strategy, max_rounds)
        if reflected.rounds:
            strategy = reflected.strategy
            accepted = diff(request.strategy, strategy, reason=f"{reason}, after reflection")
    return Replanned(
        strategy=strategy.model_copy(update={"round": request.strategy.round + 1}),
        edits=accepted,
        rejected=refused,
        regenerations=rounds,
    )
