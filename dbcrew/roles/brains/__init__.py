"""Choose the brain: rules by default; the OpenAI-compatible brain when configured or asked for."""

from __future__ import annotations

from typing import get_args

from dbcrew.errors import UsageError
from dbcrew.llm.base import Brain
from dbcrew.prompts import render
from dbcrew.roles.brains.rules import RulesBrain
from dbcrew.secrets import secret
from dbcrew.settings.environment import environment
from dbcrew.vocabulary import BrainName

BRAINS: tuple[str, ...] = get_args(BrainName)


def default_brain() -> str:
    """The LLM brain when an endpoint is configured (DBCREW_LLM_BASE_URL, or OPENAI_API_KEY for OpenAI's), else the rules."""
    return "openai" if environment().llm_base_url or secret("OPENAI_API_KEY") else "rules"


def make_brain(name: str) -> Brain:
    if name == "rules":
        return RulesBrain()
    if name == "openai":
        from dbcrew.roles.brains.openai import OpenAIBrain

        return OpenAIBrain(render)
    raise UsageError(f"unknown brain {name!r}: choose one of {', '.join(BRAINS)}")
