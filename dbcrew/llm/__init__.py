"""Brains: the planner's and monitor's reasoning, behind one interface.

`RulesBrain` is the offline default (deterministic scenario playbooks); `OpenAIBrain` talks to any
OpenAI-compatible endpoint. Both answer with validated pydantic objects.
"""

from dbcrew.llm.base import Brain
from dbcrew.llm.rules import RulesBrain

__all__ = ["Brain", "RulesBrain"]
