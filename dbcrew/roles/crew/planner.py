"""The planner: scenario + brief + catalogue -> a validated strategy (with self-reflection)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from dbcrew.llm.base import Brain, BrainError
from dbcrew.models import Strategy
from dbcrew.models.crew import PlanRequest, Problem, ReplanRequest
from dbcrew.roles.crew.validators import validate
from dbcrew.vocabulary import ProblemKind

# What no plan may carry into execution, reflection or not: an operator outside the allowlist, or nothing to do.
REFUSED = (ProblemKind.UNKNOWN_OPERATOR, ProblemKind.EMPTY_PLAN)


class PlanRejected(BrainError):
    """The plan still had problems after the allowed reflection rounds (a brain that can falls back to the rules plan)."""

    def __init__(self, problems: list[Problem]):
        super().__init__("; ".join(p.message for p in problems[:5]))
        self.problems = problems


@dataclass
class Reflected:
    strategy: Strategy
    rounds: list[list[Problem]] = field(default_factory=list)


def reflect_until_valid(
    brain: Brain, request: PlanRequest, strategy: Strategy, max_rounds: int
) -> Reflected:
    """Validators first, then the brain's critique; at most `max_rounds` corrections."""
    result = Reflected(strategy=strategy)
    for round_no in range(max_rounds + 1):
        problems = validate(result.strategy, request.catalogue) or brain.critique(
            request, result.strategy
        )
        if not problems:
            return result
        result.rounds.append(problems)
        if round_no == max_rounds:
            raise PlanRejected(problems)
        result.strategy = brain.reflect(request, result.strategy, problems)
    return result


def make_plan(
    brain: Brain,
    request: PlanRequest,
    max_rounds: int,
    *,
    reflection: bool = True,
    draft: Callable[[Strategy], Strategy] = lambda strategy: strategy,
) -> Reflected:
    """The brain's plan (`draft` sees it first: fault injection damages it there), reflected on until
    valid. Without reflection only what no plan may carry is refused. A plan the brain cannot make
    valid becomes the rules plan, through the brain's fall-back."""

    def attempt(planner: Brain) -> Reflected:
        strategy = draft(planner.plan(request))
        if reflection:
            return reflect_until_valid(planner, request, strategy, max_rounds)
        refused = [p for p in validate(strategy, request.catalogue) if p.kind in REFUSED]
        if refused:
            raise PlanRejected(refused)
        return Reflected(strategy=strategy)

    return brain.with_fallback("agree on a plan", attempt)


def as_plan_request(request: ReplanRequest) -> PlanRequest:
    return PlanRequest(
        scenario=request.scenario,
        brief=request.brief,
        catalogue=request.catalogue,
        before_run=False,
    )
