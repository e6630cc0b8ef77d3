"""The store's two backends behind one small interface: a DuckDB file or a PostgreSQL database.

The store's SQL is written once, in the subset both understand (TEXT, BIGINT, DOUBLE PRECISION,
BOOLEAN, TIMESTAMPTZ, `CREATE ... IF NOT EXISTS`, `INSERT ... ON CONFLICT`), with `?` parameters;
the PostgreSQL backend turns them into psycopg's `%s`. Each session is one transaction on its own
connection, so no process holds the DuckDB file between calls and several workers share a
PostgreSQL store. A PostgreSQL session's connection is kept for the process's next session
(`IdleConnections`): a connection is a backend process forked, authenticated and warmed on the
store's server, and a watcher stores a pass, renews leases and heartbeats many times a second.

Whatever goes wrong in the store itself (a file DuckDB cannot read, truncated or not DuckDB's; a
database that refuses or drops the connection) is one `StoreUnavailable`, raised by the backend
where it happens: a caller tells the store's fault from its own (a workspace's, a target's) by
its type, and a review lets the store cost only its history (dbcrew/roles/spine.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Hashable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import duckdb
import psycopg

from dbcrew.errors import DbcrewError, TargetError
from dbcrew.targets.postgres import first_line, password_apart, redact_url
from dbcrew.targets.shelf import ended_while_idle, reusable

# DuckDB admits one writing process per file; another process's review may hold it for a moment.
DUCKDB_LOCK_RETRIES = 50
DUCKDB_LOCK_PAUSE = 0.2
APPLICATION_NAME = "dbcrew-store"

# Within one process, DuckDB lets two connections to a file write concurrently and fails the one that
# conflicts ("Catalog write-write conflict"): reviews running in threads of one worker take turns.
_DUCKDB_FILE_LOCKS: dict[Path, threading.RLock] = {}
_DUCKDB_FILE_LOCKS_GUARD = threading.Lock()


class StoreUnavailable(DbcrewError, RuntimeError):
    """The store cannot be opened or used (unreachable, refused, locked, damaged, not writable); the message
    holds no password."""

    def __init__(self, location: str, reason: str):
        super().__init__(f"the store {location} cannot be used: {reason}")
        self.location = location
        self.reason = reason


@contextmanager
def _store_failures(location: str, errors: tuple[type[Exception], ...]) -> Iterator[None]:
    """Inside the block, a backend's own error is the store's: StoreUnavailable, its first line, password-free."""
    try:
        yield
    except errors as exc:
        raise StoreUnavailable(location, redact_url(first_line(exc))) from exc


def _duckdb_file_lock(path: Path) -> threading.RLock:
    with _DUCKDB_FILE_LOCKS_GUARD:
        return _DUCKDB_FILE_LOCKS.setdefault(path.resolve(), threading.RLock())


class Session(Protocol):
    def run(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...


class Backend(Protocol):
    name: str
    location: str

    def session(self) -> AbstractContextManager[Session]: ...

    def lock_schema(self, session: Session) -> None: ...

    def identity(self) -> Hashable | None:
        """What names the database this backend opens, for a process to remember that it made a schema there
        (dbcrew/store/store.py); None when nothing does yet."""
        ...


def create_tables(backend: Backend, statements: Iterable[str]) -> None:
    """Each group of the store's tables (history, samples, leases) is made if missing, in one session under
    the schema's lock: two processes opening a new PostgreSQL store at once would otherwise race on the
    catalogue (`CREATE TABLE IF NOT EXISTS` is not safe against a concurrent one)."""
    with backend.session() as session:
        backend.lock_schema(session)
        for statement in statements:
            session.run(statement)


def utc(value: datetime) -> datetime:
    """Both backends hand back aware timestamps; DuckDB's carry the local zone, PostgreSQL's the session's."""
    return value.astimezone(UTC)


class _DuckSession:
    def __init__(self, conn: duckdb.DuckDBPyConnection, location: str):
        self._conn = conn
        self._location = location

    def run(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with _store_failures(self._location, (duckdb.Error,)):
            cursor = self._conn.execute(sql, list(params))
            return cursor.fetchall() if cursor.description else []


class DuckDBBackend:
    name = "duckdb"

    def __init__(self, path: Path):
        self.path = Path(path).expanduser()
        self.location = str(self.path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreUnavailable(self.location, exc.strerror or type(exc).__name__) from exc

    def _connect(self) -> duckdb.DuckDBPyConnection:
        for attempt in range(DUCKDB_LOCK_RETRIES):
            try:
                return duckdb.connect(str(self.path))
            except duckdb.IOException as exc:
                if "lock" not in str(exc).lower() or attempt == DUCKDB_LOCK_RETRIES - 1:
                    raise
                time.sleep(DUCKDB_LOCK_PAUSE)
        raise AssertionError("unreachable")

    @contextmanager
    def session(self) -> Iterator[Session]:
        failures = (duckdb.Error,)
        with _duckdb_file_lock(self.path):
            with _store_failures(self.location, failures):
                conn = self._connect()
            try:
                with _store_failures(self.location, failures):
                    conn.begin()
                yield _DuckSession(conn, self.location)
                with _store_failures(self.location, failures):
                    conn.commit()
            except BaseException:
                with _store_failures(self.location, failures):
                    conn.rollback()
                raise
            finally:
                conn.close()

    def lock_schema(self, session: Session) -> None:
        """One session writes a DuckDB file at a time (one process by DuckDB's file lock, one thread by ours)."""

    def identity(self) -> Hashable | None:
        """The file itself (its device and inode beside its path): a file deleted and made anew is another
        database. None while there is no file."""
        try:
            stat = self.path.stat()
        except OSError:
            return None
        return (self.name, str(self.path.resolve()), stat.st_dev, stat.st_ino)


class _PgSession:
    def __init__(self, conn: psycopg.Connection[tuple[Any, ...]], location: str):
        self._conn = conn
        self._location = location

    def run(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with _store_failures(self._location, (psycopg.Error,)):
            cursor = self._conn.execute(sql.replace("?", "%s"), list(params))
            return cursor.fetchall() if cursor.description else []


PgConnection = psycopg.Connection[tuple[Any, ...]]
Kept = tuple[str, PgConnection, float]  # URL, connection, kept since (time.monotonic())


class IdleConnections:
    """The store connections that sessions of this process finished with, kept for its next sessions.

    A connection to the store is a backend the store's server forks, authenticates and warms for each
    session. A fleet's watchers store a pass per target, renew their leases and heartbeat: with a new
    connection a session, the store's server spent 0.41 of a core (0.76 over some 30 s) on backends that lived
    one session each (python -m bench scale, 1,000 targets at 60 s, two workers, 29 Nov 2026): as much as
    both watchers; 0.00 with them kept.
    So a finished session's connection, idle and healthy, waits here for the next session of its URL: at
    most `keep` connections over all URLs (a process that opened stores on many databases, a test suite,
    keeps no more), none longer than `idle_for` seconds. A session takes the one of its URL that waited
    least, unless the server spoke to it while it waited (`spoke_while_idle`, as a review's shelf of target
    sessions checks: a restart, idle_session_timeout, pg_terminate_backend end it so), then closed. With
    none left, a session connects as before, in its own thread, so a store that refuses connections fails
    that session at once (psycopg_pool makes the caller wait its timeout while its own workers retry the
    server)."""

    def __init__(self, keep: int, idle_for: float):
        self.keep = keep
        self.idle_for = idle_for
        self._idle: list[Kept] = []  # oldest first
        self._lock = threading.Lock()

    def take(self, url: str) -> PgConnection | None:
        """A kept connection to `url` the server did not end meanwhile, or None when none is left."""
        while conn := self._pop(url):
            if not ended_while_idle(conn):
                return conn
            conn.close()
        return None

    def _pop(self, url: str) -> PgConnection | None:
        """The newest kept connection to `url` (closing those kept too long), or None."""
        conn = None
        with self._lock:
            stale = self._expire()
            for i in reversed(range(len(self._idle))):
                if self._idle[i][0] == url:
                    conn = self._idle.pop(i)[1]
                    break
        for old in stale:
            old.close()
        return conn

    def give(self, url: str, conn: PgConnection) -> None:
        """Keep `conn` for a later session when it may be reused (`reusable`; the oldest kept one closed when
        `keep` are); else close it."""
        if not reusable(conn):
            conn.close()
            return
        with self._lock:
            closing = self._expire()
            self._idle.append((url, conn, time.monotonic()))
            while len(self._idle) > self.keep:
                closing.append(self._idle.pop(0)[1])
        for old in closing:
            old.close()

    def _expire(self) -> list[PgConnection]:
        """Under the lock: drop what waited longer than `idle_for`, returned to be closed outside the lock."""
        now = time.monotonic()
        stale = [conn for _, conn, since in self._idle if now - since > self.idle_for]
        self._idle = [entry for entry in self._idle if now - entry[2] <= self.idle_for]
        return stale


# The sessions a worker runs at once (its watching loops, the lease renewals, its reviews' history); a moment
# with more opens more and closes the rest after it. A connection unused for a minute is closed.
KEPT_CONNECTIONS = IdleConnections(keep=8, idle_for=60.0)


class PostgresBackend:
    """The store's own database (read-write), never a review target. Its URL may hold a password:
    it is read from the environment and shown only redacted."""

    name = "postgresql"
    SCHEMA_LOCK = 0x64626372  # 'dbcr': serializes concurrent first-time schema creation

    def __init__(self, url: str, location: str):
        self._url = url
        self.location = location
        try:  # libpq quotes a token it cannot parse, a password's too: it never sees one
            self._public, self._password = password_apart(url, "store URL")
        except TargetError as exc:  # the URL itself withheld: its misread parts may be a password's
            raise StoreUnavailable("URL", str(exc)) from None

    def _connect(self) -> PgConnection:
        if conn := KEPT_CONNECTIONS.take(self._url):
            return conn
        return psycopg.connect(
            self._public,
            password=self._password,
            application_name=APPLICATION_NAME,
            connect_timeout=10,
        )

    @contextmanager
    def session(self) -> Iterator[Session]:
        failures = (psycopg.Error,)
        with _store_failures(self.location, failures):
            conn = self._connect()
        try:
            yield _PgSession(conn, self.location)
            with _store_failures(self.location, failures):
                conn.commit()
        except BaseException:
            try:
                if not conn.closed:  # a dropped connection has nothing to roll back
                    with _store_failures(self.location, failures):
                        conn.rollback()
            finally:
                conn.close()
            raise
        KEPT_CONNECTIONS.give(self._url, conn)

    def lock_schema(self, session: Session) -> None:
        session.run("SELECT pg_advisory_xact_lock(?)", [self.SCHEMA_LOCK])

    def identity(self) -> Hashable | None:
        """None: a URL does not name one database over time. A store database dropped and made again at the
        same address (a test suite's clusters reuse ports; an operator recreating the store) would be taken
        for one whose schema this process already made, and its tables would be missing. The schema is made
        at each open, under its advisory lock, as before."""
        return None
