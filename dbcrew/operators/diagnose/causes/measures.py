"""Measures the criteria of several causes share (whether a rate left the baseline, whether writes of a
kind led the active time, the lock waits' share, the update rate a host carries), and the boundaries
(`Holds`) their conflicts draw (rows per commit, the same tables)."""

from __future__ import annotations

from collections.abc import Callable

from dbcrew.operators.diagnose.attribution import kinds_share
from dbcrew.operators.diagnose.candidates import Candidate, Facts
from dbcrew.operators.diagnose.causes.declaration import Holds
from dbcrew.operators.window.evidence import TableDelta, WindowEvidence
from dbcrew.operators.window.metrics import ACTIVE, ON_CPU, Metric
from dbcrew.operators.window.readers import EXTENSION_WAITS
from dbcrew.settings.diagnosis import DiagnosisThresholds


def rate_left_baseline(facts: Facts, metric: Metric) -> bool:
    """Whether `metric` rose out of the baseline's range; with no baseline, whether the window kept at
    least one session active (nothing to compare: the time share alone must carry the cause)."""
    if facts.baseline is None:
        return facts.window.mean(ACTIVE) >= 1.0
    return any(m.name == metric.name and m.direction == "up" for m in facts.abnormal)


def time_led(facts: Facts, metric: Metric, *kinds: str) -> float | None:
    """The share of the active time taken by statements of `kinds` when it reaches workload_time_share
    (a cause beside another may hold a third of the time, not most of it) and their row rate `metric`
    left the baseline (a healthy load's writes hold as much time as they always did); None otherwise
    or unmeasured."""
    share = kinds_share(facts.window, *kinds)
    if share is None or share < facts.thresholds.diagnosis.workload_time_share:
        return None
    return share if rate_left_baseline(facts, metric) else None


def led_strength(share: float, levels: DiagnosisThresholds) -> float:
    return share / levels.workload_time_share


def written_tables(w: WindowEvidence, kind_rows: Callable[[TableDelta], float]) -> list[str]:
    """The table the window wrote most rows of one kind to (`kind_rows`), as a cause's object."""
    return [t.name for t in sorted(w.tables, key=lambda t: -kind_rows(t))[:1] if kind_rows(t)]


def lock_wait_share(w: WindowEvidence) -> float:
    """Share of the active-session samples waiting for a lock another session holds: the relation-extension
    lock's waits (EXTENSION_WAITS) are the writers' own work, not contention."""
    return w.wait_share("Lock:") - w.wait_share(*EXTENSION_WAITS)


def update_capacity(w: WindowEvidence, levels: DiagnosisThresholds) -> float | None:
    """Rows updated per second the server's host carries before updates are a cause (see
    update_rows_per_s_per_core); None for a remote target whose sessions were not seen on the CPU."""
    if w.cpu_count:
        return levels.update_rows_per_s_per_core * w.cpu_count
    return (
        levels.update_rows_per_s_per_core
        if w.mean(ON_CPU) >= levels.remote_update_sessions_on_cpu
        else None
    )


def commit_bound(rows: Metric) -> Holds:
    """Rows written a few per commit by clients the WAL flush holds back (the kept cause says so): each
    write costs its commit, so the write volume is the commit pressure seen from the workload's side,
    however the two strengths (rows per second, a wait share) compare."""
    return lambda _kept, _challenged, facts: (
        facts.per_commit(rows) <= facts.thresholds.diagnosis.small_commit_rows
    )


def batched(rows: Metric) -> Holds:
    """Rows written many per commit (batch_commit_rows): the WAL flushes the writes wait on carry their
    WAL volume, not the cost of committing often, so commit pressure is the write workload seen from
    the flush's side (an update flood of hundreds of rows a statement is not commit pressure)."""
    return lambda _kept, _challenged, facts: (
        facts.per_commit(rows) >= facts.thresholds.diagnosis.batch_commit_rows
    )


def same_tables(kept: Candidate, challenged: Candidate, _facts: Facts) -> bool:
    """The challenged workload writes only tables the kept cause names."""
    return bool(challenged.objects) and set(kept.objects) >= set(challenged.objects)
