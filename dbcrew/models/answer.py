"""The answer `dbcrew ask` gives (CLI --json, the MCP `ask` tool, the `ask` flow's result)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from dbcrew.models.report import LlmUsage
from dbcrew.models.request import ReviewRequest
from dbcrew.vocabulary import Route


class Citation(BaseModel):
    """A passage an answer rests on: the manual's page and anchor, or a knowledge chunk."""

    source: str = Field(description="'postgresql-manual' or 'knowledge'")
    section: str = Field(description="manual: 'page.html#ANCHOR'; knowledge: the chunk's name")
    title: str = ""
    excerpt: str


class ToolCall(BaseModel):
    """One read-only look-up run for an instance question (DQA's Action / Action Input / Observation)."""

    operator: str
    params: dict[str, Any] = Field(default_factory=dict)
    observation: str = Field("", description="the observation, cut to a short limit")
    observation_key: str | None = Field(
        None, description="workspace key of the whole observation when it was longer"
    )


class Answer(BaseModel):
    route: Route
    answer: str
    citations: list[Citation] = Field(default_factory=list)
    tools: list[ToolCall] = Field(default_factory=list)
    refused: bool = False
    reason: str = ""
    brain: str = "rules"
    llm: LlmUsage = Field(default_factory=LlmUsage)
    review: ReviewRequest | None = Field(
        None,
        exclude=True,
        description="an analysis question's review, still to run:"
        " dbcrew/flows/ask.py runs it as a health_review flow run and answers from its report",
    )
