"""A review session that outlives its backend: reconnect and resume instead of starting over.

An administrator's `pg_terminate_backend`, a pooler's or an idle-session timeout, a failover: the
server ends a session that was healthy. A collector that samples across a window on one session
lost everything it had sampled and started the window again (a worker retry), and with sessions
ended every few seconds it never finished. Through a `Resumable`, each read is one `run(read)`:
when the server ended the connection, a new session is opened and only that read runs again;
what the collector gathered before stays. A connection that dies before completing one read after
a reconnect is not progress: the error goes to the worker (and the monitor) as before.

A restart (`pg_ctl restart -m fast`, a failover) ends the session and then refuses new ones for a
while ("the database system is shutting down / starting up", connection refused): the reconnect
waits for the server with doubling pauses, for at most `wait` seconds (the run's
target_wait_seconds), before the error goes to the worker.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg

from dbcrew import stopping
from dbcrew.errors import TargetError

if TYPE_CHECKING:
    from dbcrew.targets.postgres import PostgresTarget

T = TypeVar("T")
MAX_RECONNECTS = 100  # a bound on a run whose sessions are ended faster than it reads
FIRST_PAUSE = 0.1
MAX_PAUSE = 1.0  # a restart takes about a second: a longer pause only adds to the wait


class Resumable:
    """One logical session over as many server sessions as it takes; `reconnects` says how many, and
    `refused` how many connection attempts the server refused meanwhile (it was down: an outage, not
    only an ended session)."""

    def __init__(
        self, target: PostgresTarget, *, wait: float = 0.0, resume: bool = True, **connect: Any
    ):
        self._target = target
        self._wait = wait
        self._resume = resume
        self._connect = connect
        self._conn: psycopg.Connection[Any] | None = None
        # the last session ended and no read has yet run on the one that replaced it
        self._ended = False
        self.reconnects = 0
        self.refused = 0  # connection attempts refused while waiting for the server: an outage

    def run(self, read: Callable[[psycopg.Connection[Any]], T]) -> T:
        """`read(conn)` on the live session; once more on a new one when the server ended it during the read."""
        while True:
            if self._conn is None:
                self._conn = (
                    self._reconnect() if self._ended else self._target.borrow(**self._connect)
                )
            conn = self._conn
            try:
                result = read(conn)
            except psycopg.OperationalError:
                if not (conn.broken or conn.closed):
                    raise  # the statement failed, the session did not: not ours to repeat
                # a reconnect's session that ended before its first read: no progress
                stalled = self._ended
                self.close()
                if stalled or not self._resume or self.reconnects >= MAX_RECONNECTS:
                    raise
                self.reconnects += 1
                self._ended = True
                continue
            self._ended = False
            return result

    def rest(self) -> None:
        """Between reads far apart (a window's two readings, its spaced samples): the live session goes back to
        the review's shelf, where the review's other reads use it meanwhile, and the next read takes one again. A
        review's operators that wait out the window at once then hold no session each while they wait: the
        review opens as many sessions as it reads on at once, not as many as it has waiting. Outside a review (no
        shelf) the session stays: given back there, it would be closed, and the next read open another."""
        if self._target.reusing:
            self.close()

    def _reconnect(self) -> psycopg.Connection[Any]:
        """A new session after the server ended the last one, waiting (bounded) while it restarts."""
        started = time.monotonic()
        pause = FIRST_PAUSE
        while True:
            try:
                return self._target.connect(**self._connect)
            except TargetError:
                self.refused += 1
                left = self._wait - (time.monotonic() - started)
                if left <= 0 or stopping.pause(min(pause, left)):
                    raise
                pause = min(pause * 2, MAX_PAUSE)

    def close(self) -> None:
        """Done with the session: back to the review's shelf when it can be reused (an ended one is closed)."""
        if self._conn is not None:
            self._target.give_back(self._conn)
            self._conn = None

    def note(self) -> str:
        return resumed_note(self.reconnects)


def resumed_note(reconnects: int) -> str:
    """What a collector's summary says about its resumed session: empty when the server never ended it."""
    return f", resumed after {reconnects} ended session(s)" if reconnects else ""


@contextmanager
def resumable(
    target: PostgresTarget, *, wait: float = 0.0, resume: bool = True, **connect: Any
) -> Iterator[Resumable]:
    """A `Resumable` closed after the block; with `resume` False, an ended session fails the read as a plain session would."""
    session = Resumable(target, wait=wait, resume=resume, **connect)
    try:
        yield session
    finally:
        session.close()
