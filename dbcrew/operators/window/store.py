"""The watcher's store as a source of a past interval: the window, the baseline before it, and what they cannot show.

The window is the interval's passes (one series value per pass, statements and tables summed over
them); the baseline is the passes just before the interval, as long as the interval (at least
BASELINE_MIN, at most BASELINE_MAX), so a metric is abnormal against the same target's own recent
behaviour at the same sampling rate. Passes are read at the finest resolution the store still
keeps for the interval's start (dbcrew/roles/watching.py: raw for 2 days, then 1-minute, then hourly
buckets). Without enough passes before the interval there is no baseline here: the diagnosis then
judges against the stored quiet window of an earlier health review, or a --baseline file
(dbcrew/operators/diagnose/past.py), as a live diagnosis does.

After the fact, some things cannot be known, and the coverage says so: the heaviest statements'
plans are EXPLAINed now, as they would run today (a statement whose tables changed since, or that
no longer parses, cannot show its plan of then); sessions that ended are known only through the
watcher's samples (pg_stat_activity read about once a second between passes,
dbcrew/operators/watch/session_sampler.py); stretches with no samples are named.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, Field

from dbcrew.errors import DbcrewError
from dbcrew.models.interval import PastInterval
from dbcrew.models.report import CoverageEntry, CoverageStatus, SkipCause, SkipKind
from dbcrew.operators.window.evidence import WindowEvidence
from dbcrew.operators.window.passes import (
    PassBody,
    StatementsUnread,
    TargetFacts,
    bodies,
    rate_names,
    unread_of,
    window_of_parts,
)
from dbcrew.store.samples import Gap, SampleStore, StoredPass

MIN_PASSES = 3  # fewer values and no distribution test can judge a metric (dbcrew/operators/window/anomaly.py)
BASELINE_MIN = timedelta(minutes=10)
BASELINE_MAX = timedelta(hours=1)


class NoSamples(DbcrewError, LookupError):
    """The store has no samples of the target in the interval: it was not watched then."""


class Recorded(BaseModel):
    """The interval's window and the baseline before it (None: too few passes), at one resolution, and its gaps."""

    window: WindowEvidence
    baseline: WindowEvidence | None
    resolution: int
    gaps: list[Gap]
    statements_unread: StatementsUnread | None = Field(
        None, description="the window's passes that could not read pg_stat_statements, and why"
    )
    passes: int = Field(0, description="raw passes the window merged")


def _resolution(
    store: SampleStore, target: str, interval: PastInterval
) -> tuple[int, list[StoredPass]]:
    """The finest resolution that still covers the interval's start (else the finest with any pass in it), with its passes."""
    found = [
        (r, store.passes(target, r, interval.start, interval.end))
        for r in store.resolutions(target)
    ]
    found = [(r, passes) for r, passes in found if passes]
    if not found:
        raise NoSamples(
            f"no samples of {target} from {interval.describe()}: was `dbcrew watch` running then?"
        )
    covering = [
        (r, p) for r, p in found if (store.earliest(target, r) or interval.end) <= interval.start
    ]
    return (covering or found)[0]


def baseline_span(interval: PastInterval) -> timedelta:
    """How far before the interval its baseline reaches: as long as the interval, within BASELINE_MIN and BASELINE_MAX."""
    return min(max(interval.end - interval.start, BASELINE_MIN), BASELINE_MAX)


def read_recorded(store: SampleStore, target: str, interval: PastInterval) -> Recorded:
    resolution, passes = _resolution(store, target, interval)
    span = baseline_span(interval)
    before = store.passes(target, resolution, interval.start - span, interval.start)
    watched = store.watched(target)
    facts = TargetFacts.model_validate_json(watched.facts) if watched else TargetFacts()
    parts, earlier = bodies(passes), bodies(before)  # each stored body parsed once
    digests = {d for _seconds, body in [*parts, *earlier] for d in _digests(body)}
    texts = store.texts(target, digests)
    window = window_of_parts(parts, texts, facts, interval.start)
    baseline = (
        window_of_parts(earlier, texts, facts, interval.start - span, also=rate_names(parts))
        if len(earlier) >= MIN_PASSES
        else None
    )
    return Recorded(
        window=window,
        baseline=baseline,
        resolution=resolution,
        gaps=store.gaps(target, interval.start, interval.end),
        statements_unread=unread_of(parts),
        passes=sum(body.passes for _seconds, body in parts),
    )


def _digests(body: PassBody) -> set[str]:
    sampled = set(body.session_time.texts.values()) if body.session_time else set()
    return {s.digest for s in body.statements} | set(body.running) | sampled


def after_the_fact(recorded: Recorded) -> list[CoverageEntry]:
    """What a diagnosis from stored samples cannot see, as coverage entries."""
    window = recorded.window
    every = window.seconds / window.session_samples if window.session_samples else window.interval
    entries = [
        CoverageEntry(
            check="statement_plans",
            status=CoverageStatus.RAN,
            reason="partial: plans are EXPLAINed now, as the statements would run today; a statement whose tables or"
            " indexes changed since the interval, or that no longer exists, cannot show its plan of then",
        ),
        CoverageEntry(
            check="ended_sessions",
            status=CoverageStatus.RAN,
            reason=f"partial: sessions are known only through the watcher's samples (one pg_stat_activity read every"
            f" {every:.2g} s): the waits, blockers and statements of sessions between two samples were not seen",
        ),
    ]
    if recorded.resolution:
        entries.append(
            CoverageEntry(
                check="sample_resolution",
                status=CoverageStatus.RAN,
                reason=f"partial: the interval is older than the raw samples kept; read from {recorded.resolution} s buckets",
            )
        )
    if (unread := recorded.statements_unread) is not None:
        entries.append(statements_unread_entry(unread, recorded.passes))
    return entries + gap_entries(recorded.gaps)


def statements_unread_entry(unread: StatementsUnread, passes: int) -> CoverageEntry:
    """The interval's statements as unknown where its passes could not read pg_stat_statements: skipped
    when none of them could, partial when some could."""
    cause = unread.cause.model_copy(
        update={
            "detail": f"{unread.passes} of {passes} passes read no statements: {unread.cause.detail}"
        }
    )
    if unread.passes >= passes:
        return CoverageEntry.of("statements", CoverageStatus.SKIPPED, cause)
    return CoverageEntry(
        check="statements", status=CoverageStatus.RAN, reason=f"partial: {cause.render()}"
    )


def gap_entries(gaps: list[Gap]) -> list[CoverageEntry]:
    """Each stretch of the interval without samples, and why, as a coverage entry."""
    return [
        CoverageEntry.of(
            "samples",
            CoverageStatus.SKIPPED,
            SkipCause(
                kind=SkipKind.NO_SOURCE,
                detail=f"no samples from {gap.started_at:%H:%M:%S} to {gap.ended_at:%H:%M:%S} UTC: {gap.reason}",
            ),
        )
        for gap in gaps
    ]
