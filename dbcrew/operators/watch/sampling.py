"""One target's sampling passes: the diagnosis sampler's reads, once per pass, turned into a `PassBody`.

A `TargetWatch` keeps what a pass needs from the last one (the counters, statements and tables
read then, the host probe, the vacuum progress) and one read-only session that outlives its
backend (dbcrew.targets.Resumable: a session an administrator ends is resumed within the pass).
Each pass is the reads of dbcrew/operators/window/readers.py, not a copy of them: the cumulative
counters (`read_counters`), the pg_stat_activity samples since the last pass
(dbcrew/operators/watch/session_sampler.py: one a second between passes) and the pass's own, tallied by
state, wait event, blocker and time slice (`ActivityTally`, kept as the pass's `SessionTime`), the
statements by (queryid, userid) (`read_statements`, `statement_deltas`; where the session cannot read
pg_stat_statements, `statements_unreadable` says why once a connection and every pass carries it), the tables (`read_tables`, `table_deltas`), vacuum progress and, for a local server, the host.

The first pass after a connection only takes the readings the next one subtracts: it stores
nothing. So does a pass that finds the server restarted since the last one (its counters started
again, and no rate spans a restart): the missing pass is the gap a reader sees. What the connection
learned (brief, settings, whether pg_stat_statements can be read) is learned again then: a restart
is when preloaded libraries and settings change.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import psutil
import psycopg

from dbcrew.models import Brief
from dbcrew.models.report import SkipCause
from dbcrew.operators.collect.probe import read_brief
from dbcrew.operators.held import Held
from dbcrew.operators.stat_views import TABLE_STATS, reset_between
from dbcrew.operators.watch.session_sampler import SESSION_STEP, SamplePace, SessionSampler
from dbcrew.operators.window.evidence import MONITORING, TableDelta, running_by_statement
from dbcrew.operators.window.metrics import SERVER_STARTED, STATEMENT_TIME, VACUUM_SCANNED
from dbcrew.operators.window.passes import (
    TABLE_COUNTERS,
    TOP_RUNNING,
    TOP_STATEMENTS,
    TOP_TABLES,
    PassBody,
    StatementRate,
    StatementsUnread,
    TargetFacts,
    digest,
    rounded,
)
from dbcrew.operators.window.readers import (
    HostProbe,
    Statements,
    VacuumProgress,
    read_counters,
    read_settings,
    read_statements,
    read_tables,
    sessions,
    statement_deltas,
    statements_or_cause,
    statements_unreadable,
    table_deltas,
)
from dbcrew.operators.window.session_time import session_time_of
from dbcrew.targets import PostgresTarget, Resumable


@dataclass
class Readings:
    """The cumulative readings of one pass, which the next pass subtracts."""

    at: float  # time.monotonic()
    counters: dict[str, float]
    statements: dict[tuple[int, int], dict[str, Any]]
    tables: list[dict[str, Any]]


@dataclass
class Connected:
    """A live connection to the target, and what was learned on opening it."""

    session: Resumable
    brief: Brief
    facts: TargetFacts
    host: HostProbe | None
    sessions: SessionSampler
    statements_unread: SkipCause | None = None  # why the session cannot read pg_stat_statements
    vacuum: VacuumProgress = field(default_factory=VacuumProgress)
    held: Held = field(default_factory=Held)
    reconnects_told: int = 0  # the session's reconnects the stored passes have told of


@dataclass
class Sampled:
    """What a pass produced: its body and span (None when it only took readings), and the texts it named."""

    body: PassBody | None
    seconds: float
    texts: dict[str, str]
    restarted: bool = False


@dataclass
class TargetWatch:
    """The watching state of one target across passes. Not thread-safe: one pass at a time per target."""

    target: PostgresTarget
    connected: Connected | None = None
    last: Readings | None = None
    known_texts: set[str] = field(default_factory=set)
    # Statement key -> the first whole text a pass saw running under it: the text every later pass names it by.
    shown: dict[str, str] = field(default_factory=dict)
    # The pace of the session samples between passes, shared by the watcher's targets (session_sampler.py).
    session_pace: SamplePace = field(default_factory=lambda: SamplePace(SESSION_STEP))

    def connect(self) -> Connected:
        """Open the session and learn the target's brief and facts (TargetError when it does not answer)."""
        session = Resumable(self.target)
        try:
            brief, facts, host, unread = self._learn(session)
        except BaseException:
            session.close()
            raise
        self.connected, self.last = (
            Connected(
                session=session,
                brief=brief,
                facts=facts,
                host=host,
                sessions=SessionSampler(session, self.session_pace),
                statements_unread=unread,
            ),
            None,
        )
        return self.connected

    def _learn(
        self, session: Resumable
    ) -> tuple[Brief, TargetFacts, HostProbe | None, SkipCause | None]:
        """What a connection learns of the target: its brief, its facts, the host probe of its server (a local
        one's) and why it cannot read pg_stat_statements (None when it can)."""
        brief = session.run(read_brief)
        backend = int(session.run(lambda conn: _value(conn, "SELECT pg_backend_pid()")))
        settings = session.run(read_settings)
        unread = session.run(lambda conn: statements_unreadable(conn, brief))
        host = HostProbe.find(self.target, backend)
        if host is not None:
            host.read(0.0)
        facts = TargetFacts(
            settings=settings,
            server_version_num=brief.server_version_num,
            cpu_count=psutil.cpu_count() if host is not None else None,
            memory_total_bytes=psutil.virtual_memory().total if host is not None else None,
        )
        return brief, facts, host, unread

    def close(self) -> None:
        """Drop the session and the readings: the next pass connects again and starts from new readings."""
        if self.connected is not None:
            self.connected.sessions.close()
            self.connected.session.close()
        self.connected = self.last = None

    def sample(self) -> Sampled:
        """One pass; psycopg.Error or TargetError when the target cannot be read (the caller records a gap and closes)."""
        c = self.connected or self.connect()
        with c.sessions.lock:
            sampled = self._sample(c)
            if sampled.restarted:
                # A restart may change what the connection learned (settings, preloaded libraries, the version,
                # the server processes the host probe reads): learned again on the resumed session, a new
                # `Connected` whose facts the caller stores.
                brief, facts, host, unread = self._learn(c.session)
                if unread is None and c.statements_unread is not None and self.last is not None:
                    # readable since the restart: the next pass counts its statements from here
                    self.last.statements = c.session.run(read_statements)
                c = self.connected = replace(
                    c, brief=brief, facts=facts, host=host, statements_unread=unread
                )
        c.sessions.start()  # the session samples until the next pass (again, if a failed sample ended them)
        return sampled

    def _sample(self, c: Connected) -> Sampled:
        """The pass's reads, on the session the between-pass sampler also reads (the caller holds its lock)."""
        run: Callable[[Callable[[psycopg.Connection[Any]], Any]], Any] = c.session.run
        version = c.facts.server_version_num
        # The session samples since the last pass and this pass's own: the waits, the blockers, the running
        # statements and the time attribution of the pass. The gauges are this read's (what the detector
        # has always seen: one instant per pass).
        tally = c.sessions.take()
        gauges = tally.add(run(lambda conn: sessions(conn, tally.samples)))
        now = time.monotonic()
        counters = run(lambda conn: read_counters(conn, version))
        before = self.last.statements if self.last is not None else None
        statements: Statements = {}
        if c.statements_unread is None:
            # revoked or dropped since the connection learned it could read them: said from this pass on, as a
            # connection that could never read them says it (a restart or a new connection asks again)
            read, c.statements_unread = run(
                partial(statements_or_cause, before=before, brief=c.brief)
            )
            statements = read or {}
        c.held, tables = run(lambda conn: read_tables(conn, c.held))
        tables = [r for r in tables if not TABLE_STATS.left_out(c.held.oids, r)]
        scanned = run(c.vacuum.read)
        last, self.last = (
            self.last,
            Readings(at=now, counters=counters, statements=statements, tables=tables),
        )
        host = c.host.read(now - last.at) if c.host is not None and last is not None else {}
        restarted = (
            last is not None and counters[SERVER_STARTED.name] != last.counters[SERVER_STARTED.name]
        )
        if last is None or restarted or reset_between(last.counters, counters):
            return Sampled(body=None, seconds=0.0, texts={}, restarted=restarted)
        seconds = now - last.at
        rates = {
            k: (v - last.counters.get(k, 0.0)) / seconds
            for k, v in counters.items()
            if k != SERVER_STARTED.name
        }
        rates.update(gauges)
        rates[VACUUM_SCANNED.name] = scanned / seconds
        rates.update(host)
        texts: dict[str, str] = {}

        def named(text: str) -> str:
            key = digest(text)
            if key not in self.known_texts:
                texts[key] = text
            return key

        # Statements reading the statistics are monitoring (this watcher's own, another tool's), not the workload.
        workload = [
            d
            for d in statement_deltas(last.statements, statements)
            if not MONITORING.search(d.query)
        ]
        rates[STATEMENT_TIME.name] = sum(d.total_exec_time_ms for d in workload) / seconds
        deltas = workload[:TOP_STATEMENTS]
        # Resumed since the last stored pass: in this pass's reads or in the session samples between passes.
        reconnects, c.reconnects_told = (
            c.session.reconnects - c.reconnects_told,
            c.session.reconnects,
        )
        body = PassBody(
            rates={
                k: rounded(v) for k, v in rates.items() if v
            },  # a rate left out is zero (window_of)
            waits=dict(tally.waits),
            session_samples=tally.samples,
            flusher_idle_between=tally.flusher_idle_between(),
            blocked=list(tally.blocked.values()),
            running={named(q): n for q, n in self.running(tally.running).most_common(TOP_RUNNING)},
            statements=[
                StatementRate(
                    queryid=d.queryid,
                    userid=d.userid,
                    digest=named(d.query),
                    calls=d.calls / seconds,
                    total_exec_time_ms=d.total_exec_time_ms / seconds,
                    rows=d.rows / seconds,
                    shared_blks_read=d.shared_blks_read / seconds,
                    temp_blks_written=d.temp_blks_written / seconds,
                )
                for d in deltas
            ],
            tables=busiest(table_deltas(last.tables, tables), seconds),
            reconnects=reconnects,
            session_time=session_time_of(tally.slices, tally.texts, named),
            statements_unread=StatementsUnread(cause=c.statements_unread)
            if c.statements_unread is not None
            else None,
        )
        return Sampled(body=body, seconds=seconds, texts=texts)

    def running(self, texts: Counter[str]) -> Counter[str]:
        """The running texts' samples by statement, each under one whole text, the same in every pass
        (`running_by_statement`): a text stored once, not one per literal per pass."""
        return running_by_statement(texts, self.shown)

    def stored_texts(self, texts: dict[str, str]) -> None:
        """The texts a pass named are in the store now: later passes name them by digest only."""
        self.known_texts.update(texts)


def busiest(tables: list[TableDelta], seconds: float) -> list[TableDelta]:
    """The tables that did the most in the pass (rows read and written, scans), counters per second; idle ones left out."""

    def work(t: TableDelta) -> float:
        return t.seq_tup_read + t.writes + t.idx_scan + t.seq_scan

    active = sorted((t for t in tables if work(t) > 0), key=work, reverse=True)[:TOP_TABLES]
    return [
        t.model_copy(update={f: rounded(getattr(t, f) / seconds) for f in TABLE_COUNTERS})
        for t in active
    ]


def _value(conn: psycopg.Connection[Any], sql: str) -> Any:
    row = conn.execute(sql).fetchone()
    assert row is not None
    return next(iter(row.values()))
