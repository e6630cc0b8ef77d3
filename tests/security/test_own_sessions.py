"""The review knows its own sessions by backend PID: a foreign session calling itself `dbcrew` is seen."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import psycopg

from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.operators.window import readers
from dbcrew.roles.crew.context import RunContext
from dbcrew.roles.spine import PlainPhases, review
from dbcrew.settings.run import Settings
from dbcrew.settings.thresholds import Thresholds
from dbcrew.targets import own_pids, parse_target

HELD_AND_WAITING = (
    "SELECT bool_and(CASE WHEN pid = %s THEN wait_event_type = 'Lock'"
    " ELSE clock_timestamp() - state_change > interval '1.5 s' END) AND count(*) = 2"
    " FROM pg_stat_activity WHERE pid IN (%s, %s)"
)


def test_a_foreign_session_named_dbcrew_holding_a_lock_is_reported(
    pg: EmbeddedPostgres, tmp_path: Path
) -> None:
    pg.psql("CREATE DATABASE impostor;")
    pg.psql(
        "CREATE TABLE accounts (id int PRIMARY KEY, balance int); INSERT INTO accounts VALUES (1, 0);",
        "impostor",
    )
    dsn = pg.dsn("impostor")
    holder = psycopg.connect(
        dsn, application_name="dbcrew"
    )  # a transaction left open, holding a row lock
    holder.execute("SELECT * FROM accounts WHERE id = 1 FOR UPDATE")
    waiter = psycopg.connect(dsn, autocommit=True, application_name="dbcrew")
    blocked = threading.Thread(
        target=lambda: waiter.execute("UPDATE accounts SET balance = 1 WHERE id = 1"), daemon=True
    )
    blocked.start()
    holder_pid, waiter_pid = holder.info.backend_pid, waiter.info.backend_pid
    try:
        # Until the waiter waits on the holder's lock and the holder has been idle in its transaction
        # past the threshold below, by the server's clock: conditions, not a pause that a loaded host
        # could outrun before the waiter's thread ran its UPDATE.
        with psycopg.connect(dsn, autocommit=True) as watcher:
            deadline = time.monotonic() + 60
            while watcher.execute(
                HELD_AND_WAITING, [waiter_pid, waiter_pid, holder_pid]
            ).fetchone() != (True,):
                assert time.monotonic() < deadline, "the waiter never waited on the holder's lock"
                time.sleep(0.05)
        settings = Settings(
            window_seconds=1.5,
            activity_samples=3,
            thresholds=Thresholds(idle_in_transaction_seconds=1.0),
        )
        run = RunContext(target=parse_target(dsn), settings=settings, out_dir=tmp_path)
        report = review(run, PlainPhases)
    finally:
        holder.rollback()
        blocked.join(10)
        holder.close()
        waiter.close()
    found = {(f.code, f.object) for f in report.findings}
    assert ("idle_in_transaction", f"pid:{holder_pid}") in found, found
    assert ("blocking_locks", f"pid:{waiter_pid}") in found, found
    blocking = next(f for f in report.findings if f.code == "blocking_locks")
    assert str(holder_pid) in blocking.evidence["blocked_by"]
    sessions = {
        o
        for code, o in found
        if code in ("idle_in_transaction", "long_running_query", "blocking_locks")
    }
    assert sessions == {f"pid:{holder_pid}", f"pid:{waiter_pid}"}, "the review saw itself"
    assert own_pids() == [], "every review session was closed and forgotten"


def test_a_sample_leaves_out_the_sessions_own_to_its_database_and_the_horizon_those_of_the_server(
    pg: EmbeddedPostgres,
) -> None:
    """A watcher holds a session on every database it watches: a session sample of one database is told of the
    crew's sessions there (none elsewhere can appear in it), a server-wide read of all of them."""
    pg.psql("CREATE DATABASE own_here; CREATE DATABASE own_there;")
    here, there = parse_target(pg.dsn("own_here")), parse_target(pg.dsn("own_there"))
    with here.connect() as a, here.connect() as b, there.connect() as c:
        mine = {a.info.backend_pid, b.info.backend_pid}
        assert own_pids(a, this_database=True) == sorted(mine)
        assert own_pids(a) == sorted(mine | {c.info.backend_pid})
        sampled = {row["pid"] for row in readers.sessions(a, 1)}
        assert not sampled & mine, "the sample saw the crew's own sessions"
        with psycopg.connect(pg.dsn("own_here"), application_name="dbcrew") as foreign:
            assert foreign.info.backend_pid in {row["pid"] for row in readers.sessions(a, 2)}
    assert own_pids() == []
