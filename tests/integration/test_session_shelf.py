"""A review's sessions on its target are reused (dbcrew/targets/shelf.py), on the session's real PostgreSQL: a
read takes a session another read of the review is done with, keeps the read-only options and the timeout it
asked for, never gets one left in a transaction or ended by the server, and none outlives the review."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.targets import PostgresTarget, own_pids, parse_target, resumable


@pytest.fixture()
def target(pg: EmbeddedPostgres) -> PostgresTarget:
    return parse_target(pg.dsn())


def pid(conn: psycopg.Connection[dict[str, object]]) -> int:
    return conn.info.backend_pid


def test_reads_one_after_another_share_a_session_and_reads_at_once_have_their_own(
    target: PostgresTarget,
):
    with target.reusing_sessions() as shelf:
        with target.session() as first:
            one = pid(first)
            with target.session() as beside:  # at the same time: a session of its own
                two = pid(beside)
        assert one != two
        with target.session() as later, target.model_copy().session() as copy:
            assert {pid(later), pid(copy)} == {one, two}, "a copy of the target is the review's too"
            assert later.execute("SHOW default_transaction_read_only").fetchone() == {
                "default_transaction_read_only": "on"
            }
        with resumable(target) as window:
            assert window.run(pid) in {one, two}
        assert shelf.opened == 2
    with target.session() as outside:
        pass
    assert outside.closed, "outside a review, a session is closed when done"


def test_a_read_gets_only_a_session_with_its_own_timeout(target: PostgresTarget):
    with target.reusing_sessions():
        with target.session() as plain:
            kept = pid(plain)
        with target.session(statement_timeout_ms=50) as short:
            assert pid(short) != kept
            assert short.execute("SHOW statement_timeout").fetchone() == {
                "statement_timeout": "50ms"
            }
        with target.session() as plain_again:
            assert pid(plain_again) == kept
            assert plain_again.execute("SHOW statement_timeout").fetchone() == {
                "statement_timeout": f"{target.statement_timeout_ms // 1000}s"
            }


def test_a_session_in_a_transaction_or_ended_by_the_server_is_not_handed_on(
    target: PostgresTarget, pg: EmbeddedPostgres
):
    with target.reusing_sessions():
        with target.session() as open_transaction:
            open_transaction.execute("BEGIN")
            left_open = pid(open_transaction)
        assert open_transaction.closed
        with target.session() as doomed:
            ended = pid(doomed)
        with psycopg.connect(pg.dsn(), autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s, 5000)", [ended])
        with target.session() as fresh:
            assert pid(fresh) not in {left_open, ended}
            assert fresh.execute("SELECT 1 AS one").fetchone() == {"one": 1}


def test_no_session_of_the_review_outlives_it(target: PostgresTarget, pg: EmbeddedPostgres):
    with target.reusing_sessions():
        with target.session() as a, target.session() as b:
            pids = {pid(a), pid(b)}
        late = target.borrow()
    assert own_pids() == [pid(late)], "the shelf's sessions were not closed with the review"
    target.give_back(late)  # after the review: closed, not shelved
    assert late.closed and own_pids() == []
    with psycopg.connect(pg.dsn(), autocommit=True) as admin:
        deadline = time.monotonic() + 60  # a backend leaves a moment after its client closed it
        while admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", [sorted(pids)]
        ).fetchone() != (0,):
            assert time.monotonic() < deadline, "a shelved session's backend is still there"
            time.sleep(0.05)


def test_at_its_limit_a_read_waits_for_a_session_of_the_review_to_come_back(target: PostgresTarget):
    with target.reusing_sessions(limit=1, patience=600) as shelf:
        first = target.borrow()
        asking = threading.Event()
        got: list[int] = []

        def second_read() -> None:
            asking.set()
            with target.session() as conn:
                got.append(pid(conn))

        reader = threading.Thread(target=second_read)
        reader.start()
        assert asking.wait(60)
        held = pid(first)
        target.give_back(first)
        reader.join(60)
        assert got == [held], "the waiting read was handed the session given back"
        assert shelf.opened == 1


def test_a_read_that_already_holds_the_limit_opens_one_more_after_its_patience(
    target: PostgresTarget,
):
    with target.reusing_sessions(limit=1, patience=0.05) as shelf:
        with target.session() as outer, target.session() as inner:
            assert pid(outer) != pid(inner)
        assert shelf.opened == 2
        with target.session() as again:  # both went back: the review's own again, no third
            assert pid(again) in {pid(outer), pid(inner)}
        assert shelf.opened == 2


def test_at_its_limit_an_idle_session_of_another_timeout_makes_room(target: PostgresTarget):
    with target.reusing_sessions(limit=1, patience=600) as shelf:
        with target.session() as plain:
            pass
        with target.session(statement_timeout_ms=50) as short:
            assert short.execute("SHOW statement_timeout").fetchone() == {
                "statement_timeout": "50ms"
            }
        assert plain.closed, "the idle session of the other timeout was closed, not kept beside"
        assert shelf.opened == 2


def test_a_window_rests_its_session_between_its_readings(target: PostgresTarget):
    """A window's reads far apart give their session back in between: another read of the review uses it."""
    with target.reusing_sessions(limit=1, patience=600) as shelf, resumable(target) as window:
        before = window.run(pid)
        window.rest()
        with target.session() as meanwhile:
            assert pid(meanwhile) == before
        assert window.run(pid) == before
        assert shelf.opened == 1


def test_outside_a_review_a_resting_window_keeps_its_session(target: PostgresTarget):
    """With no shelf to rest on, giving the session back would close it and the next reading open another."""
    with resumable(target) as window:
        before = window.run(pid)
        window.rest()
        assert window.run(pid) == before
