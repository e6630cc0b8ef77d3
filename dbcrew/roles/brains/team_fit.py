"""Reflection on the team before it runs (ROMAS's self-reflection, part A), deterministic.

The validators ask whether a plan can run; this asks whether its team fits the run: every signal
the alert names is judged by an operator on the team, every operator the scenario declares for each
of its plans is there, and no agent is idle. The rules brain repairs what it can (adds the missing
operator with what it needs, drops an idle agent); a signal nothing on this target can judge is a gap
the report's coverage states (`uncovered`).
"""

from __future__ import annotations

from dbcrew.models import CatalogueEntry, Strategy
from dbcrew.models.crew import PlanRequest, Problem
from dbcrew.roles.brains.composing import composable, signal_of, signals_named
from dbcrew.vocabulary import ProblemKind


def judges(request: PlanRequest, metric: str) -> list[CatalogueEntry]:
    """The operators this target can run that judge `metric`, among what the scenario draws on."""
    categories = composable(request.scenario)
    return [
        e
        for e in request.catalogue
        if e.category in categories and signal_of(e, metric) is not None
    ]


def team_problems(request: PlanRequest, strategy: Strategy) -> list[Problem]:
    """What keeps the team from fitting the run; [] when it fits."""
    planned = {t.operator for t in strategy.tasks}
    problems = []
    for metric in signals_named(request):
        found = judges(request, metric)
        if found and not any(e.name in planned for e in found):
            problems.append(
                Problem(
                    task_id=found[0].name,
                    kind=ProblemKind.MISSING_CHECK,
                    message=f"{metric}, a signal the alert names, has no expert on the team: {found[0].name} judges it",
                )
            )
    for entry in request.catalogue:
        if request.scenario in entry.planned_for and entry.name not in planned:
            problems.append(
                Problem(
                    task_id=entry.name,
                    kind=ProblemKind.MISSING_CHECK,
                    message=f"every {request.scenario} plan carries {entry.name}, and this one does not",
                )
            )
    busy = {t.agent for t in strategy.tasks}
    problems += [
        Problem(task_id=None, kind=ProblemKind.IDLE_AGENT, message=f"agent {a.name} has no task")
        for a in strategy.team
        if a.name not in busy
    ]
    return problems


def uncovered(request: PlanRequest, strategy: Strategy) -> list[str]:
    """The signals the alert names that no operator on the team judges (a gap to report)."""
    planned = {t.operator for t in strategy.tasks}
    return [
        metric
        for metric in signals_named(request)
        if not any(e.name in planned for e in judges(request, metric))
    ]
