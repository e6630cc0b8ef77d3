"""The PostgreSQL store keeps a finished session's connection for the next one (dbcrew/store/backends.py
IdleConnections), on a real PostgreSQL: reused when healthy, replaced when the server ended it, never kept
after a failed session, bounded in number and in idle time."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.store.backends import IdleConnections, PostgresBackend, StoreUnavailable


@pytest.fixture()
def store_dsn(pg: EmbeddedPostgres) -> str:
    name = f"conns_{uuid.uuid4().hex[:8]}"
    pg.psql(f"CREATE DATABASE {name};")
    return pg.dsn(name)


def backend_pid(backend: PostgresBackend) -> int:
    with backend.session() as session:
        return int(session.run("SELECT pg_backend_pid()")[0][0])


def test_the_next_session_runs_on_the_connection_the_last_one_finished_with(store_dsn: str):
    backend = PostgresBackend(store_dsn, "store")
    first = backend_pid(backend)
    assert backend_pid(backend) == first
    assert backend_pid(PostgresBackend(store_dsn, "store")) == first, "kept per URL, not per object"


def test_a_connection_the_server_ended_is_replaced_without_failing_the_session(
    pg: EmbeddedPostgres, store_dsn: str
):
    backend = PostgresBackend(store_dsn, "store")
    first = backend_pid(backend)
    pg.psql(f"SELECT pg_terminate_backend({first}, 10000);")  # returns once it has ended
    assert backend_pid(backend) != first


def test_a_failed_session_is_rolled_back_and_its_connection_not_kept(store_dsn: str):
    backend = PostgresBackend(store_dsn, "store")
    with backend.session() as session:
        session.run("CREATE TABLE kept (n int)")
    with pytest.raises(StoreUnavailable), backend.session() as session:
        failed = int(session.run("SELECT pg_backend_pid()")[0][0])
        session.run("INSERT INTO kept VALUES (1)")
        session.run("SELECT no_such_column FROM kept")
    with backend.session() as session:
        assert session.run("SELECT count(*) FROM kept") == [(0,)]
        assert int(session.run("SELECT pg_backend_pid()")[0][0]) != failed


def test_kept_connections_are_bounded_in_number_and_in_idle_time(store_dsn: str):
    kept = IdleConnections(keep=2, idle_for=3600.0)
    conns = [psycopg.connect(store_dsn) for _ in range(3)]
    for conn in conns:
        kept.give(store_dsn, conn)
    assert conns[0].closed and not conns[1].closed and not conns[2].closed
    assert kept.take(store_dsn) is conns[2] and kept.take(store_dsn) is conns[1]
    assert kept.take(store_dsn) is None
    assert kept.take("postgresql://elsewhere/db") is None

    stale = IdleConnections(keep=2, idle_for=-1.0)  # every kept connection has waited too long
    conn = psycopg.connect(store_dsn)
    stale.give(store_dsn, conn)
    assert stale.take(store_dsn) is None and conn.closed

    busy = psycopg.connect(store_dsn)
    busy.execute("SELECT 1")  # a transaction left open is never kept
    kept.give(store_dsn, busy)
    assert busy.closed and kept.take(store_dsn) is None
    for conn in conns:
        conn.close()
