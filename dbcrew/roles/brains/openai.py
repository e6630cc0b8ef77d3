"""The LLM brain: the roles' questions asked of any OpenAI-compatible endpoint through one client.

When the endpoint stays unusable for a question (timeouts, 429 after the client's own retries,
garbage after the repairs), the rules brain answers that question instead. An endpoint that did
not answer at all (timeout, connection error), or a run whose LLM time budget is spent
(DBCREW_LLM_BUDGET), is not asked again in the run: every later question
goes straight to the rules, so a dead or slow endpoint costs a review one request's time, not one
per question. A plan the model cannot make valid (an operator outside the allowlist, an empty plan,
a critique that never agrees) is replaced by the rules plan (`with_fallback`). Questions and
fall-backs are counted in the same `usage` as the client's calls and tokens, so the report can
say which brain answered.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel

from dbcrew.llm.base import Brain, BrainError, BudgetSpent, EndpointDown
from dbcrew.llm.client import LlmClient, Render
from dbcrew.logs import data_logger
from dbcrew.models import Finding, Strategy
from dbcrew.models.crew import Alert, PlanRequest, Problem, Recommendation, ReplanRequest
from dbcrew.models.report import CoverageEntry, GlobalStateRecord
from dbcrew.roles.brains.rules import RulesBrain
from dbcrew.text.untrusted import model_text
from dbcrew.vocabulary import Action, Scenario

log = data_logger(__name__)
Model = TypeVar("Model", bound=BaseModel)
T = TypeVar("T")
# Tokens an answer to each question may take: room for the largest valid answer, not for a model
# that never stops (llama.cpp and Ollama default to unbounded output). The rules' full plan (32
# tasks) is 6.5 KB of JSON, about 2,200 tokens at JSON's three characters a token.
ANSWER_TOKENS = {
    "plan.j2": 4096,
    "reflect.j2": 4096,
    "replan.j2": 4096,
    "critique.j2": 800,
    "recommend.j2": 800,
    "summarize.j2": 400,
}
DEFAULT_ANSWER_TOKENS = 800


class Problems(BaseModel):
    """A critique: the list is required, so an empty object or a cut-off echo of the schema is no
    critique at all (asked again, then the rules'), never "no problems"."""

    problems: list[Problem]


class Recommendations(BaseModel):
    recommendations: list[Recommendation]


class Summary(BaseModel):
    text: str


class OpenAIBrain(Brain):
    name = "openai"

    def __init__(self, render: Render, **client_options: Any):
        super().__init__()
        self.client = LlmClient(render, **client_options)
        self.usage = self.client.usage
        self._fallback = RulesBrain()
        self._down = ""  # why the endpoint stopped answering, once it did

    def ask(self, template: str, context: dict[str, Any], model: type[Model]) -> Model:
        """One validated answer to `template`, bounded by its ANSWER_TOKENS."""
        return self.client.ask(
            template, context, model, ANSWER_TOKENS.get(template, DEFAULT_ANSWER_TOKENS)
        )

    @property
    def down(self) -> str:
        """Why the endpoint stopped answering in this run; empty while it answers."""
        return self._down

    def count_question(self, fell_back: bool, down: str = "") -> None:
        """A question asked outside `_or_fallback` (the LLM diagnosis), counted the same way."""
        self.usage.questions += 1
        self.usage.fallbacks += fell_back
        self._down = self._down or down

    def answered_by(self) -> str:
        """Which brain answered the run's questions, and why the rules answered any of them when
        the endpoint was not asked again (down, or the run's LLM time budget spent)."""
        asked, fell = self.usage.questions, self.usage.fallbacks
        why = f" ({self._down})" if self._down else ""
        if fell == 0:
            return self.name
        if fell == asked:
            return f"rules ({self.name} gave no usable answer to any of {asked} questions){why}"
        return f"{self.name}, {fell} of {asked} questions fell back to rules{why}"

    def _or_fallback(
        self, what: str, call: Callable[[], Model], fallback: Callable[[], Model]
    ) -> Model:
        self.usage.questions += 1
        if self._down:
            self.usage.fallbacks += 1
            return fallback()
        try:
            return call()
        except BrainError as exc:
            self.usage.fallbacks += 1
            if isinstance(exc, EndpointDown | BudgetSpent):
                self._down = str(exc)
                log.warning(
                    "LLM endpoint did not answer (%s): the rules brain answers the rest of the run",
                    exc,
                )
            else:
                log.warning(
                    "LLM brain could not %s (%s); the rules brain answered instead", what, exc
                )
            return fallback()

    def with_fallback(self, what: str, attempt: Callable[[Brain], T]) -> T:
        asked, fell = self.usage.questions, self.usage.fallbacks
        try:
            return attempt(self)
        except BrainError as exc:
            # Every answer the attempt used is thrown away: each of its questions fell back.
            self.usage.fallbacks = fell + (self.usage.questions - asked)
            log.warning("LLM brain could not %s (%s); the rules brain did instead", what, exc)
            return attempt(self._fallback)

    def plan(self, request: PlanRequest) -> Strategy:
        context = {
            "scenario": request.scenario,
            "brief": request.brief.model_dump(),
            "catalogue": _catalogue(request),
            "alert": request.alert,
            "constraints": request.constraints,
        }
        return self._or_fallback(
            "plan",
            lambda: self.ask("plan.j2", context, Strategy),
            lambda: self._fallback.plan(request),
        )

    def reflect(
        self, request: PlanRequest, strategy: Strategy, problems: list[Problem]
    ) -> Strategy:
        context = {
            "scenario": request.scenario,
            "strategy": strategy.model_dump(),
            "catalogue": _catalogue(request),
            "problems": [p.model_dump() for p in problems],
        }
        fixed = self._or_fallback(
            "reflect",
            lambda: self.ask("reflect.j2", context, Strategy),
            lambda: self._fallback.reflect(request, strategy, problems),
        )
        return fixed.model_copy(update={"round": strategy.round + 1})

    def critique(self, request: PlanRequest, strategy: Strategy) -> list[Problem]:
        context = {
            "scenario": request.scenario,
            "brief": request.brief.model_dump(),
            "strategy": strategy.model_dump(),
        }
        answer = self._or_fallback(
            "critique",
            lambda: self.ask("critique.j2", context, Problems),
            lambda: Problems(problems=[]),
        )
        return answer.problems

    def recommend(
        self, alert: Alert, leaf: str, action: Action, state: GlobalStateRecord | None = None
    ) -> list[Recommendation]:
        context = {
            "alert": alert.model_dump(),
            "leaf": leaf,
            "action": action,
            "state": state.model_dump() if state else None,
        }
        answer = self._or_fallback(
            "recommend",
            lambda: self.ask("recommend.j2", context, Recommendations),
            lambda: Recommendations(
                recommendations=self._fallback.recommend(alert, leaf, action, state)
            ),
        )
        return answer.recommendations

    def replan(self, request: ReplanRequest) -> Strategy:
        context = {"request": json.loads(request.model_dump_json())}
        return self._or_fallback(
            "re-plan",
            lambda: self.ask("replan.j2", context, Strategy),
            lambda: self._fallback.replan(request),
        )

    def summarize(
        self,
        scenario: Scenario,
        findings: list[Finding],
        coverage: list[CoverageEntry],
        compared: str = "",
    ) -> str:
        return self._asked_summary(
            scenario,
            findings,
            coverage,
            lambda: Summary(text=self._fallback.summarize(scenario, findings, coverage, compared)),
        )

    def summaries(
        self,
        scenario: Scenario,
        findings: list[Finding],
        coverage: list[CoverageEntry],
        compared: str = "",
    ) -> tuple[str, str]:
        """The rules' summary, and the model's beside it as sanitized data ("" when it gave none)."""
        said = self._asked_summary(scenario, findings, coverage, lambda: Summary(text=""))
        return self._fallback.summarize(scenario, findings, coverage, compared), said

    def _asked_summary(
        self,
        scenario: Scenario,
        findings: list[Finding],
        coverage: list[CoverageEntry],
        fallback: Callable[[], Summary],
    ) -> str:
        """The model's summary of the findings, sanitized as data; `fallback`'s when the model fails."""
        context = {
            "scenario": scenario,
            "findings": [f.model_dump(mode="json") for f in findings],
            "coverage": [c.model_dump(mode="json") for c in coverage],
        }
        answer = self._or_fallback(
            "summarize", lambda: self.ask("summarize.j2", context, Summary), fallback
        )
        return model_text(answer.text)


def _catalogue(request: PlanRequest) -> list[dict[str, Any]]:
    return [
        e.model_dump(include={"name", "role", "category", "description", "needs", "produces"})
        for e in request.catalogue
    ]
