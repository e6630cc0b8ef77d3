"""Fault injection: make chosen operators fail, to prove (and measure) the crew's recovery.

Used by tests and benchmarks; a user can run it too (`--inject-fault`) to check how a review
degrades before trusting it in production.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field


class FaultKind(StrEnum):
    TIMEOUT = "timeout"  # a real statement timeout raised by the target
    MISFIT = "misfit"  # the operator declares it cannot serve this target (a logic error)


class FaultSpec(BaseModel):
    operator: str
    kind: FaultKind
    times: int | None = Field(None, ge=1, description="fail this many calls, then work; None fails every call")

    @classmethod
    def parse(cls, text: str) -> FaultSpec:
        """`operator:kind[:times]`, e.g. `check_sessions:timeout:1`."""
        parts = text.split(":")
        if len(parts) not in (2, 3):
            raise ValueError(f"fault {text!r}: expected operator:kind[:times]")
        return cls(operator=parts[0], kind=FaultKind(parts[1]), times=int(parts[2]) if len(parts) == 3 else None)
