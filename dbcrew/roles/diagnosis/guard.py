"""The hallucination guard: a proposed cause stands only on values the workspace observed.

A proposal names a code from the vocabulary and cites (metric, stat, value) triples. Each cited
value is recomputed from the sampled window (or its baseline) with the same function the tools
show it with, and must agree within rounding. A code outside the vocabulary, a cause with no
citation, a metric never sampled or a value that does not match: the proposal is rejected, and the
reason goes to the report. Free text never becomes a cause; it only explains one.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from dbcrew.operators.diagnose.facts import FactsRecord
from dbcrew.operators.diagnose.views import metric_stat
from dbcrew.vocabulary import Cause, cause_code

RELATIVE_TOLERANCE = (
    0.05  # the tools show four significant digits; a model may round to two or three
)
ABSOLUTE_TOLERANCE = 0.01


class CitedValue(BaseModel):
    metric: str = Field(
        description="a series name (db.tup_inserted) or wait:<prefix> (wait:Lock:) for a wait share"
    )
    stat: str = "mean"
    value: float


class ProposedCause(BaseModel):
    code: str
    confidence: float = Field(0.6, ge=0, le=1)
    explanation: str = ""
    evidence: list[CitedValue] = Field(default_factory=list)


class GuardedCause(BaseModel):
    code: Cause
    confidence: float
    explanation: str
    evidence: list[CitedValue]


def check(proposal: ProposedCause, record: FactsRecord) -> GuardedCause | str:
    """The proposal as a cause when every cited value matches the workspace, else why not."""
    try:
        code = cause_code(proposal.code)
    except ValueError:
        return f"{proposal.code!r} is not a code of the vocabulary"
    if not proposal.evidence:
        return "cites no observed value"
    for cited in proposal.evidence:
        observed = metric_stat(record.window, record.baseline, cited.metric, cited.stat)
        if observed is None:
            return f"cites {cited.metric} ({cited.stat}), which was not observed"
        if abs(cited.value - observed) > max(
            RELATIVE_TOLERANCE * abs(observed), ABSOLUTE_TOLERANCE
        ):
            return f"cites {cited.metric} {cited.stat} = {cited.value:g}, observed {observed:.4g}"
    return GuardedCause(
        code=code,
        confidence=proposal.confidence,
        explanation=proposal.explanation[:500],
        evidence=proposal.evidence,
    )
