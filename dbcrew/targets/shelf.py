"""A review's idle sessions on its target, handed to its next read instead of a new session (`SessionShelf`).

A review opened twelve sessions on its target (measured on a review of a 1,000-row database, window 2 s: the
probe, its start time, four window samplers, the live window, activity, schema, settings, storage widths,
replication), each a new backend that forks, authenticates and loads its catalog caches (about 4 ms of the
server's CPU and 0.6 of the client's each, measured on the embedded PostgreSQL), then ends. Within a review
(`PostgresTarget.reusing_sessions`) a session that is done goes on the shelf and the next read takes it, so
the review opens as many as it reads at once, no more.

Only a session that is open, healthy and outside any transaction goes back, and only to the shelf of the
review that opened it, under the same statement timeout; one the server ended while it was on the shelf is
closed, not handed on (`spoke_while_idle`); the session keeps its read-only options, and what
an operator changes for longer than a transaction it undoes itself (the advisor resets hypopg, the hidden
index is shown again). When the review ends, every session on the shelf is closed, and one handed back after
that is closed at once.
"""

from __future__ import annotations

import select
import threading
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.pq import TransactionStatus

if TYPE_CHECKING:
    from dbcrew.targets.postgres import OwnSession


def spoke_while_idle(conn: psycopg.Connection[Any]) -> bool:
    """Whether the server sent something to an idle session since its last read (without waiting).

    An idle autocommit session hears nothing until it asks, except its end: a backend that is terminated, shut
    down or timed out sends its FATAL error and closes the socket, which psycopg notices only at the next
    statement, and that statement would fail. So a shelved session the server spoke to (or whose socket cannot
    be read) is not handed on; a fresh session would have been opened in its place before the shelf anyway."""
    try:
        readable, _, _ = select.select([conn.pgconn.socket], [], [], 0)
    except (OSError, ValueError, psycopg.OperationalError):
        return True
    return bool(readable)


def reusable(conn: psycopg.Connection[Any]) -> bool:
    """Whether a session that is done may be handed to a later read: open, healthy, outside any transaction."""
    return (
        not (conn.closed or conn.broken) and conn.info.transaction_status == TransactionStatus.IDLE
    )


class SessionShelf:
    """Idle sessions by the statement timeout they were opened with; shared by copies of the review's target."""

    def __init__(self) -> None:
        self._idle: dict[int, list[OwnSession]] = {}
        self._lock = threading.Lock()
        self._closed = False
        self.opened = 0  # sessions opened for the review (the shelf's reason to be: kept low)

    def take(self, timeout_ms: int) -> OwnSession | None:
        """An idle session opened with `timeout_ms`, or None (the caller opens one and says so: `opening`)."""
        while True:
            with self._lock:
                idle = self._idle.get(timeout_ms)
                if not idle:
                    return None
                conn = idle.pop()
            if not (conn.closed or conn.broken or spoke_while_idle(conn)):
                return conn
            conn.close()  # ended while on the shelf (a terminate, a restart, the server's idle timeout)

    def opening(self) -> None:
        with self._lock:
            self.opened += 1

    def put_back(self, timeout_ms: int, conn: OwnSession) -> bool:
        """Keep `conn` for the review's next read; False (the caller closes it) when it cannot be reused."""
        with self._lock:
            if reusable(conn) and not self._closed:
                self._idle.setdefault(timeout_ms, []).append(conn)
                return True
        return False

    def close(self) -> None:
        """The review ended: close what is on the shelf; what comes back later is closed by its holder."""
        with self._lock:
            self._closed = True
            idle = [conn for held in self._idle.values() for conn in held]
            self._idle.clear()
        for conn in idle:
            conn.close()

    def __deepcopy__(self, memo: dict[int, Any]) -> SessionShelf:
        return self  # a copy of the review's target is still the review's: same shelf
