"""Limits of one agent loop's work (calls, tokens, seconds, steps per agent, samples) and their tally:
an LLM diagnosis's experts share one budget, an ask question's look-ups have their own.

A budget that runs out stops the loop cleanly between two calls: in a diagnosis the causes the
experts already had validated stay, the rest is the rules', and the report says which limit it was.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from dbcrew.errors import DbcrewError
from dbcrew.settings.environment import Environment, environment


def _default(field: str) -> Any:
    """A limit's default: its environment variable's (dbcrew.settings.environment.Environment says each once)."""
    return Environment.model_fields[field].default


@dataclass(frozen=True)
class AgentLimits:
    calls: int = _default("llm_diag_calls")
    tokens: int = _default("llm_diag_tokens")
    seconds: float = _default("llm_diag_seconds")
    steps: int = _default("llm_diag_steps")
    samples: int = _default("llm_diag_samples")
    experts: int = _default("llm_diag_experts")
    observation_chars: int = _default("llm_observation_chars")

    @classmethod
    def from_env(cls) -> AgentLimits:
        """DBCREW_LLM_DIAG_CALLS, _TOKENS, _SECONDS, _STEPS, _SAMPLES, _EXPERTS and DBCREW_LLM_OBSERVATION_CHARS
        (0: never cut an observation); UsageError in one line for a value that is not a positive number."""
        env = environment()
        return cls(
            calls=env.llm_diag_calls,
            tokens=env.llm_diag_tokens,
            seconds=env.llm_diag_seconds,
            steps=env.llm_diag_steps,
            samples=env.llm_diag_samples,
            experts=env.llm_diag_experts,
            observation_chars=env.llm_observation_chars,
        )


class BudgetExhausted(DbcrewError):
    """A limit of an agent loop ran out (a diagnosis's experts, ask's look-ups); its message names which."""


@dataclass
class Budget:
    limits: AgentLimits
    calls: int = 0
    tokens: int = 0
    started: float = field(default_factory=time.monotonic)

    def remaining_seconds(self) -> float:
        return self.limits.seconds - (time.monotonic() - self.started)

    def check(self) -> None:
        """BudgetExhausted before a call the budget cannot pay for."""
        if self.calls >= self.limits.calls:
            raise BudgetExhausted(f"calls: {self.calls} of {self.limits.calls} spent")
        if self.tokens >= self.limits.tokens:
            raise BudgetExhausted(f"tokens: {self.tokens} of {self.limits.tokens} spent")
        if self.remaining_seconds() <= 0:
            raise BudgetExhausted(f"seconds: {self.limits.seconds:g} s spent")

    def spend(self, prompt_tokens: int, completion_tokens: int) -> None:
        self.calls += 1
        self.tokens += prompt_tokens + completion_tokens
