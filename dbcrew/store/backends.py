"""The store's two backends behind one small interface: a DuckDB file or a PostgreSQL database.

The store's SQL is written once, in the subset both understand (TEXT, BIGINT, DOUBLE PRECISION,
BOOLEAN, TIMESTAMPTZ, `CREATE ... IF NOT EXISTS`, `INSERT ... ON CONFLICT`), with `?` parameters;
the PostgreSQL backend turns them into psycopg's `%s`. Each session is one transaction on its own
connection, so no process holds the DuckDB file between calls and several workers share a
PostgreSQL store.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import duckdb
import psycopg

# DuckDB admits one writing process per file; another process's review may hold it for a moment.
DUCKDB_LOCK_RETRIES = 50
DUCKDB_LOCK_PAUSE = 0.2
APPLICATION_NAME = "dbcrew-store"

# Within one process, DuckDB lets two connections to a file write concurrently and fails the one that
# conflicts ("Catalog write-write conflict"): reviews running in threads of one worker take turns.
_DUCKDB_FILE_LOCKS: dict[Path, threading.RLock] = {}
_DUCKDB_FILE_LOCKS_GUARD = threading.Lock()


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


def utc(value: datetime) -> datetime:
    """Both backends hand back aware timestamps; DuckDB's carry the local zone, PostgreSQL's the session's."""
    return value.astimezone(UTC)


class _DuckSession:
    def __init__(self, conn: duckdb.DuckDBPyConnection):
        self._conn = conn

    def run(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cursor = self._conn.execute(sql, list(params))
        return cursor.fetchall() if cursor.description else []


class DuckDBBackend:
    name = "duckdb"

    def __init__(self, path: Path):
        self.path = Path(path).expanduser()
        self.location = str(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

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
        with _duckdb_file_lock(self.path):
            conn = self._connect()
            try:
                conn.begin()
                yield _DuckSession(conn)
                conn.commit()
            except BaseException:
                conn.rollback()
                raise
            finally:
                conn.close()

    def lock_schema(self, session: Session) -> None:
        """One session writes a DuckDB file at a time (one process by DuckDB's file lock, one thread by ours)."""


class _PgSession:
    def __init__(self, conn: psycopg.Connection[tuple[Any, ...]]):
        self._conn = conn

    def run(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cursor = self._conn.execute(sql.replace("?", "%s"), list(params))
        return cursor.fetchall() if cursor.description else []


class PostgresBackend:
    """The store's own database (read-write), never a review target. Its URL may hold a password:
    it is read from the environment and shown only redacted."""

    name = "postgresql"
    SCHEMA_LOCK = 0x64626372  # 'dbcr': serializes concurrent first-time schema creation

    def __init__(self, url: str, location: str):
        self._url = url
        self.location = location

    @contextmanager
    def session(self) -> Iterator[Session]:
        with psycopg.connect(
            self._url, application_name=APPLICATION_NAME, connect_timeout=10
        ) as conn:
            yield _PgSession(conn)

    def lock_schema(self, session: Session) -> None:
        session.run("SELECT pg_advisory_xact_lock(?)", [self.SCHEMA_LOCK])
