"""A brain backed by any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp server).

Every answer is parsed into a pydantic model. A malformed, fenced or wrong-schema answer is
repaired by asking again with the error (RCAgent's regeneration), at most `max_repairs` times. When
the endpoint stays unusable (timeouts, 429 after the client's own retries, garbage), the call falls
back to the rules brain, and the review says which brain answered.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable
from typing import Any, TypeVar

import openai
from pydantic import BaseModel, Field, ValidationError

from dbcrew.llm.base import Brain
from dbcrew.llm.rules import RulesBrain
from dbcrew.models import Finding, Strategy
from dbcrew.models.crew import Alert, PlanRequest, Problem, Recommendation, ReplanRequest
from dbcrew.models.report import CoverageEntry

log = logging.getLogger(__name__)
Model = TypeVar("Model", bound=BaseModel)
_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


class BrainError(Exception):
    """The endpoint gave no usable answer."""


class Problems(BaseModel):
    problems: list[Problem] = Field(default_factory=list)


class Recommendations(BaseModel):
    recommendations: list[Recommendation]


class Summary(BaseModel):
    text: str


def strip_fences(text: str) -> str:
    match = _FENCE.match(text)
    return match.group(1) if match else text.strip()


class OpenAIBrain(Brain):
    name = "openai"

    def __init__(self, render: Callable[[str, dict[str, Any]], str], *, base_url: str | None = None,
                 api_key: str | None = None, model: str | None = None, timeout: float = 60.0, max_repairs: int = 2):
        super().__init__()
        self._render = render
        self._model = model or os.environ.get("DBCREW_LLM_MODEL", "gpt-4o-mini")
        self._client = openai.OpenAI(
            base_url=base_url or os.environ.get("DBCREW_LLM_BASE_URL") or None,
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or "not-needed",
            timeout=timeout,
            max_retries=2,
        )
        self._max_repairs = max_repairs
        self._fallback = RulesBrain()
        self.fallbacks = 0

    def ask(self, template: str, context: dict[str, Any], model: type[Model]) -> Model:
        """One answer as a validated `model`, regenerated with the validation error when it is not
        (RCAgent's repair); BrainError when the endpoint fails or no repair validates. Every role
        call goes through here, and so does knowledge extraction."""
        messages: list[dict[str, str]] = [
            {"role": "system", "content": self._render("system.j2", {})},
            {"role": "user", "content": self._render(template, {**context, "schema": model.model_json_schema()})},
        ]
        error = ""
        for _ in range(self._max_repairs + 1):
            try:
                response = self._client.chat.completions.create(model=self._model, messages=messages, temperature=0)  # type: ignore[arg-type]
            except openai.APIError as exc:
                raise BrainError(f"{type(exc).__name__}: {exc}") from exc
            self.usage.calls += 1
            if response.usage is not None:
                self.usage.prompt_tokens += response.usage.prompt_tokens
                self.usage.completion_tokens += response.usage.completion_tokens
            text = response.choices[0].message.content or "" if response.choices else ""
            try:
                return model.model_validate_json(strip_fences(text))
            except ValidationError as exc:
                error = str(exc).splitlines()[0] + ": " + "; ".join(e["msg"] for e in exc.errors()[:3])
                messages += [{"role": "assistant", "content": text}, {"role": "user", "content": self._render("repair.j2", {"error": error})}]
        raise BrainError(f"no valid answer after {self._max_repairs} repairs: {error}")

    def _or_fallback(self, what: str, call: Callable[[], Model], fallback: Callable[[], Any]) -> Any:
        try:
            return call()
        except BrainError as exc:
            self.fallbacks += 1
            log.warning("LLM brain could not %s (%s); the rules brain answered instead", what, exc)
            return fallback()

    def plan(self, request: PlanRequest) -> Strategy:
        context = {"scenario": request.scenario, "brief": request.brief.model_dump(), "catalogue": _catalogue(request)}
        return self._or_fallback("plan", lambda: self.ask("plan.j2", context, Strategy), lambda: self._fallback.plan(request))

    def reflect(self, request: PlanRequest, strategy: Strategy, problems: list[Problem]) -> Strategy:
        context = {"scenario": request.scenario, "strategy": strategy.model_dump(), "catalogue": _catalogue(request),
                   "problems": [p.model_dump() for p in problems]}
        fixed = self._or_fallback("reflect", lambda: self.ask("reflect.j2", context, Strategy),
                                  lambda: self._fallback.reflect(request, strategy, problems))
        return fixed.model_copy(update={"round": strategy.round + 1})

    def critique(self, request: PlanRequest, strategy: Strategy) -> list[Problem]:
        context = {"scenario": request.scenario, "brief": request.brief.model_dump(), "strategy": strategy.model_dump()}
        answer = self._or_fallback("critique", lambda: self.ask("critique.j2", context, Problems), lambda: Problems())
        return answer.problems

    def recommend(self, alert: Alert, leaf: str, action: str) -> list[Recommendation]:
        context = {"alert": alert.model_dump(), "leaf": leaf, "action": action}
        answer = self._or_fallback("recommend", lambda: self.ask("recommend.j2", context, Recommendations),
                                   lambda: Recommendations(recommendations=self._fallback.recommend(alert, leaf, action)))
        return answer.recommendations

    def replan(self, request: ReplanRequest) -> Strategy:
        context = {"request": json.loads(request.model_dump_json())}
        return self._or_fallback("re-plan", lambda: self.ask("replan.j2", context, Strategy), lambda: self._fallback.replan(request))

    def summarize(self, scenario: str, findings: list[Finding], coverage: list[CoverageEntry]) -> str:
        context = {"scenario": scenario, "findings": [f.model_dump(mode="json") for f in findings],
                   "coverage": [c.model_dump(mode="json") for c in coverage]}
        answer = self._or_fallback("summarize", lambda: self.ask("summarize.j2", context, Summary),
                                   lambda: Summary(text=self._fallback.summarize(scenario, findings, coverage)))
        return answer.text


def _catalogue(request: PlanRequest) -> list[dict[str, Any]]:
    return [e.model_dump(include={"name", "role", "category", "description", "needs", "produces"}) for e in request.catalogue]
