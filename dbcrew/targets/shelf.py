"""A review's idle sessions on its target, handed to its next read instead of a new session (`SessionShelf`).

A review opened twelve sessions on its target (measured on a review of a 1,000-row database, window 2 s: the
probe, its start time, four window samplers, the live window, activity, schema, settings, storage widths,
replication), each a new backend that forks, authenticates and loads its catalog caches (about 4 ms of the
server's CPU and 0.6 of the client's each, measured on the embedded PostgreSQL), then ends. Within a review
(`PostgresTarget.reusing_sessions`) a session that is done goes on the shelf and the next read takes it, so
the review opens as many as it reads at once, no more. That was still 7 to 9 a review (its operators start
together, and each window sampler held its session through the window): in a fleet of 1,000 on two cores, the
reviews' backends that came and went cost half a core. So the shelf also holds a review to a few sessions at
once (the run's `target_sessions`, 3): a read that finds none idle waits for one, and a window's readings rest
their session on the shelf in between (`Resumable.rest`): 3 sessions a review.

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
import time
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.pq import TransactionStatus

if TYPE_CHECKING:
    from dbcrew.targets.postgres import OwnSession

# seconds a read waits for one of the review's sessions before it opens one over the limit
PATIENCE = 1.0


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


def ended_while_idle(conn: psycopg.Connection[Any]) -> bool:
    """Whether a session kept idle may no longer be handed on: closed, broken, or the server spoke to it."""
    return conn.closed or conn.broken or spoke_while_idle(conn)


def reusable(conn: psycopg.Connection[Any]) -> bool:
    """Whether a session that is done may be handed to a later read: open, healthy, outside any transaction."""
    return (
        not (conn.closed or conn.broken) and conn.info.transaction_status == TransactionStatus.IDLE
    )


class SessionShelf:
    """Idle sessions by the statement timeout they were opened with; shared by copies of the review's target.

    At most `limit` sessions at once (idle, lent or being opened): a read that finds none idle and the limit
    reached waits for one to come back, for `patience` seconds at most, then opens one over the limit, so a
    read that already holds a session and asks for a second one is slowed, never stalled. An idle session with
    another statement timeout is closed to make room rather than waited beside."""

    def __init__(self, limit: int = 0, patience: float = PATIENCE) -> None:
        self._idle: dict[int, list[OwnSession]] = {}
        self._changed = threading.Condition()
        self._closed = False
        self._limit = limit  # 0: no limit
        self._patience = patience
        self._counted: set[int] = (
            set()
        )  # the sessions idle or lent, counted against the limit, by id
        self._opening = 0  # sessions `take` made room for, being opened
        self.opened = 0  # sessions opened for the review (the shelf's reason to be: kept low)

    def take(self, timeout_ms: int) -> OwnSession | None:
        """An idle session opened with `timeout_ms`, or None: the caller opens one and hands it in (`opening`, or
        `not_opened` when it could not)."""
        give_up = time.monotonic() + self._patience
        with self._changed:
            while True:
                idle = self._idle.get(timeout_ms)
                while idle:
                    conn = idle.pop()
                    if not ended_while_idle(conn):
                        return conn
                    # ended while on the shelf (a terminate, a restart, the idle timeout)
                    self._drop(conn)
                if not self._limit or len(self._counted) + self._opening < self._limit:
                    break
                other = next((conn for held in self._idle.values() for conn in held), None)
                if other is not None:
                    self._idle[other.statement_timeout_ms].remove(other)
                    self._drop(other)
                    continue
                left = give_up - time.monotonic()
                if left <= 0:
                    break  # over the limit rather than a read stalled behind its own session
                self._changed.wait(left)
            self._opening += 1
            return None

    def opening(self, conn: OwnSession) -> None:
        """`conn` was opened for the review after `take` said none was idle."""
        with self._changed:
            self.opened += 1
            self._opening -= 1
            self._counted.add(id(conn))

    def not_opened(self) -> None:
        """The session `take` made room for could not be opened."""
        with self._changed:
            self._opening -= 1
            self._changed.notify()

    def put_back(self, timeout_ms: int, conn: OwnSession) -> bool:
        """Keep `conn` for the review's next read; False (the caller closes it) when it cannot be reused."""
        with self._changed:
            if reusable(conn) and not self._closed:
                self._counted.add(id(conn))  # a reconnect's session is counted from now
                self._idle.setdefault(timeout_ms, []).append(conn)
                self._changed.notify()
                return True
            self._forget(conn)
        return False

    def _drop(self, conn: OwnSession) -> None:
        """Close an idle session the shelf will not hand on (called holding the lock)."""
        self._forget(conn)
        conn.close()

    def _forget(self, conn: OwnSession) -> None:
        if id(conn) in self._counted:
            self._counted.discard(id(conn))
            self._changed.notify()

    def close(self) -> None:
        """The review ended: close what is on the shelf; what comes back later is closed by its holder."""
        with self._changed:
            self._closed = True
            idle = [conn for held in self._idle.values() for conn in held]
            self._idle.clear()
        for conn in idle:
            conn.close()

    def __deepcopy__(self, memo: dict[int, Any]) -> SessionShelf:
        return self  # a copy of the review's target is still the review's: same shelf
