"""Cross review: every expert's candidates checked against the baseline, the others' evidence and the time.

Four passes, each recorded as a note for the report's diagnosis process:
1. corroboration: a candidate whose indicator metrics left the baseline gains confidence; one
   whose indicators all stayed inside it loses some (only when a baseline exists);
2. time: each candidate's share of the window's active session time (dbcrew/operators/diagnose/attribution.py);
3. conflicts: pairs of causes that claim the same symptom; where the time attribution measured both,
   the time decides (pass 4) and the pair's rule stands down; the rules that remain encode a boundary
   the time cannot draw (two causes explaining the same statements: a large insert or many small ones);
4. ranking by time: a cause explaining under minor_time_share of the time beside one explaining
   major_time_share is dropped; the causes are ordered by the time they explain (those the time cannot
   measure after, by confidence), and the top ones (at most four, D-Bot's limit) above the reporting
   confidence are kept.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pydantic import BaseModel

from dbcrew.operators.diagnose.attribution import Explained, cause_time
from dbcrew.operators.diagnose.experts import Candidate, Facts
from dbcrew.vocabulary import Cause, FindingCode, RootCauseCode

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
    time_share: float | None = None


class ReviewNote(BaseModel):
    code: Cause
    reviewer: str
    verdict: str


Holds = Callable[[Candidate, Candidate, Facts], bool]


@dataclass(frozen=True)
class Conflict:
    """The challenged cause is the same symptom as the kept one seen from another angle: dropped when `holds`.

    `by_time`: the time attribution tells the two apart (each explains its own samples), so the rule
    only stands in for it where the time was not measured (a past interval from Prometheus's counters)."""

    kept: Cause
    challenged: Cause
    holds: Holds
    by_time: bool = False


def commit_bound(rows: str) -> Holds:
    """Rows written a few per commit by clients the WAL flush holds back (the kept cause says so): each
    write costs its commit, so the write volume is the commit pressure seen from the workload's side,
    however the two strengths (rows per second, a wait share) compare."""
    return lambda _kept, _challenged, facts: (
        facts.per_commit(rows) <= facts.thresholds.diagnosis.small_commit_rows
    )


def batched(rows: str) -> Holds:
    """Rows written many per commit (batch_commit_rows): the WAL flushes the writes wait on carry their
    WAL volume, not the cost of committing often, so commit pressure is the write workload seen from
    the flush's side (an update flood of hundreds of rows a statement is not commit pressure)."""
    return lambda _kept, _challenged, facts: (
        facts.per_commit(rows) >= facts.thresholds.diagnosis.batch_commit_rows
    )


def same_tables(kept: Candidate, challenged: Candidate, _facts: Facts) -> bool:
    """The challenged workload writes only tables the kept cause names."""
    return bool(challenged.objects) and set(kept.objects) >= set(challenged.objects)


CONFLICTS: list[Conflict] = [
    # The writes' own commits flushed in batches: the flushes are the workload's WAL, not commit pressure.
    Conflict(
        RootCauseCode.WORKLOAD_HIGH_UPDATES,
        RootCauseCode.SYNC_COMMIT_PRESSURE,
        batched("db.tup_updated"),
    ),
    Conflict(
        RootCauseCode.WORKLOAD_MANY_INSERTS,
        RootCauseCode.SYNC_COMMIT_PRESSURE,
        batched("db.tup_inserted"),
    ),
    # Measured by time: the flush waits are the commit pressure's, the writes' own work the workload's,
    # the lock waits the contention's; each pair is named in order of the time it explains.
    Conflict(
        RootCauseCode.SYNC_COMMIT_PRESSURE,
        RootCauseCode.WORKLOAD_MANY_INSERTS,
        commit_bound("db.tup_inserted"),
        by_time=True,
    ),
    Conflict(
        RootCauseCode.SYNC_COMMIT_PRESSURE,
        RootCauseCode.WORKLOAD_HIGH_UPDATES,
        commit_bound("db.tup_updated"),
        by_time=True,
    ),
    Conflict(
        RootCauseCode.LOCK_CONTENTION,
        RootCauseCode.WORKLOAD_HIGH_UPDATES,
        lambda kept, challenged, _f: kept.strength >= 2 * challenged.strength,
        by_time=True,
    ),
    # Boundaries the time cannot draw: both causes explain the same statements' time.
    # A correlated subquery that scans a table per outer row: the index is the subquery's fix, not a cause.
    Conflict(
        RootCauseCode.QUERY_CORRELATED_SUBQUERY,
        FindingCode.INDEX_MISSING,
        lambda kept, challenged, _f: set(kept.objects) & set(challenged.objects) != set(),
    ),
    # Writes to a table carrying too many indexes: the index maintenance is what makes them heavy.
    Conflict(FindingCode.INDEXES_TOO_MANY, RootCauseCode.WORKLOAD_HIGH_UPDATES, same_tables),
    Conflict(FindingCode.INDEXES_TOO_MANY, RootCauseCode.WORKLOAD_MANY_INSERTS, same_tables),
    # The same inserted rows: thousands of rows per commit are a large insert, not many small ones.
    Conflict(
        RootCauseCode.WORKLOAD_LARGE_INSERT,
        RootCauseCode.WORKLOAD_MANY_INSERTS,
        lambda _k, _c, facts: facts.per_commit("db.tup_inserted") > 1000,
    ),
]


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
    explained = cause_time(list(by_code.values()), facts.window)
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
        if conflict.by_time and shares[kept] is not None and shares[challenged] is not None:
            notes.append(
                ReviewNote(
                    code=challenged,
                    reviewer="time",
                    verdict=f"left to the time beside {kept}, which tells them apart"
                    f" ({_percent(shares[challenged] or 0.0)} against {_percent(shares[kept] or 0.0)})",
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


# Causes that name a saturated resource or mechanism (the WAL flush, the CPU, the disks, memory) rather
# than the work that saturates it.
RESOURCES: frozenset[Cause] = frozenset(
    {
        RootCauseCode.SYNC_COMMIT_PRESSURE,
        RootCauseCode.CPU_CONTENTION,
        RootCauseCode.IO_CONTENTION,
        RootCauseCode.MEMORY_PRESSURE,
    }
)
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
        if code == RootCauseCode.CPU_CONTENTION or not e.share or _same_work(e, top):
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
