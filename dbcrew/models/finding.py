"""A finding: one problem (or notable fact) about the target, in the vocabulary of finding-codes.md."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from dbcrew.vocabulary import Cause

LLM_EXPERTS_SOURCE = (
    "llm_experts"  # Finding.source of a root cause only the LLM experts of a diagnosis named
)


class Severity(StrEnum):
    CRITICAL = "critical"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"critical": 0, "warning": 1, "info": 2}[self.value]


class Finding(BaseModel):
    code: Cause = Field(description="a health check's code, or a root cause's in a diagnosis")
    severity: Severity
    object: str
    title: str
    evidence: dict[str, Any] = Field(default_factory=dict)
    recommendation: str = ""
    fix_sql: str | None = None
    confidence: float = 1.0
    source: str = Field("", description="operator that produced it")

    @property
    def is_problem(self) -> bool:
        """`info` never counts as a problem (finding-codes.md)."""
        return self.severity is not Severity.INFO

    @property
    def statement(self) -> str:
        """The (normalized) statement a finding about one quotes in its evidence, e.g. a slow query's text: its
        object stays `queryid:<n>` (finding-codes.md), which means nothing to a reader without it. Empty otherwise."""
        query = self.evidence.get("query")
        return query if isinstance(query, str) else ""
