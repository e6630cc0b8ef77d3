"""Faults thrown at a review from outside the product, by other sessions of the same server.

What production does to a review: a migration holding a table ACCESS EXCLUSIVE, an administrator
or a pooler ending sessions, a role with a tight statement_timeout, a restart, a privilege
revoked, a replica going away. Each is a context manager
that injects the fault for as long as the block (the review) runs. Used by the integration tests
and `bench faults`; they write only to the lab's own database, never through the review.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

import psycopg
from psycopg import sql


@contextmanager
def locked(dsn: str, table: str) -> Iterator[int]:
    """Another session holding `table` ACCESS EXCLUSIVE until the block ends; its PID."""
    with psycopg.connect(dsn, application_name="migration") as conn:
        conn.execute(
            sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(sql.Identifier(table))
        )
        try:
            yield conn.info.backend_pid
        finally:
            conn.rollback()


@contextmanager
def _beside(work: Callable[[threading.Event], object], name: str) -> Iterator[None]:
    """`work(stop)` in a thread beside the block: `stop` is set when the block ends, and the thread waited for."""
    stop = threading.Event()
    thread = threading.Thread(target=work, args=(stop,), name=name)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


@contextmanager
def terminating(dsn: str, every: float, older_than: float = 0.0) -> Iterator[list[int]]:
    """Every `every` seconds, end each review session (application_name dbcrew) older than `older_than` seconds; the PIDs ended."""
    ended: list[int] = []

    def run(stop: threading.Event) -> None:
        with psycopg.connect(dsn, autocommit=True, application_name="terminator") as conn:
            while not stop.wait(every):
                ended.extend(
                    row[0]
                    for row in conn.execute(
                        "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'dbcrew'"
                        " AND backend_start < clock_timestamp() - make_interval(secs => %s)",
                        (older_than,),
                    ).fetchall()
                )

    with _beside(run, "terminator"):
        yield ended


@contextmanager
def role_setting(dsn: str, role: str, name: str, value: str) -> Iterator[None]:
    """`ALTER ROLE role SET name = value` for the sessions opened in the block, reset after it."""
    with psycopg.connect(dsn, autocommit=True, application_name="dba") as conn:
        conn.execute(
            sql.SQL("ALTER ROLE {} SET {} = {}").format(
                sql.Identifier(role), sql.Identifier(name), sql.Literal(value)
            )
        )
        try:
            yield
        finally:
            conn.execute(
                sql.SQL("ALTER ROLE {} RESET {}").format(sql.Identifier(role), sql.Identifier(name))
            )


def later(after: float, action: Callable[[], None]) -> AbstractContextManager[None]:
    """`action()` once, `after` seconds into the block (an administrator acting mid-review), unless the block ended first."""
    return _beside(lambda stop: None if stop.wait(after) else action(), "outside")


def once_sent(dsn: str, mark: str, action: Callable[[], None]) -> AbstractContextManager[None]:
    """`action()` once another session sent a statement containing `mark` (the review reached that
    step of its own), unless the block ended first: a point in the review's progress, where a delay
    into the block lands earlier in it on a slow host than on a fast one."""

    def work(stop: threading.Event) -> None:
        with psycopg.connect(dsn, autocommit=True, application_name="dba") as conn:
            while not conn.execute(SENT_SQL, [mark]).fetchone():
                if stop.wait(0.02):
                    return
        action()

    return _beside(work, "outside")


SENT_SQL = "SELECT 1 FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND strpos(query, %s) > 0"


def _admin(dsn: str, statement: sql.Composed) -> None:
    with psycopg.connect(dsn, autocommit=True, application_name="dba") as conn:
        conn.execute(statement)


@contextmanager
def revoking(dsn: str, group: str, role: str, after: float) -> Iterator[None]:
    """`REVOKE group FROM role` `after` seconds into the block; granted back after it."""
    names = (sql.Identifier(group), sql.Identifier(role))
    try:
        with later(after, lambda: _admin(dsn, sql.SQL("REVOKE {} FROM {}").format(*names))):
            yield
    finally:
        _admin(dsn, sql.SQL("GRANT {} TO {}").format(*names))
