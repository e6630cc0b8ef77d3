"""Cross review: every expert's candidates checked against the baseline and the others' evidence.

Three passes, each recorded as a note for the report's diagnosis process:
1. corroboration: a candidate whose indicator metrics left the baseline gains confidence; one
   whose indicators all stayed inside it loses some (only when a baseline exists);
2. conflicts: pairs of causes that claim the same symptom are resolved by evidence strength
   (e.g. inserts that only wait on WAL flushes are the commit pressure, not a workload cause);
3. the top causes (at most four, D-Bot's limit) above the reporting confidence are kept.
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel

from dbcrew.vocabulary import Cause, FindingCode, RootCauseCode
from operators.diagnose.experts import Candidate, Facts

MAX_CAUSES = 4
MIN_CONFIDENCE = 0.5
SUPPORT_BONUS = 0.1
UNSUPPORTED_PENALTY = 0.15


class ReviewedCause(BaseModel):
    code: Cause
    confidence: float
    expert: str
    evidence: dict[str, object]
    objects: list[str] = []
    supported_by: list[str] = []


class ReviewNote(BaseModel):
    code: Cause
    reviewer: str
    verdict: str


# (kept, challenged, when the challenge holds): the challenged cause is the same symptom seen
# from another angle, so it is dropped when the kept cause's evidence is the stronger.
Holds = Callable[[Candidate, Candidate, Facts], bool]
Conflict = tuple[Cause, Cause, Holds]


def commit_bound(rows: str) -> Holds:
    """Rows written a few per commit by clients the WAL flush holds back (the kept cause says so): each
    write costs its commit, so the write volume is the commit pressure seen from the workload's side,
    however the two strengths (rows per second, a wait share) compare."""
    return lambda _kept, _challenged, facts: (
        facts.per_commit(rows) <= facts.thresholds.diagnosis.small_commit_rows
    )


CONFLICTS: list[Conflict] = [
    (
        RootCauseCode.SYNC_COMMIT_PRESSURE,
        RootCauseCode.WORKLOAD_MANY_INSERTS,
        commit_bound("db.tup_inserted"),
    ),
    (
        RootCauseCode.SYNC_COMMIT_PRESSURE,
        RootCauseCode.WORKLOAD_HIGH_UPDATES,
        commit_bound("db.tup_updated"),
    ),
    (
        RootCauseCode.LOCK_CONTENTION,
        RootCauseCode.WORKLOAD_HIGH_UPDATES,
        lambda kept, challenged, _f: kept.strength >= 2 * challenged.strength,
    ),
    (
        RootCauseCode.QUERY_CORRELATED_SUBQUERY,
        FindingCode.INDEX_MISSING,
        lambda kept, challenged, _f: set(kept.objects) & set(challenged.objects) != set(),
    ),
    (
        FindingCode.INDEXES_TOO_MANY,
        RootCauseCode.WORKLOAD_HIGH_UPDATES,
        lambda kept, challenged, _f: (
            bool(challenged.objects) and set(kept.objects) >= set(challenged.objects)
        ),
    ),
    (
        RootCauseCode.WORKLOAD_LARGE_INSERT,
        RootCauseCode.WORKLOAD_MANY_INSERTS,
        lambda _k, _c, facts: facts.per_commit("db.tup_inserted") > 1000,
    ),
]


def cross_review(
    candidates: list[Candidate], facts: Facts
) -> tuple[list[ReviewedCause], list[ReviewNote]]:
    notes: list[ReviewNote] = []
    abnormal = facts.abnormal_names
    by_code = {
        c.code: c for c in sorted(candidates, key=lambda c: c.strength)
    }  # strongest claim per code wins
    confidence: dict[Cause, float] = {}
    support: dict[Cause, list[str]] = {}
    for code, cand in by_code.items():
        value = cand.base_confidence
        hits = [m for m in cand.indicators if m in abnormal]
        if facts.baseline is not None:
            if hits:
                value += SUPPORT_BONUS
                notes.append(
                    ReviewNote(
                        code=code,
                        reviewer="baseline",
                        verdict=f"supported: {', '.join(hits)} left the baseline",
                    )
                )
            else:
                value -= UNSUPPORTED_PENALTY
                notes.append(
                    ReviewNote(
                        code=code,
                        reviewer="baseline",
                        verdict="weakened: none of its indicators left the baseline",
                    )
                )
        others = [
            o.expert
            for o in by_code.values()
            if o.code != code and set(o.objects) & set(cand.objects)
        ]
        confidence[code] = min(value, 0.99)
        support[code] = hits + [f"{e} expert (same objects)" for e in others]
    for kept, challenged, holds in CONFLICTS:
        if (
            kept in by_code
            and challenged in by_code
            and holds(by_code[kept], by_code[challenged], facts)
        ):
            notes.append(
                ReviewNote(
                    code=challenged,
                    reviewer=by_code[kept].expert,
                    verdict=f"dropped: explained by {kept} (stronger evidence)",
                )
            )
            confidence.pop(challenged, None)
    causes = [
        ReviewedCause(
            code=code,
            confidence=round(value, 2),
            expert=by_code[code].expert,
            evidence=by_code[code].evidence,
            objects=by_code[code].objects,
            supported_by=support[code],
        )
        for code, value in confidence.items()
        if value >= MIN_CONFIDENCE
    ]
    for code, value in confidence.items():
        if value < MIN_CONFIDENCE:
            notes.append(
                ReviewNote(
                    code=code,
                    reviewer="review",
                    verdict=f"below the reporting confidence ({value:.2f})",
                )
            )
    causes.sort(key=lambda c: -c.confidence)
    for dropped in causes[MAX_CAUSES:]:
        notes.append(
            ReviewNote(
                code=dropped.code,
                reviewer="review",
                verdict=f"beyond the {MAX_CAUSES} strongest causes",
            )
        )
    return causes[:MAX_CAUSES], notes
