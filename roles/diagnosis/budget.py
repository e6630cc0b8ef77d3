"""Limits of one LLM diagnosis (calls, tokens, seconds, steps per expert, samples) and their tally.

A budget that runs out stops the experts cleanly between two calls: the causes they already had
validated stay, the rest of the diagnosis is the rules', and the report says which limit it was.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field

from dbcrew.errors import DbcrewError, UsageError


@dataclass(frozen=True)
class DiagnosisLimits:
    calls: int = 30
    tokens: int = 60_000
    seconds: float = 180.0
    steps: int = 8
    samples: int = 1
    experts: int = 3
    observation_chars: int = 1_200

    @classmethod
    def from_env(cls) -> DiagnosisLimits:
        """DBCREW_LLM_DIAG_CALLS, _TOKENS, _SECONDS, _STEPS, _SAMPLES, _EXPERTS and DBCREW_LLM_OBSERVATION_CHARS
        (0: never cut an observation); UsageError in one line for a value that is not a positive number."""
        default = cls()
        values: dict[str, float] = {}
        for name, env in (("calls", "DBCREW_LLM_DIAG_CALLS"), ("tokens", "DBCREW_LLM_DIAG_TOKENS"),
                          ("seconds", "DBCREW_LLM_DIAG_SECONDS"), ("steps", "DBCREW_LLM_DIAG_STEPS"),
                          ("samples", "DBCREW_LLM_DIAG_SAMPLES"), ("experts", "DBCREW_LLM_DIAG_EXPERTS"),
                          ("observation_chars", "DBCREW_LLM_OBSERVATION_CHARS")):
            raw = os.environ.get(env, "").strip()
            if not raw:
                continue
            try:
                value = float(raw)
            except ValueError:
                value = math.nan
            floor = 0 if name == "observation_chars" else 1
            if not math.isfinite(value) or value < floor or (name != "seconds" and not value.is_integer()):
                raise UsageError(f"{env}={raw!r}: give a {'number' if name == 'seconds' else 'whole number'} of at least {floor}")
            values[name] = value if name == "seconds" else int(value)
        return cls(**{**default.__dict__, **values})


class BudgetExhausted(DbcrewError):
    """A limit of the diagnosis ran out; its message names which."""


@dataclass
class Budget:
    limits: DiagnosisLimits
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
