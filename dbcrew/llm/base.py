"""The brain interface every implementation answers."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TypeVar

from dbcrew.errors import DbcrewError
from dbcrew.models import Finding, Strategy
from dbcrew.models.crew import Alert, PlanRequest, Problem, Recommendation, ReplanRequest
from dbcrew.models.report import CoverageEntry, GlobalStateRecord, LlmUsage
from dbcrew.vocabulary import Action, Scenario

T = TypeVar("T")


class BrainError(DbcrewError):
    """The brain gave no usable answer (the endpoint failed, no repair validated, or its plan could not be made valid)."""


class EndpointDown(BrainError):
    """The endpoint did not answer at all (timeout or connection error, after the client's retries)."""


class BudgetSpent(BrainError):
    """The run's LLM time budget is spent: the rules answer every later question of the run."""


class Brain(ABC):
    name: str

    def __init__(self) -> None:
        self.usage = LlmUsage()

    def answered_by(self) -> str:
        """What report.brain says: this brain's name; a brain that falls back says how often it did."""
        return self.name

    def with_fallback(self, what: str, attempt: Callable[[Brain], T]) -> T:
        """`attempt(self)`. A brain that can fall back (the LLM brain) runs `attempt` again with the
        rules brain when it raises BrainError, and records it; the rules brain has nothing to fall
        back to, so the error propagates."""
        return attempt(self)

    @abstractmethod
    def plan(self, request: PlanRequest) -> Strategy: ...

    @abstractmethod
    def reflect(
        self, request: PlanRequest, strategy: Strategy, problems: list[Problem]
    ) -> Strategy:
        """Return a corrected strategy for the validators' problems."""

    @abstractmethod
    def critique(self, request: PlanRequest, strategy: Strategy) -> list[Problem]:
        """The brain's own objections to a plan the validators accepted."""

    @abstractmethod
    def recommend(
        self, alert: Alert, leaf: str, action: Action, state: GlobalStateRecord | None = None
    ) -> list[Recommendation]:
        """What the planner should change: from the alert (with the worker's reflection), the leaf, the default action and the crew's global state."""

    @abstractmethod
    def replan(self, request: ReplanRequest) -> Strategy: ...

    @abstractmethod
    def summarize(
        self,
        scenario: Scenario,
        findings: list[Finding],
        coverage: list[CoverageEntry],
        compared: str = "",
    ) -> str:
        """The summary of a run; `compared` says what a diagnosis compared its window with (a
        baseline, or none) as a clause, "" where nothing was sampled or for a review."""

    def summaries(
        self,
        scenario: Scenario,
        findings: list[Finding],
        coverage: list[CoverageEntry],
        compared: str = "",
    ) -> tuple[str, str]:
        """The report's summary and a model's own summary beside it ("" from a brain without a model).

        The first is always the rules' summary, computed from the findings and the coverage: a
        model's text is data that may be added to it, marked as the model's, never put in its place.
        """
        return self.summarize(scenario, findings, coverage, compared), ""
