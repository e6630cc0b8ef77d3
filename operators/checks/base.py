"""Shared helpers for check operators."""

from __future__ import annotations

from typing import Any

from dbcrew.models import Finding, Severity
from operators.registry import Observation


def observe(source: str, findings: list[Finding], looked_at: str) -> Observation:
    problems = sum(1 for f in findings if f.is_problem)
    return Observation(
        summary=f"{source}: {len(findings)} findings ({problems} problems) over {looked_at}",
        findings=[f.model_copy(update={"source": source}) for f in findings],
    )


def severity_for(value: float, warning: float, critical: float, *, higher_is_worse: bool = True) -> Severity | None:
    """None when the value is within bounds."""
    if higher_is_worse:
        if value >= critical:
            return Severity.CRITICAL
        if value >= warning:
            return Severity.WARNING
        return None
    if value <= critical:
        return Severity.CRITICAL
    if value <= warning:
        return Severity.WARNING
    return None


def rounded(values: dict[str, Any]) -> dict[str, Any]:
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in values.items()}
