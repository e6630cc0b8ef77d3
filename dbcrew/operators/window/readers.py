"""The reads of a target's statistics that every window is made of: counters, sessions, statements, tables, host.

A window sampled live (live.py) and the watcher's passes (dbcrew/operators/watch/sampling.py) both take
their readings here: the cumulative counters (pg_stat_database, pg_stat_wal, pg_stat_io, the
checkpointer, flattened to 'view.column' names, `read_counters`), pg_stat_activity samples tallied
by state, wait event, blocker and time slice (`sessions`, `ActivityTally`: no wait event = on CPU
or runnable), the statements by (queryid, userid) and the tables as deltas between two reads,
vacuum progress, the settings a diagnosis judges by, and for a local target the host (CPU,
iowait, load, memory, swap) and the server's own processes through psutil (`HostProbe`); for a
remote one these series are simply absent.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import psutil
import psycopg

from dbcrew.errors import DbcrewError
from dbcrew.models import Brief
from dbcrew.models.report import SkipCause, SkipKind
from dbcrew.operators.collect.machine import target_is_local
from dbcrew.operators.held import Held, guarded, held_relations
from dbcrew.operators.sql import quote_ident
from dbcrew.operators.stat_views import (
    DATABASE_STATS,
    SESSIONS_SQL,
    STATEMENTS,
    TABLE_STATS,
    checkpointer,
    counted_since,
)
from dbcrew.operators.window.evidence import (
    BlockedSession,
    StatementDelta,
    TableDelta,
    TimeSlice,
    statement_identity,
)
from dbcrew.operators.window.metrics import (
    ACTIVE,
    CHECKPOINT_RATES,
    DATABASE_COUNTERS,
    HOST_CPU_BUSY,
    HOST_IOWAIT,
    HOST_LOAD1,
    HOST_MEMORY_AVAILABLE,
    HOST_SWAP_IO,
    HOST_SWAP_USED,
    IDLE_BETWEEN,
    IDLE_IN_XACT,
    ON_CPU,
    PG_CPU,
    PG_PRIVATE_MEMORY,
    SESSION_GAUGES,
    VACUUM_BUFFERS,
    VACUUM_SESSIONS,
    WAIT_IO,
    WAIT_LOCK,
    WAIT_LWLOCK,
    WAIT_WAL_FLUSH,
    WAL_RATES,
    io_metric,
)
from dbcrew.operators.window.server_processes import server_reading
from dbcrew.targets import PostgresTarget, own_pids
from dbcrew.targets.postgres import first_line

WAL_SQL = (
    "SELECT wal_records, wal_fpi, wal_bytes::float8 AS wal_bytes, wal_buffers_full FROM pg_stat_wal"
)
VACUUM_IO_SQL = "SELECT coalesce(sum(coalesce(hits, 0) + coalesce(reads, 0)), 0)::float8 AS buffers FROM pg_stat_io WHERE context = 'vacuum'"
IO_SQL = """
SELECT replace(object, ' ', '_') AS object, sum(coalesce(reads, 0))::float8 AS reads,
       sum(coalesce(writes, 0))::float8 AS writes, sum(coalesce(extends, 0))::float8 AS extends,
       sum(coalesce(fsyncs, 0))::float8 AS fsyncs, sum(coalesce(read_time, 0))::float8 AS read_time,
       sum(coalesce(write_time, 0))::float8 AS write_time, sum(coalesce(fsync_time, 0))::float8 AS fsync_time
FROM pg_stat_io GROUP BY object
"""

# The sessions the tally counts, and how much of a running statement's text is kept to EXPLAIN it.
TALLIED = ("client backend", "parallel worker", "autovacuum worker")
EXPLAINED_QUERY_CHARS = 2000
SHOWN_QUERY_CHARS = 300  # of a sampled statement's text, kept to name it in the time attribution

VACUUM_PROGRESS_SQL = (
    "SELECT pid, heap_blks_scanned::float8 AS scanned FROM pg_stat_progress_vacuum"
)

SETTINGS = (
    "synchronous_commit",
    "fsync",
    "work_mem",
    "shared_buffers",
    "max_parallel_workers_per_gather",
    "autovacuum",
    "wal_level",
    "commit_delay",
    "maintenance_work_mem",
    "hash_mem_multiplier",
    "io_method",
)
SETTINGS_SQL = (
    "SELECT name, setting || coalesce(unit, '') AS value FROM pg_settings WHERE name = ANY(%s)"
)

# Wait events that are a commit waiting for its WAL to reach disk (synchronous commit).
WAL_FLUSH_WAITS = ("IO:WalSync", "IO:WALSync", "IO:WALWrite", "LWLock:WALWrite", "IO:WalWrite")
# The relation-extension lock: a heavyweight lock, but held only while a writer adds a page to a table
# or index, never by a transaction another waits out. Writers queued on it are the write workload's own
# work (many inserts into one table), not lock contention: on 2 busy cores 8 inserters' waits on it
# moved between 13 % and 50 % of the active time from one window to the next.
EXTENSION_WAITS = ("Lock:extend",)

# A client session idle for less than this is between two transactions of a running load (in use);
# one idle longer is parked (a connection pool's spare), whatever the load does.
IDLE_BETWEEN_SECONDS = 1.0

# A host probe reuses a reading of its server's processes taken within this share of the span it reads a
# rate over (server_processes.py): 3 s of a 60 s pass, none for the live window's tenth of a second.
READING_SHARE = 0.05


@dataclass
class HostProbe:
    """psutil readings of the host and the server's processes (local targets only).

    The host's busy CPU leaves out this process's own: a review sampling a target on its own host
    (its threads, Prefect's, the charts it prepares while the window runs: dbcrew/roles/crew/preparing.py) must
    not read its own work as the target host's load.
    """

    postmaster: psutil.Process
    last_cpu: Any = None
    last_proc_cpu: dict[int, float] = field(default_factory=dict)
    last_swap: tuple[int, int] | None = None
    me: psutil.Process = field(default_factory=psutil.Process)
    last_own_cpu: float | None = None
    private_peak: dict[int, float] = field(
        default_factory=dict
    )  # pid -> the most private memory (bytes) it held at a tick

    @classmethod
    def find(cls, target: PostgresTarget, backend_pid: int) -> HostProbe | None:
        """The postmaster of `target` if it runs on this host (our backend's parent), else None."""
        if not target_is_local(target.dsn):
            return None
        try:
            backend = psutil.Process(backend_pid)
            if "postgres" not in " ".join(backend.cmdline() or [backend.name()]):
                return None
            return cls(postmaster=backend.parent() or backend)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return None

    def read(self, elapsed: float) -> dict[str, float]:
        values: dict[str, float] = {}
        cpu = psutil.cpu_times()
        own_times = self.me.cpu_times()
        own_cpu = own_times.user + own_times.system
        if self.last_cpu is not None and self.last_own_cpu is not None:
            total = sum(cpu) - sum(self.last_cpu)
            idle = cpu.idle - self.last_cpu.idle
            iowait = getattr(cpu, "iowait", 0.0) - getattr(self.last_cpu, "iowait", 0.0)
            own = own_cpu - self.last_own_cpu
            if total > 0:
                values[HOST_CPU_BUSY.name] = 100.0 * max(total - idle - iowait - own, 0.0) / total
                values[HOST_IOWAIT.name] = 100.0 * max(iowait, 0.0) / total
        self.last_cpu, self.last_own_cpu = cpu, own_cpu
        values[HOST_LOAD1.name] = os.getloadavg()[0]
        memory = psutil.virtual_memory()
        values[HOST_MEMORY_AVAILABLE.name] = memory.available / 2**30
        swap = psutil.swap_memory()
        values[HOST_SWAP_USED.name] = swap.used / 2**30
        if self.last_swap is not None and elapsed > 0:
            values[HOST_SWAP_IO.name] = (
                ((swap.sin - self.last_swap[0]) + (swap.sout - self.last_swap[1])) / 2**20 / elapsed
            )
        self.last_swap = (swap.sin, swap.sout)
        # The server's processes, as read for any of its databases within a twentieth of this probe's span.
        reading = server_reading(self.postmaster, elapsed * READING_SHARE)
        cpu_seconds = sum(
            used - self.last_proc_cpu.get(pid, used if not self.last_proc_cpu else 0.0)
            for pid, used in reading.cpu.items()
        )
        for pid, own in reading.private.items():
            self.private_peak[pid] = max(self.private_peak.get(pid, 0), own)
        if self.last_proc_cpu and elapsed > 0:
            values[PG_CPU.name] = max(cpu_seconds, 0.0) / elapsed
        self.last_proc_cpu = reading.cpu
        values[PG_PRIVATE_MEMORY.name] = sum(reading.private.values()) / 2**30
        return values


def one_row(conn: psycopg.Connection[Any], sql: str) -> dict[str, Any]:
    row = conn.execute(sql).fetchone()
    return dict(row) if row else {}


def read_settings(conn: psycopg.Connection[Any]) -> dict[str, str]:
    """The settings a diagnosis judges by (sync commit, fsync, memory), as the target has them now."""
    return {r["name"]: r["value"] for r in conn.execute(SETTINGS_SQL, (list(SETTINGS),)).fetchall()}


def read_counters(conn: psycopg.Connection[Any], version: int) -> dict[str, float]:
    """Every cumulative counter of one tick, flattened to 'view.column' names."""
    database = one_row(conn, DATABASE_STATS.sql)
    counters = {DATABASE_COUNTERS[k].name: float(database[k] or 0) for k in DATABASE_STATS.changes}
    if version >= 140000:
        wal = one_row(conn, WAL_SQL)
        counters.update({WAL_RATES[k].name: float(v or 0) for k, v in wal.items()})
    if version >= 160000:
        for row in conn.execute(IO_SQL).fetchall():
            obj = row.pop("object")
            counters.update(
                {m.name: float(v or 0) for k, v in row.items() if (m := io_metric(obj, k))}
            )
        counters[VACUUM_BUFFERS.name] = float(one_row(conn, VACUUM_IO_SQL)["buffers"])
    checkpoints = checkpointer(version)
    row = one_row(conn, checkpoints.sql)
    counters.update({CHECKPOINT_RATES[k].name: float(row[k] or 0) for k in checkpoints.counters})
    return counters


def wait_key(row: dict[str, Any]) -> str:
    return f"{row['wait_event_type']}:{row['wait_event']}" if row["wait_event_type"] else "CPU"


def wait_gauge(key: str) -> str:
    """The act.* gauge an active session waiting on `key` ('Type:Event' or 'CPU') counts in; '' for none.

    One home for the classes, whoever saw the session: a sample of pg_stat_activity here, a scrape of
    dbcrew's postgres_exporter queries (dbcrew/operators/window/prometheus/steps.py).
    """
    if key == "CPU":
        return ON_CPU.name
    if key in WAL_FLUSH_WAITS:
        return WAIT_WAL_FLUSH.name
    for prefix, gauge in (("Lock:", WAIT_LOCK), ("IO:", WAIT_IO), ("LWLock:", WAIT_LWLOCK)):
        if key.startswith(prefix):
            return gauge.name
    return ""


def sessions(conn: psycopg.Connection[Any], sample: int) -> list[dict[str, Any]]:
    """One session sample: this database's client backends, parallel workers and autovacuum workers."""
    rows = conn.execute(
        SESSIONS_SQL,
        {
            "sample": sample,
            "query_chars": EXPLAINED_QUERY_CHARS,
            "own": own_pids(conn, this_database=True),
        },
    ).fetchall()
    return [row for row in rows if row["backend_type"] in TALLIED]


@dataclass
class ActivityTally:
    """Counts over the session samples of one window."""

    waits: Counter[str] = field(default_factory=Counter)
    running: Counter[str] = field(default_factory=Counter)
    blocked: dict[int, BlockedSession] = field(default_factory=dict)
    samples: int = 0
    flush_waits: Counter[int] = field(
        default_factory=Counter
    )  # per session: samples waiting on a WAL flush
    idle_between: Counter[int] = field(
        default_factory=Counter
    )  # per session: samples idle between two transactions
    slices: Counter[tuple[str, str, str, str]] = field(
        default_factory=Counter
    )  # (wait, statement key, kind, relation) -> active samples: the time attribution's input
    texts: dict[str, str] = field(default_factory=dict)  # statement key -> its first sampled text
    by_pid: dict[int, Counter[str]] = field(
        default_factory=dict
    )  # session -> statement key -> its active samples

    def add(self, rows: list[dict[str, Any]]) -> dict[str, float]:
        """Tally one sample; returns the gauges of this tick."""
        self.samples += 1
        by_pid = {r["pid"]: r for r in rows}
        gauges = Counter[str]()
        for row in rows:
            if row["backend_type"] == "autovacuum worker" or (
                row["state"] == "active"
                and (row["query"] or "").lstrip().lower().startswith("vacuum")
            ):
                gauges[VACUUM_SESSIONS.name] += 1
            if row["state"] == "idle in transaction":
                gauges[IDLE_IN_XACT.name] += 1
            if (
                row["state"] == "idle"
                and row["backend_type"] == "client backend"
                and (row["state_seconds"] or 0.0) < IDLE_BETWEEN_SECONDS
            ):
                gauges[IDLE_BETWEEN.name] += 1
                self.idle_between[row["pid"]] += 1
            if row["state"] != "active" or row["backend_type"] == "autovacuum worker":
                continue
            key = wait_key(row)
            self.waits[key] += 1
            gauges[ACTIVE.name] += 1
            gauge = wait_gauge(key)
            if gauge:
                gauges[gauge] += 1
            if gauge == WAIT_WAL_FLUSH.name:
                self.flush_waits[row["pid"]] += 1
            if row["backend_type"] == "client backend":
                self.running[row["query"]] += 1
            self._attribute(row, key)
            for blocker in (int(pid) for pid in (row["blocked_by"] or "").split(",") if pid):
                holder = by_pid.get(blocker)
                if holder is not None:
                    self.blocked[row["pid"]] = BlockedSession(
                        pid=row["pid"],
                        blocker_pid=blocker,
                        blocker_state=holder["state"] or "",
                        blocker_xact_seconds=holder["xact_seconds"] or 0.0,
                    )
        return {m.name: float(gauges.get(m.name, 0)) for m in SESSION_GAUGES}

    def _attribute(self, row: dict[str, Any], wait: str) -> None:
        """Count one active sample where its time went: the wait, the statement, the relation (the
        relation of the lock it waits for when pg_locks names one, else the statement's table)."""
        text = row["query"] or ""
        if not text.strip():
            self.slices[(wait, "", "", row.get("lock_relation") or "")] += 1
            return
        identity = statement_identity(text)
        self.texts.setdefault(identity.key, text[:SHOWN_QUERY_CHARS])
        self.by_pid.setdefault(row["pid"], Counter())[identity.key] += 1
        relation = (row.get("lock_relation") if wait.startswith("Lock:") else None) or (
            identity.relation
        )
        self.slices[(wait, identity.key, identity.kind, relation)] += 1

    def time_slices(self) -> list[TimeSlice]:
        return [
            TimeSlice(wait=w, statement=k, kind=kind, relation=r, samples=n)
            for (w, k, kind, r), n in self.slices.most_common()
        ]

    def memory_by_statement(self, private_peak: Mapping[int, float]) -> dict[str, float]:
        """Statement key -> the peak private memory (GB) of the sessions that ran it (`private_peak`: bytes by
        pid), each session under the statement it was sampled in most, most first: who holds the memory."""
        held: dict[str, float] = {}
        for pid, peak in private_peak.items():
            ran = self.by_pid.get(pid)
            if ran:
                key = ran.most_common(1)[0][0]
                held[key] = held.get(key, 0.0) + peak / 2**30
        return {key: round(gb, 3) for key, gb in sorted(held.items(), key=lambda kv: -kv[1])}

    def flusher_idle_between(self) -> int:
        """The idle-between-transactions samples set against the flush waits: the other side of the flush
        waits of the same sessions. Each flushing session counts as much as it flushes: what the experts
        read (flushes / (flushes + this)) is the flush-weighted mean of each session's own share of flush
        waits against idle time. A concurrent load's sessions that flush now and then while idling most of
        the time (a rate-limited application beside twenty committers) would otherwise outweigh the
        committers; sessions that never wait on a flush stay out of it."""
        flushes = sum(self.flush_waits.values())
        held = sum(n * n / (n + self.idle_between[pid]) for pid, n in self.flush_waits.items() if n)
        return round(flushes * (flushes / held - 1)) if held else 0


@dataclass
class VacuumProgress:
    """Heap blocks vacuums scanned since the last tick (progress counters are per running vacuum)."""

    last: dict[int, float] = field(default_factory=dict)

    def read(self, conn: psycopg.Connection[Any]) -> float:
        now = {
            row["pid"]: row["scanned"] or 0.0
            for row in conn.execute(VACUUM_PROGRESS_SQL).fetchall()
        }
        # A lower value under the same pid is a new vacuum pass: it scanned `value` blocks so far.
        scanned = sum(
            value - self.last.get(pid, 0.0) if value >= self.last.get(pid, 0.0) else value
            for pid, value in now.items()
        )
        self.last = now
        return scanned


# pg_stat_statements read as its counters every time and its texts once. With its texts the view copies every
# entry's text, the whole server's (all databases'), into each read: on a server of 4,255 entries a backend read
# by a watcher once a minute spent 9.1 ms on a read, 3.5 ms without the texts (docs/bench.md). A text is read
# when its entry first changes, then carried from reading to reading.
# The function is read only where the role may read the view: an administrator who revoked the view from the
# monitoring role (docs/security.md) meant its statements, and the function's EXECUTE stays granted to PUBLIC.
# The check is a one-time filter: a role without it runs no function scan at all. Its answer comes back with the
# rows (one row of NULLs when there are none), so a read can tell "no statements" from "not allowed to read them"
# at no extra round trip: a REVOKE after a watcher connected is said from its next pass on. OFFSET 0 keeps the
# subquery whole: pulled up into the join, the check became a join filter applied after the function scan.
VIEW_READABLE = "has_table_privilege(to_regclass('pg_stat_statements'), 'SELECT')"
STATEMENT_COUNTERS_SQL = f"""
SELECT r.readable, s.*
FROM (SELECT {VIEW_READABLE} AS readable) r
LEFT JOIN LATERAL (
  SELECT s.queryid, s.userid, s.calls, s.total_exec_time::float8 AS total_exec_time, s.rows,
         s.shared_blks_hit, s.shared_blks_read, s.temp_blks_written
  FROM pg_stat_statements(false) s
  WHERE r.readable AND s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
    AND s.queryid IS NOT NULL AND s.toplevel
  OFFSET 0
) s ON true
"""
STATEMENT_TEXTS_SQL = f"""
SELECT s.queryid, s.userid, left(s.query, 2000) AS query
FROM pg_stat_statements(true) s
WHERE s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND s.toplevel AND s.queryid = ANY(%(queryids)s::bigint[])
  AND {VIEW_READABLE}
"""
Statements = dict[tuple[int, int], dict[str, Any]]
# The review's statement counters (STATEMENTS), which a watcher reads too.
STATEMENT_COUNTERS = STATEMENTS.counters


class StatementsUnreadable(DbcrewError, LookupError):
    """This session cannot read pg_stat_statements now (`read_statements`): its view not readable by the role, or
    the extension not there; `statements_unreadable` says why, with the GRANT where one fixes it."""


def read_statements(conn: psycopg.Connection[Any], before: Statements | None = None) -> Statements:
    """Top-level statements by (queryid, userid): each role running the same statement has its own entry.

    A row's `query` is its text where `before` had it or where the entry changed since `before` (any of its
    counters differs, or it is new): whatever `statement_deltas(before, this)` names. An entry evicted (a full
    pg_stat_statements.max) and made again since may count as many calls as before and less of the rest: its
    counts start anew, and it is named too. Elsewhere `query` is None, and a first reading (no `before`) reads
    no text at all. A text pg_stat_statements cannot give (its text file discarded, or the entry evicted between
    the two reads) is the empty text: the entry's counts still count. StatementsUnreadable where the role may not
    read the view, or the extension is not there (not installed, dropped, off the search path): never an empty
    reading that looks like a quiet server.
    """
    try:
        read = conn.execute(STATEMENT_COUNTERS_SQL).fetchall()
    except (psycopg.errors.UndefinedFunction, psycopg.errors.UndefinedTable) as exc:
        raise StatementsUnreadable(first_line(exc)) from None
    if not read or not read[0]["readable"]:
        raise StatementsUnreadable("the role may not read pg_stat_statements")
    rows = {}
    for r in read:
        del r["readable"]
        if r["queryid"] is not None:  # None: the one row of NULLs that says there are no entries
            rows[(r["queryid"], r["userid"])] = r
    unread = []
    for key, row in rows.items():
        old = before.get(key) if before is not None else None
        row["query"] = old.get("query") if old is not None else None
        changed = before is not None and (
            old is None or any(old[c] != row[c] for c in STATEMENT_COUNTERS)
        )
        if row["query"] is None and changed:
            unread.append(key)
    if unread:
        texts = {
            (r["queryid"], r["userid"]): r["query"]
            for r in conn.execute(
                STATEMENT_TEXTS_SQL, {"queryids": sorted({q for q, _ in unread})}
            ).fetchall()
        }
        for key in unread:
            rows[key]["query"] = texts.get(key) or ""
    return rows


# Whether this session reads pg_stat_statements as read_statements does: the view's privilege, and the function
# called once (a server that did not preload the module refuses it; a schema off the search path hides it).
STATEMENTS_READABLE_SQL = f"""
SELECT {VIEW_READABLE} AS readable, current_user AS role, EXISTS (SELECT FROM pg_stat_statements(false)) AS entries
"""


STATEMENTS_INSTALLED_SQL = (
    "SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'pg_stat_statements') AS installed"
)


def statements_unreadable(
    conn: psycopg.Connection[Any], brief: Brief | None = None
) -> SkipCause | None:
    """Why this session cannot read pg_stat_statements, or None when read_statements reads it.

    read_statements reads nothing where the extension is missing or the view is revoked, as it should, and a
    server that did not preload the module refuses its every read: a watcher that asks once a session can say
    why its passes hold no statements instead of storing quiet ones (or no pass at all)."""
    if brief is not None and brief.statements_missing is not None:
        return SkipCause(kind=SkipKind.MISSING_EXTENSION, detail=brief.statements_missing)
    off_path = SkipCause(
        kind=SkipKind.MISSING_EXTENSION,
        detail="pg_stat_statements is installed in a schema that is not on the role's search_path",
    )
    dropped = SkipCause(  # since the brief was read: a DROP EXTENSION while a watcher is connected
        kind=SkipKind.MISSING_EXTENSION,
        detail="extension pg_stat_statements is not installed in this database",
    )
    try:
        row = conn.execute(STATEMENTS_READABLE_SQL).fetchone()
    except psycopg.errors.ObjectNotInPrerequisiteState:
        return SkipCause(
            kind=SkipKind.MISSING_EXTENSION,
            detail="pg_stat_statements is not in shared_preload_libraries",
        )
    except psycopg.errors.UndefinedFunction:
        installed = conn.execute(STATEMENTS_INSTALLED_SQL).fetchone()
        return off_path if installed is not None and installed["installed"] else dropped
    except psycopg.errors.InsufficientPrivilege as exc:
        role = brief.current_user if brief is not None else _current_user(conn)
        return SkipCause.of_failure(first_line(exc), quote_ident(role))
    if row is None or row["readable"]:
        return None
    if row["readable"] is None:  # the function is found, the view is not (another schema)
        return off_path
    return SkipCause.of_failure(
        "permission denied for view pg_stat_statements", quote_ident(row["role"])
    )


def unread_cause(
    conn: psycopg.Connection[Any], refused: StatementsUnreadable, brief: Brief | None = None
) -> SkipCause:
    """Why a read of pg_stat_statements was just refused: `statements_unreadable`'s cause, or the refusal's own words
    where the probe finds the statements readable again (a GRANT in between)."""
    return statements_unreadable(conn, brief) or SkipCause(kind=SkipKind.FAULT, detail=str(refused))


def statements_or_cause(
    conn: psycopg.Connection[Any], before: Statements | None = None, brief: Brief | None = None
) -> tuple[Statements | None, SkipCause | None]:
    """`read_statements`, or None and why it was refused (`unread_cause`): the watcher's and the live window's read."""
    try:
        return read_statements(conn, before), None
    except StatementsUnreadable as refused:
        return None, unread_cause(conn, refused, brief)


def _current_user(conn: psycopg.Connection[Any]) -> str:
    row = conn.execute("SELECT current_user AS role").fetchone()
    assert row is not None, "a SELECT without FROM gives its one row"
    return str(row["role"])


def statement_deltas(
    before: dict[tuple[int, int], dict[str, Any]], after: dict[tuple[int, int], dict[str, Any]]
) -> list[StatementDelta]:
    deltas = []
    for key, row in after.items():
        old = before.get(key, {})
        values, _ = counted_since(
            [old.get(c, 0.0) for c in STATEMENT_COUNTERS], [row[c] for c in STATEMENT_COUNTERS]
        )
        calls, total_exec_time, rows, shared_blks_hit, shared_blks_read, temp_blks_written = values
        if calls <= 0:
            continue
        deltas.append(
            StatementDelta(
                queryid=row["queryid"],
                userid=row["userid"],
                query=row["query"],
                calls=calls,
                total_exec_time_ms=total_exec_time,
                rows=rows,
                shared_blks_hit=shared_blks_hit,
                shared_blks_read=shared_blks_read,
                temp_blks_written=temp_blks_written,
            )
        )
    return sorted(deltas, key=lambda d: d.total_exec_time_ms, reverse=True)


def table_deltas(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[TableDelta]:
    """Each table's counters over the window (rows of TABLE_STATS; a table created meanwhile started from zero)."""
    old = {r["relid"]: r for r in before}
    counters = ("seq_scan", "seq_tup_read", "idx_scan", "n_tup_ins", "n_tup_upd", "n_tup_del")
    tables = []
    for row in after:
        prev = old.get(row["relid"], {})
        values = dict(
            zip(
                counters,
                counted_since(
                    [float(prev.get(c) or 0) for c in counters],
                    [float(row[c] or 0) for c in counters],
                )[0],
                strict=True,
            )
        )
        tables.append(
            TableDelta(
                name=f"{row['schemaname']}.{row['relname']}",
                n_live_tup=row["n_live_tup"],
                n_dead_tup=row["n_dead_tup"],
                index_count=row["index_count"],
                total_bytes=row["total_bytes"],
                **values,
            )
        )
    return tables


def read_tables(conn: psycopg.Connection[Any], held: Held) -> tuple[Held, list[dict[str, Any]]]:
    """TABLE_STATS without the tables another session holds ACCESS EXCLUSIVE (a set that only grows)."""
    return guarded(
        conn,
        held | held_relations(conn),
        lambda args: conn.execute(TABLE_STATS.sql, args).fetchall(),
    )
