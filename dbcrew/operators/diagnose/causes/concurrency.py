"""Causes where sessions wait for each other: another session's locks (the locks expert), and the WAL
flush every commit waits for under synchronous_commit (the configuration expert)."""

from __future__ import annotations

from dbcrew.operators.diagnose.attribution import (
    CauseTime,
    commit_flush_share,
    flushes,
    lock_relations,
    locks_on_objects,
)
from dbcrew.operators.diagnose.candidates import Facts, Proposal
from dbcrew.operators.diagnose.causes.declaration import Boundary, Expert, YieldsTo, cause
from dbcrew.operators.diagnose.causes.measures import batched, lock_wait_share, rate_left_baseline
from dbcrew.operators.window.metrics import (
    CHECKPOINTS,
    COMMITS,
    DEADLOCKS,
    IDLE_IN_XACT,
    ROWS_INSERTED,
    ROWS_UPDATED,
    TEMP_BYTES,
    WAIT_LOCK,
    WAIT_WAL_FLUSH,
    WAL_FSYNC_TIME,
    WAL_FSYNCS,
    WAL_IO,
)
from dbcrew.operators.window.readers import EXTENSION_WAITS, WAL_FLUSH_WAITS
from dbcrew.vocabulary import RootCauseCode

LOCKS = Expert("locks", "Lock expert: lock waits and their blockers -> lock_contention.")
CONFIGURATION = Expert(
    "configuration",
    "Configuration expert: WAL flush waits under synchronous_commit -> sync_commit_pressure.",
)


@cause(
    RootCauseCode.LOCK_CONTENTION,
    LOCKS,
    indicators=(WAIT_LOCK, DEADLOCKS, IDLE_IN_XACT),
    signals=(WAIT_LOCK, DEADLOCKS, IDLE_IN_XACT),
    words=("lock", "blocked", "deadlock", "wait"),
    thresholds=("lock_wait_share", "lock_wait_sessions", "lock_wait_sessions_beside_baseline"),
    knowledge="lock waits dominate",
    # Waiting for another session's lock on its relations (all lock waits when it names none): the
    # waiting is the contention's time, whatever statement waits (updaters of a hot row included).
    time=CauseTime(locks_on_objects),
)
def lock_contention(facts: Facts) -> Proposal | None:
    """A share of the active samples waiting for other sessions' locks, with enough sessions waiting
    (fewer where the lock waits left the baseline)."""
    w, levels = facts.window, facts.thresholds.diagnosis
    share = lock_wait_share(w)
    waiting = w.mean(WAIT_LOCK)
    if not (
        share >= levels.lock_wait_share
        and (
            waiting >= levels.lock_wait_sessions
            or (
                waiting >= levels.lock_wait_sessions_beside_baseline
                and rate_left_baseline(facts, WAIT_LOCK)
            )
        )
    ):
        return None
    blockers = sorted(
        {(b.blocker_pid, b.blocker_state, round(b.blocker_xact_seconds, 1)) for b in w.blocked}
    )[:5]
    # The relations most of the lock waits were on (a quarter of them at least): the contention's objects.
    on = lock_relations(w)
    waited = sum(n for _, n in on)
    return Proposal(
        strength=share / levels.lock_wait_share,
        evidence={
            "lock_wait_share": round(share, 2),
            "sessions_waiting_on_locks": round(waiting, 2),
            "lock_waits": {
                k: n
                for k, n in w.waits.items()
                if k.startswith("Lock:") and k not in EXTENSION_WAITS
            },
            "blockers": [{"pid": p, "state": s, "xact_seconds": x} for p, s, x in blockers],
            "lock_wait_samples_by_relation": {r: n for r, n in on[:5] if r},
        },
        objects=[r for r, n in on if r and n >= 0.25 * waited][:3],
    )


@cause(
    RootCauseCode.SYNC_COMMIT_PRESSURE,
    CONFIGURATION,
    indicators=(WAIT_WAL_FLUSH, WAL_FSYNCS, COMMITS, WAL_FSYNC_TIME),
    signals=(WAIT_WAL_FLUSH, WAL_IO, CHECKPOINTS, TEMP_BYTES),
    words=("config", "commit", "wal", "checkpoint", "setting"),
    thresholds=(
        "flush_wait_share",
        "flush_commit_bound",
        "flush_wait_sessions",
        "workload_time_share",
    ),
    knowledge="commits bound by WAL flushes",
    # Waiting for the commit's WAL flush (IO:WALSync, IO:WALWrite, LWLock:WALWrite): each commit's cost,
    # whichever statement's commit it is (an autocommit INSERT's flush counts here, not for the inserts).
    time=CauseTime(flushes),
    # The writes' own commits flushed in batches: the flushes are the workload's WAL, not commit pressure.
    yields_to=(
        YieldsTo(
            RootCauseCode.WORKLOAD_HIGH_UPDATES,
            batched(ROWS_UPDATED),
            Boundary.BATCHED_FLUSHES,
        ),
        YieldsTo(
            RootCauseCode.WORKLOAD_MANY_INSERTS,
            batched(ROWS_INSERTED),
            Boundary.BATCHED_FLUSHES,
        ),
    ),
    resource=True,
)
def sync_commit_pressure(facts: Facts) -> Proposal | None:
    """Sessions waiting on WAL flushes with synchronous_commit on, commit-bound (the flushes held
    against the flusher's idle time), or the explicit transactions' commits leading the active time."""
    w, levels = facts.window, facts.thresholds.diagnosis
    share = w.wait_share(*WAL_FLUSH_WAITS)
    waiting = w.mean(WAIT_WAL_FLUSH)
    sync = w.settings.get("synchronous_commit", "on")
    flushed = w.wait_samples(*WAL_FLUSH_WAITS)
    held = flushed / max(flushed + w.flusher_idle_between, 1)
    # Or the commits of explicit transactions took a third of the active time with the commit rate out of
    # the baseline: clients starved of the CPU (or slow to send the next statement) idle between
    # transactions as long as committers that think, yet their database time is the flush.
    committing = commit_flush_share(w)
    led = (
        committing is not None
        and committing >= levels.workload_time_share
        and rate_left_baseline(facts, COMMITS)
    )
    # Measured against the baseline, a lighter load than flush_wait_sessions tells (half of it: two
    # committers back to back waited 0.29 sessions on flushes, healthy loads at 40-1500 TPS 0.18 at most
    # and not out of their baseline).
    if not (
        sync != "off"
        and share >= levels.flush_wait_share
        and (
            (held >= levels.flush_commit_bound and waiting >= levels.flush_wait_sessions)
            or (led and waiting >= levels.flush_wait_sessions / 2)
        )
    ):
        return None
    return Proposal(
        strength=share / levels.flush_wait_share,
        evidence={
            "wal_flush_wait_share": round(share, 2),
            "sessions_waiting_on_wal_flush": round(waiting, 2),
            "flush_waiters_share_vs_idle_between": round(held, 2),
            **(
                {"commit_flush_share_of_active_time": round(committing, 2)}
                if committing is not None
                else {}
            ),
            "commits_per_s": round(w.mean(COMMITS)),
            "wal_fsyncs_per_s": round(w.mean(WAL_FSYNCS), 1),
            "synchronous_commit": sync,
            "commit_delay": w.settings.get("commit_delay", ""),
        },
    )
