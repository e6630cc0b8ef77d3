"""Fault injection: make chosen operators fail, to prove (and measure) the crew's recovery.

Used by tests and benchmarks; a user can run it too (`--inject-fault`) to check how a review
degrades before trusting it in production. Run-time kinds fail the operator's call; plan kinds
damage the planner's draft (before self-reflection), as a careless planner would.
"""

from __future__ import annotations

import re
from enum import StrEnum

from pydantic import BaseModel, Field

OPERATOR_NAME = re.compile(r"[a-z][a-z0-9_]*")  # how operators are named (Python functions)
TIMES = re.compile(r"[1-9][0-9]{0,8}")  # ASCII digits only: int() also reads ' 2', '1_0' and '١'


class FaultKind(StrEnum):
    TIMEOUT = "timeout"  # a real statement timeout raised by the target
    MISFIT = "misfit"  # the operator declares it cannot serve this target: the plan chose a wrong operator
    DISCONNECT = "disconnect"  # a real refused connection (the target briefly unreachable)
    BAD_PARAM = "bad_param"  # plan fault: the task is given parameters its operator rejects
    MISSING_AGENT = (
        "missing_agent"  # plan fault: the agent that should run the task is not in the team
    )
    LOST_DEPENDENCY = "lost_dependency"  # plan fault: the task no longer waits for the tasks whose output it reads

    @property
    def damages_plan(self) -> bool:
        return self in (FaultKind.BAD_PARAM, FaultKind.MISSING_AGENT, FaultKind.LOST_DEPENDENCY)


class FaultSpec(BaseModel):
    operator: str
    kind: FaultKind
    times: int | None = Field(
        None, ge=1, description="fail this many calls, then work; None fails every call"
    )

    @classmethod
    def parse(cls, text: str) -> FaultSpec:
        """`operator:kind[:times]`, e.g. `check_sessions:timeout:1`; ValueError in one line.

        Whether the operator exists is the caller's question (the registry sits above the kernel).
        """
        parts = text.split(":")
        if len(parts) not in (2, 3) or not OPERATOR_NAME.fullmatch(parts[0]):
            raise ValueError(
                f"fault {text!r}: expected operator:kind[:times], e.g. check_sessions:timeout:1"
            )
        try:
            kind = FaultKind(parts[1])
        except ValueError:
            raise ValueError(
                f"fault {text!r}: kind {parts[1]!r} is not one of {', '.join(FaultKind)}"
            ) from None
        times = parts[2] if len(parts) == 3 else None
        if times is not None and not TIMES.fullmatch(times):
            raise ValueError(f"fault {text!r}: times {times!r} is not a whole number of 1 or more")
        return cls(operator=parts[0], kind=kind, times=int(times) if times is not None else None)

    def __str__(self) -> str:
        return f"{self.operator}:{self.kind.value}" + (f":{self.times}" if self.times else "")
