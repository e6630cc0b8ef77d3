"""A window sampled live, one of a window's three sources: statistics as per-second deltas, waits, host metrics.

Counters (pg_stat_database, pg_stat_wal, pg_stat_io, the checkpointer) are read every `interval`
seconds and turned into per-second rates; pg_stat_activity is sampled SESSION_SAMPLES_PER_TICK
times per tick to count what active sessions wait on (no wait event = on CPU or runnable). A wait
share is an estimate from samples: short waits (a commit's WAL flush lasts well under a
millisecond on a fast disk) are caught in proportion to their time, and ten samples of three
sessions left a 0.45 share anywhere between 0.45 and 0.88 from one window to the next. For a local target the host
(CPU, iowait, load, memory, swap) and the server's own processes (CPU seconds, private memory) are
read through psutil; for a remote one these series are simply absent. Statements and tables are
read at the start and the end (pg_stat_statements only reports a statement once it finished, so
statements still running are taken from the session samples). The reads themselves are readers.py's,
which the watcher's passes take as well.
"""

from __future__ import annotations

import time
from collections import deque
from functools import partial

import psutil

from dbcrew import stopping
from dbcrew.models.report import CoverageEntry, CoverageStatus
from dbcrew.operators.held import Held
from dbcrew.operators.stat_views import TABLE_STATS, reset_between
from dbcrew.operators.window.evidence import WindowEvidence, running_by_statement
from dbcrew.operators.window.metrics import SERVER_STARTED, VACUUM_SCANNED
from dbcrew.operators.window.readers import (
    ActivityTally,
    HostProbe,
    VacuumProgress,
    one_row,
    read_counters,
    read_settings,
    read_tables,
    sessions,
    statement_deltas,
    statements_or_cause,
    table_deltas,
)
from dbcrew.targets import PostgresTarget, Resumable, resumable

SESSION_SAMPLES_PER_TICK = (
    5  # pg_stat_activity reads per counter tick: the wait shares' sample size
)

# A window whose session samples fell this far short of its schedule says so in the coverage.
BEHIND_SHARE = 0.8

RATE_SPAN = 1.0  # seconds: the cumulative statistics' reporting interval (PGSTAT_MIN_INTERVAL)


def _sample_sessions(
    session: Resumable, tally: ActivityTally, step: float, until: float
) -> dict[str, float] | None:
    """Sample the sessions every `step` seconds until `until`; the gauges' means over those samples,
    or None when the review was asked to stop.

    The samples keep to their schedule (the time a sample took counts in its step); a sample that came
    back late is followed at once by the next, never by a burst catching up the missed ones, and the
    window ends at `until` whatever was missed: an overloaded server answering slowly leaves fewer
    samples (the window's `planned_samples` says how many were due), not a longer run."""
    ticks: list[dict[str, float]] = []
    due = time.monotonic() + step
    while True:
        if stopping.pause(max(min(due, until) - time.monotonic(), 0.0)):
            return None
        ticks.append(tally.add(session.run(lambda conn: sessions(conn, tally.samples))))
        now = time.monotonic()
        due = max(due + step, now)
        if now >= until - 1e-3:
            return {k: sum(t[k] for t in ticks) / len(ticks) for k in ticks[0]}


def sample_window(
    target: PostgresTarget,
    seconds: float,
    interval: float = 0.5,
    wait: float = 0.0,
    resume: bool = True,
) -> WindowEvidence:
    """Watch `target` for `seconds`, one tick every `interval` seconds, on one session resumed whenever the server ends it
    (waiting up to `wait` seconds for a restarting server; with `resume` False, an ended session fails the sampling)."""
    with resumable(target, wait=wait, resume=resume) as session:
        version = int(
            session.run(
                lambda conn: one_row(conn, "SELECT current_setting('server_version_num')::int AS v")
            )["v"]
        )
        backend = int(
            session.run(lambda conn: one_row(conn, "SELECT pg_backend_pid() AS pid"))["pid"]
        )
        settings = session.run(read_settings)
        host = HostProbe.find(target, backend)
        statements_before, statements_unread = session.run(statements_or_cause)
        held, tables_before = session.run(lambda conn: read_tables(conn, Held()))
        tally = ActivityTally()
        vacuum = VacuumProgress()
        series: dict[str, list[float]] = {}
        started = time.time()
        history = deque(
            [(time.monotonic(), session.run(lambda conn: read_counters(conn, version)))]
        )
        restarts = resets = 0
        last_tick = history[0][0]
        if host is not None:
            host.read(0.0)
        deadline = last_tick + seconds
        step = interval / SESSION_SAMPLES_PER_TICK
        while True:
            gauges = _sample_sessions(session, tally, step, min(last_tick + interval, deadline))
            if gauges is None:
                break
            now = time.monotonic()
            elapsed = now - last_tick
            counters = session.run(lambda conn: read_counters(conn, version))
            if counters[SERVER_STARTED.name] != history[-1][1][SERVER_STARTED.name]:
                # The server restarted since the last tick: its counters started again (or were
                # restored from its last clean shutdown), so no rate spans the restart.
                history.clear()
                restarts += 1
            elif reset_between(
                history[-1][1], counters
            ):  # pg_stat_reset*() meanwhile: no rate spans it either
                history.clear()
                resets += 1
            # Backends report their counters at most once a second, so a rate over a shorter span
            # alternates between zero and double: rates are taken over the trailing RATE_SPAN.
            while len(history) > 1 and now - history[1][0] >= RATE_SPAN:
                history.popleft()
            then, old = history[0] if history else (now, counters)
            values = (
                {k: (v - old.get(k, 0.0)) / (now - then) for k, v in counters.items()}
                if now > then
                else {}
            )
            history.append((now, counters))
            values.update(gauges)
            values[VACUUM_SCANNED.name] = session.run(vacuum.read) / elapsed if elapsed > 0 else 0.0
            if host is not None:
                values.update(host.read(elapsed))
            for key, value in values.items():
                series.setdefault(key, []).append(value)
            last_tick = now
            if now >= deadline - 1e-3:
                break
        statements = []
        if statements_before is not None:  # and if revoked or dropped during the window, why
            before = statements_before
            after, statements_unread = session.run(partial(statements_or_cause, before=before))
            statements = [] if after is None else statement_deltas(before, after)
        held, tables_after = session.run(lambda conn: read_tables(conn, held))
        tables = table_deltas(
            tables_before, [r for r in tables_after if not TABLE_STATS.left_out(held.oids, r)]
        )
    return WindowEvidence(
        started_at=started,
        seconds=time.time() - started,
        interval=interval,
        series=series,
        waits=dict(tally.waits),
        session_samples=tally.samples,
        flusher_idle_between=tally.flusher_idle_between(),
        blocked=list(tally.blocked.values()),
        time_slices=tally.time_slices(),
        statement_texts=tally.texts,
        planned_samples=round(seconds / step),
        statements=statements,
        statements_unread=statements_unread,
        tables=tables,
        settings=settings,
        running=dict(running_by_statement(tally.running, {}).most_common(20)),
        cpu_count=psutil.cpu_count() if host is not None else None,
        memory_total_bytes=psutil.virtual_memory().total if host is not None else None,
        memory_by_statement=tally.memory_by_statement(host.private_peak if host else {}),
        server_version_num=version,
        left_out=held.describe() if held else "",
        reconnects=session.reconnects,
        restarts=restarts,
        resets=resets,
    )


def sampling_coverage(window: WindowEvidence) -> list[CoverageEntry]:
    """What the window's sampling could not see: pg_stat_statements where the session could not read it (its
    statements unknown, never none); and where a sampler fell behind its schedule, a server too busy to answer the
    samples in time leaves fewer of them, and the wait shares and the time attribution are estimates from those
    (the run kept to its window rather than stretch it)."""
    unread = (
        [CoverageEntry.of("statements", CoverageStatus.SKIPPED, window.statements_unread)]
        if window.statements_unread is not None
        else []
    )
    if (
        not window.planned_samples
        or window.session_samples >= BEHIND_SHARE * window.planned_samples
    ):
        return unread
    return [
        *unread,
        CoverageEntry(
            check="session_samples",
            status=CoverageStatus.RAN,
            reason=f"partial: the sampler fell behind, {window.session_samples} of {window.planned_samples}"
            f" session samples in {window.seconds:.0f} s (the server answered slowly); the wait shares and the"
            " time attribution rest on those",
        ),
    ]
