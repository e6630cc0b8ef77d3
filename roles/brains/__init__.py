"""Choose the brain: rules by default; the OpenAI-compatible brain when configured or asked for."""

from __future__ import annotations

import os
from typing import get_args

from dbcrew.errors import UsageError
from dbcrew.llm.base import Brain
from dbcrew.secrets import secret
from dbcrew.vocabulary import BrainName
from roles.brains.rules import RulesBrain
from prompts import render

BRAINS: tuple[str, ...] = get_args(BrainName)


def default_brain() -> str:
    return "openai" if os.environ.get("DBCREW_LLM_BASE_URL") or secret("OPENAI_API_KEY") else "rules"


def make_brain(name: str) -> Brain:
    if name == "rules":
        return RulesBrain()
    if name == "openai":
        from roles.brains.openai import OpenAIBrain

        return OpenAIBrain(render)
    raise UsageError(f"unknown brain {name!r}: choose one of {', '.join(BRAINS)}")
