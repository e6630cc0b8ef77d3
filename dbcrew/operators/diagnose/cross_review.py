"""Cross review: every expert's candidates checked against the baseline, the others' evidence and the time.

Four passes, each recorded as a note for the report's diagnosis process:
1. corroboration: a candidate whose indicator metrics left the baseline gains confidence; one
   whose indicators all stayed inside it loses some (only when a baseline exists);
2. time: each candidate's share of the window's active session time (dbcrew/operators/diagnose/attribution.py);
3. conflicts: pairs of causes that claim the same symptom (each declared with the cause that yields,
   dbcrew/operators/diagnose/causes/); where the time attribution measured both, the time decides
   (pass 4) and the pair's rule stands down, but for writes committed a few rows at a time beside the
   flushes of their commits: one mechanism, named once, as commit pressure where the flushes explain
   more of the time (`Boundary.SAME_COMMITS`); the rules that remain encode a boundary the time cannot
   draw (two causes explaining the same statements: a large insert or many small ones);
4. ranking by time: a cause explaining under minor_time_share of the time beside one explaining
   major_time_share is dropped; the causes are ordered by the time they explain (those the time cannot
   measure after, by confidence), and the top ones (at most four, D-Bot's limit) above the reporting
   confidence are kept.
"""

from __future__ import annotations

from pydantic import BaseModel

from dbcrew.operators.diagnose.attribution import QUOTED_STATEMENTS, Explained, cause_time
from dbcrew.operators.diagnose.candidates import Candidate, Facts
from dbcrew.operators.diagnose.causes.declaration import Boundary
from dbcrew.operators.diagnose.experts import CAUSE_TIME, CONFLICTS, RESOURCES
from dbcrew.vocabulary import Cause

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
    # Its indicator metrics that left the baseline (what a chart of it draws).
    left_baseline: list[str] = []
    time_share: float | None = None


class ReviewNote(BaseModel):
    code: Cause
    reviewer: str
    verdict: str


def _percent(share: float) -> str:
    return f"{100 * share:.0f}%"


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
    hits_of: dict[Cause, list[str]] = {}
    for code, cand in by_code.items():
        value = cand.base_confidence
        hits = hits_of[code] = [m for m in cand.indicators if m in abnormal]
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
    explained = cause_time(list(by_code.values()), facts.window, CAUSE_TIME)
    shares = {code: None if e is None else e.share for code, e in explained.items()}
    for code, share in shares.items():
        if share is not None:
            notes.append(
                ReviewNote(
                    code=code,
                    reviewer="time",
                    verdict=f"explains {_percent(share)} of the active session time",
                )
            )
    for conflict in CONFLICTS:
        kept, challenged = conflict.kept, conflict.challenged
        if kept not in confidence or challenged not in confidence:
            continue
        kept_share, challenged_share = shares[kept], shares[challenged]
        if (
            conflict.boundary is Boundary.SAME_COMMITS
            and kept_share is not None
            and challenged_share is not None
            and kept_share > challenged_share
            and conflict.holds(by_code[kept], by_code[challenged], facts)
        ):
            notes.append(
                ReviewNote(
                    code=challenged,
                    reviewer="time",
                    verdict=f"dropped: the same commits as {kept}, whose flushes explain more of the time"
                    f" ({_percent(kept_share)} against {_percent(challenged_share)})",
                )
            )
            confidence.pop(challenged, None)
        elif conflict.by_time and kept_share is not None and challenged_share is not None:
            notes.append(
                ReviewNote(
                    code=challenged,
                    reviewer="time",
                    verdict=f"left to the time beside {kept}, which tells them apart"
                    f" ({_percent(challenged_share)} against {_percent(kept_share)})",
                )
            )
        elif conflict.holds(by_code[kept], by_code[challenged], facts):
            notes.append(
                ReviewNote(
                    code=challenged,
                    reviewer=by_code[kept].expert,
                    verdict=f"dropped: explained by {kept} (stronger evidence"
                    + (", the time not measured)" if conflict.by_time else ")"),
                )
            )
            confidence.pop(challenged, None)
    _drop_minor(confidence, explained, facts, notes)
    causes = [
        ReviewedCause(
            code=code,
            confidence=round(value, 2),
            expert=by_code[code].expert,
            evidence=by_code[code].evidence,
            objects=by_code[code].objects,
            supported_by=support[code],
            left_baseline=hits_of[code],
            time_share=shares[code],
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
    # By the time explained; causes the time cannot measure after them, by confidence.
    causes.sort(key=lambda c: (c.time_share is None, -(c.time_share or 0.0), -c.confidence))
    _work_before_its_resource(causes)
    for dropped in causes[MAX_CAUSES:]:
        notes.append(
            ReviewNote(
                code=dropped.code,
                reviewer="review",
                verdict=f"beyond the {MAX_CAUSES} strongest causes",
            )
        )
    return causes[:MAX_CAUSES], notes


TIE_SHARE = 0.05  # shares this close explain the same time: the samples cannot order them


def _work_before_its_resource(causes: list[ReviewedCause]) -> None:
    """Where a resource cause and a work cause explain the same time (single-row inserts whose every sample
    is their commit's flush: 99 % each), the work comes first: it is what a DBA changes, the resource is
    how it shows. Swaps adjacent pairs in place, the time order otherwise kept."""
    for i in range(len(causes) - 1):
        first, second = causes[i], causes[i + 1]
        if (
            first.code in RESOURCES
            and second.code not in RESOURCES
            and first.time_share is not None
            and second.time_share is not None
            and first.time_share - second.time_share <= TIE_SHARE
        ):
            causes[i], causes[i + 1] = second, first


def _cpu_remainder(code: Cause) -> bool:
    """Whether the cause is the CPU no other cause explains (its declared time, `CauseTime.cpu_remainder`)."""
    return CAUSE_TIME.get(code, QUOTED_STATEMENTS).cpu_remainder


def _same_work(minor: Explained, lead: Explained) -> bool:
    """Whether the leading cause's time is mostly spent by the minor cause's statements: updaters' lock
    waits beside their own work, inserts' commit flushes beside theirs. Scans waiting on the disk beside a
    bulk insert that also waits on it are not: the insert's own work is a cause of its own."""
    return lead.within(minor.statements) >= lead.share / 2


def _drop_minor(
    confidence: dict[Cause, float],
    explained: dict[Cause, Explained | None],
    facts: Facts,
    notes: list[ReviewNote],
) -> None:
    """Drop a cause explaining under minor_time_share of the time beside one explaining major_time_share,
    when it is the same work seen from another side: its statements spend most of the leading cause's
    time (updaters' own work beside their lock waits, inserts' own work beside their commits' flushes), or
    none of the time, or it is the CPU no other cause explains (a small remainder: the CPU is the other
    causes' symptom). A small cause of its own statements (one poor join beside six CPU-bound clients)
    stays, ranked after."""
    levels = facts.thresholds.diagnosis
    measured = {code: e for code in confidence if (e := explained.get(code)) is not None}
    if not measured:
        return
    lead = max(measured, key=lambda code: measured[code].share)
    top = measured[lead]
    if top.share < levels.major_time_share:
        return
    for code, e in measured.items():
        if e.share >= levels.minor_time_share or code == lead:
            continue
        if _cpu_remainder(code) or not e.share or _same_work(e, top):
            notes.append(
                ReviewNote(
                    code=code,
                    reviewer="time",
                    verdict=f"dropped: explains {_percent(e.share)} of the active session time,"
                    f" {lead} explains {_percent(top.share)}",
                )
            )
            confidence.pop(code)
        else:
            notes.append(
                ReviewNote(
                    code=code,
                    reviewer="time",
                    verdict=f"kept after {lead}: {_percent(e.share)} of the time, spent by statements"
                    " of its own",
                )
            )
