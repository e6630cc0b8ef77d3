"""The planner: scenario + brief + catalogue -> a validated strategy (with self-reflection)."""

from __future__ import annotations

from dataclasses import dataclass, field

from dbcrew.llm.base import Brain
from dbcrew.models import Strategy
from dbcrew.models.crew import PlanRequest, Problem, ReplanRequest
from roles.validators import validate


class PlanRejected(Exception):
    """The plan still had problems after the allowed reflection rounds."""

    def __init__(self, problems: list[Problem]):
        super().__init__("; ".join(p.message for p in problems[:5]))
        self.problems = problems


@dataclass
class Reflected:
    strategy: Strategy
    rounds: list[list[Problem]] = field(default_factory=list)


def reflect_until_valid(brain: Brain, request: PlanRequest, strategy: Strategy, max_rounds: int) -> Reflected:
    """Validators first, then the brain's critique; at most `max_rounds` corrections."""
    result = Reflected(strategy=strategy)
    for round_no in range(max_rounds + 1):
        problems = validate(result.strategy, request.catalogue) or brain.critique(request, result.strategy)
        if not problems:
            return result
        result.rounds.append(problems)
        if round_no == max_rounds:
            raise PlanRejected(problems)
        result.strategy = brain.reflect(request, result.strategy, problems)
    return result


def make_plan(brain: Brain, request: PlanRequest, max_rounds: int) -> Reflected:
    return reflect_until_valid(brain, request, brain.plan(request), max_rounds)


def as_plan_request(request: ReplanRequest) -> PlanRequest:
    return PlanRequest(scenario=request.scenario, brief=request.brief, catalogue=request.catalogue)
