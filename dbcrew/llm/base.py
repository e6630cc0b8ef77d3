"""The brain interface every implementation answers."""

from __future__ import annotations

from abc import ABC, abstractmethod

from dbcrew.models import Finding, Strategy
from dbcrew.models.crew import Alert, PlanRequest, Problem, Recommendation, ReplanRequest
from dbcrew.models.report import CoverageEntry, LlmUsage
from dbcrew.vocabulary import Action, Scenario


class Brain(ABC):
    name: str

    def __init__(self) -> None:
        self.usage = LlmUsage()

    def answered_by(self) -> str:
        """What report.brain says: this brain's name; a brain that falls back says how often it did."""
        return self.name

    @abstractmethod
    def plan(self, request: PlanRequest) -> Strategy: ...

    @abstractmethod
    def reflect(self, request: PlanRequest, strategy: Strategy, problems: list[Problem]) -> Strategy:
        """Return a corrected strategy for the validators' problems."""

    @abstractmethod
    def critique(self, request: PlanRequest, strategy: Strategy) -> list[Problem]:
        """The brain's own objections to a plan the validators accepted."""

    @abstractmethod
    def recommend(self, alert: Alert, leaf: str, action: Action) -> list[Recommendation]: ...

    @abstractmethod
    def replan(self, request: ReplanRequest) -> Strategy: ...

    @abstractmethod
    def summarize(self, scenario: Scenario, findings: list[Finding], coverage: list[CoverageEntry]) -> str: ...
