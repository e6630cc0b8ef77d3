"""The clinic: one database holding a positive and a negative specimen of every per-object health code.

Each specimen is made the way it happens in production (a failed concurrent build, a bulk delete
with autovacuum off, a bigint sequence feeding an integer column...), next to a near miss that a
careless check would also flag. Conditions that only exist while sessions hold them (idle
transactions, lock waits, long statements, spills, cache misses) are started by `hold`.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg

from dbcrew.operators.collect.catalog import XMIN_HORIZON_SQL
from tests.integration.health.sessions import Held

SCHEMA = """
CREATE EXTENSION pg_stat_statements;
-- index_unused / index_duplicate: dup(a) is a prefix of dup(a, b); the partial and pattern-ops twins are not duplicates
CREATE TABLE dup (id int PRIMARY KEY, a int, b int, t text);
INSERT INTO dup SELECT g, g % 1000, g % 7, 'v' || g FROM generate_series(1, 60000) g;
CREATE INDEX dup_a_idx ON dup (a);
CREATE INDEX dup_a_b_idx ON dup (a, b);
CREATE INDEX dup_a_partial_idx ON dup (a) WHERE b > 3;
CREATE INDEX dup_t_idx ON dup (t);
CREATE INDEX dup_t_pattern_idx ON dup (t text_pattern_ops);

-- index_invalid: a unique concurrent build over duplicate values fails and leaves the index invalid
CREATE TABLE inv (id int PRIMARY KEY, code int);
INSERT INTO inv SELECT g, g % 10 FROM generate_series(1, 1000) g;
CREATE INDEX inv_code_ok_idx ON inv (code);

-- fk_without_index / table_without_primary_key
CREATE TABLE parent (id int PRIMARY KEY);
INSERT INTO parent SELECT generate_series(1, 100);
CREATE TABLE child_bare (id int PRIMARY KEY, parent_id int REFERENCES parent (id));
CREATE TABLE child_indexed (id int PRIMARY KEY, parent_id int REFERENCES parent (id));
CREATE INDEX child_indexed_parent_idx ON child_indexed (parent_id);
CREATE TABLE nopk (a int, b text);
INSERT INTO nopk VALUES (1, 'x');

-- dead_tuples_high + autovacuum_disabled: a bulk delete nobody vacuums; its twin is vacuumed
CREATE TABLE churn (id int PRIMARY KEY, v text) WITH (autovacuum_enabled = false);
INSERT INTO churn SELECT g, repeat('x', 20) FROM generate_series(1, 40000) g;
CREATE TABLE churn_vacuumed (id int PRIMARY KEY, v text);
INSERT INTO churn_vacuumed SELECT g, repeat('x', 20) FROM generate_series(1, 40000) g;

-- statistics_stale: loaded and never analyzed (autovacuum would analyze it, so it is off here)
CREATE TABLE unanalyzed (id int PRIMARY KEY, v int) WITH (autovacuum_enabled = false);
INSERT INTO unanalyzed SELECT g, g FROM generate_series(1, 5000) g;
CREATE TABLE analyzed (id int PRIMARY KEY, v int);
INSERT INTO analyzed SELECT g, g FROM generate_series(1, 5000) g;

-- sequence_exhaustion: an int sequence near its end, a bigint sequence feeding an int column, a healthy one
CREATE SEQUENCE seq_int_nearly_done AS integer;
SELECT setval('seq_int_nearly_done', 2000000000);
CREATE TABLE narrow_ids (id int NOT NULL, v int);
CREATE SEQUENCE seq_bigint_for_int_column AS bigint OWNED BY narrow_ids.id;
ALTER TABLE narrow_ids ALTER COLUMN id SET DEFAULT nextval('seq_bigint_for_int_column');
SELECT setval('seq_bigint_for_int_column', 1900000000);
CREATE SEQUENCE seq_healthy AS integer;
SELECT setval('seq_healthy', 1000);

-- index_missing: a large table scanned for an unindexed filter column; its twin has the index
CREATE TABLE events (id int PRIMARY KEY, account int, kind int, payload text);
INSERT INTO events SELECT g, g % 5000, g % 13, md5(g::text) FROM generate_series(1, 50000) g;
CREATE TABLE events_indexed (id int PRIMARY KEY, account int, kind int, payload text);
INSERT INTO events_indexed SELECT g, g % 5000, g % 13, md5(g::text) FROM generate_series(1, 50000) g;
CREATE INDEX events_indexed_account_idx ON events_indexed (account);
CREATE INDEX events_payload_idx ON events (payload);

-- indexes_too_many: ten indexes on a table that is mostly written; the same on a read-mostly table
CREATE TABLE ledger (id int PRIMARY KEY, c1 int, c2 int, c3 int, c4 int, c5 int, c6 int, c7 int, c8 int, c9 int);
CREATE TABLE catalog_ro (id int PRIMARY KEY, c1 int, c2 int, c3 int, c4 int, c5 int, c6 int, c7 int, c8 int, c9 int);
DO $$
DECLARE t text; i int;
BEGIN
  FOREACH t IN ARRAY ARRAY['ledger', 'catalog_ro'] LOOP
    FOR i IN 1..9 LOOP
      EXECUTE format('CREATE INDEX %I ON %I (c%s)', t || '_c' || i || '_idx', t, i);
    END LOOP;
  END LOOP;
END $$;
INSERT INTO ledger SELECT g, g, g, g, g, g, g, g, g, g FROM generate_series(1, 3000) g;
INSERT INTO catalog_ro SELECT g, g, g, g, g, g, g, g, g, g FROM generate_series(1, 100) g;

-- table_bloat / index_bloat: two thirds deleted and vacuumed (space stays inside the files); its twin freshly loaded
CREATE TABLE bloated (id int PRIMARY KEY, v text) WITH (autovacuum_enabled = false);
INSERT INTO bloated SELECT g, md5(g::text) FROM generate_series(1, 150000) g;
CREATE TABLE compact (id int PRIMARY KEY, v text);
INSERT INTO compact SELECT g, md5(g::text) FROM generate_series(1, 150000) g;

-- cache_hit_ratio_low: a table much larger than a quarter of shared_buffers, scanned during the window
CREATE TABLE archive_scan (id int, payload text);
INSERT INTO archive_scan SELECT g, repeat(md5(g::text), 4) FROM generate_series(1, 250000) g;

-- locks and sessions
CREATE TABLE accounts (id int PRIMARY KEY, balance int);
INSERT INTO accounts SELECT g, 0 FROM generate_series(1, 10) g;

-- xid / mxid wraparound: tables created before the IDs below are consumed; their twins frozen afterwards
CREATE TABLE xid_old (id int PRIMARY KEY);
CREATE TABLE xid_frozen (id int PRIMARY KEY);
CREATE TABLE shared_rows (id int PRIMARY KEY);
INSERT INTO shared_rows VALUES (1);
"""

DELETES = [
    "DELETE FROM churn WHERE id % 2 = 0",
    "DELETE FROM churn_vacuumed WHERE id % 2 = 0",
    "DELETE FROM bloated WHERE id % 3 <> 0",
]
AFTER = [
    "VACUUM churn_vacuumed",
    "VACUUM bloated",
    *(
        f"ANALYZE {t}"
        for t in (
            "bloated",
            "compact",
            "analyzed",
            "events",
            "events_indexed",
            "archive_scan",
            "churn_vacuumed",
        )
    ),
]

CONSUMED_XIDS = 3000
CONSUMED_MXIDS = 40


def _consume_xids(conn: psycopg.Connection[Any], count: int) -> None:
    conn.execute(
        "CREATE PROCEDURE burn_xids(n int) LANGUAGE plpgsql AS $$ BEGIN FOR i IN 1..n LOOP PERFORM pg_current_xact_id(); COMMIT; END LOOP; END $$"
    )
    conn.execute("CALL burn_xids(%s)", [count])


def _consume_mxids(dsn: str, count: int) -> None:
    """Two transactions share-locking the same row make a multixact."""
    with psycopg.connect(dsn) as first, psycopg.connect(dsn) as second:
        for _ in range(count):
            first.execute("SELECT 1 FROM shared_rows WHERE id = 1 FOR SHARE")
            second.execute("SELECT 1 FROM shared_rows WHERE id = 1 FOR SHARE")
            first.commit()
            second.commit()


def flush_statistics(conn: psycopg.Connection[Any]) -> None:
    """Land this session's pending table statistics now (PostgreSQL 15+): the flush runs when the
    session goes idle after the call, before the server answers ready, so it has landed on return."""
    conn.execute("SELECT pg_stat_force_next_flush()")


def _request_checkpoints_by_wal(conn: psycopg.Connection[Any], count: int) -> None:
    """End `count` WAL segments, each after a write, waiting for the checkpoint each requests (the
    server's max_wal_size is its minimum, so every segment ended requests one)."""
    for _ in range(count):
        before = _requested_checkpoints(conn)
        conn.execute(
            "CREATE TEMP TABLE IF NOT EXISTS wal_step (a int); INSERT INTO wal_step VALUES (1)"
        )
        conn.execute("SELECT pg_switch_wal()")
        for _ in range(200):
            if _requested_checkpoints(conn) > before:
                break
            time.sleep(0.02)
        else:
            raise AssertionError("the server requested no checkpoint for an ended WAL segment")


def _requested_checkpoints(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT num_requested FROM pg_stat_checkpointer").fetchone()
    assert row is not None
    return int(row[0])


def _assert_frozen(conn: psycopg.Connection[Any], table: str) -> None:
    """The near-miss specimen is only one if the freeze advanced relfrozenxid to now: nothing may hold the horizon."""
    row = conn.execute(
        "SELECT age(relfrozenxid) FROM pg_class WHERE relname = %s", [table]
    ).fetchone()
    assert row is not None and row[0] < 10, (
        f"VACUUM (FREEZE) left {table} {row and row[0]} XIDs old; the xmin horizon is held by "
        f"{conn.execute(XMIN_HORIZON_SQL).fetchall()}"
    )


def build(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SCHEMA)
        try:
            conn.execute("CREATE UNIQUE INDEX CONCURRENTLY inv_code_uniq ON inv (code)")
        except psycopg.errors.UniqueViolation:
            pass  # the failed build is the specimen: it leaves inv_code_uniq invalid
        # A backend flushes its pending table statistics at most once a second: counts of rows
        # changed just before a VACUUM or ANALYZE could land after it and read as dead tuples or
        # changes since. Both sessions flush theirs before the vacuums and analyzes below.
        with psycopg.connect(dsn, autocommit=True) as deleter:
            for statement in DELETES:
                deleter.execute(statement)
            flush_statistics(deleter)
        flush_statistics(conn)
        for statement in AFTER:
            conn.execute(statement)
        # index_missing / index_unused: the workload that makes the statistics
        for i in range(25):
            conn.execute("SELECT count(*) FROM events WHERE account = %s", [i])
            conn.execute("SELECT count(*) FROM events_indexed WHERE account = %s", [i])
        for i in range(50):
            conn.execute("SELECT * FROM dup WHERE a = %s AND b = 2", [i])
            conn.execute("SELECT * FROM dup WHERE t = %s", [f"v{i}"])
        for i in range(300):
            conn.execute("SELECT * FROM catalog_ro WHERE c1 = %s", [i])
        # slow_query: a statement averaging 60 ms; a fast one as its near miss
        for _ in range(12):
            conn.execute("SELECT pg_sleep(0.06)")
            conn.execute("SELECT 40 + 2")
        _consume_mxids(dsn, CONSUMED_MXIDS)
        _consume_xids(conn, CONSUMED_XIDS)
        conn.execute("VACUUM (FREEZE) xid_frozen")
        _assert_frozen(conn, "xid_frozen")
        _request_checkpoints_by_wal(
            conn, 12
        )  # checkpoints_too_frequent: WAL-requested checkpoints dominate


def query_id(dsn: str, pattern: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT queryid FROM pg_stat_statements WHERE query LIKE %s AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())",
            [pattern],
        ).fetchone()
    assert row is not None, f"no statement like {pattern!r}"
    return int(row[0])


def hold(dsn: str, idle_connections: int) -> tuple[Held, dict[str, int]]:
    """Start the conditions that exist only while sessions hold them; returns the pids by role."""
    held = Held(dsn)
    for _ in range(idle_connections):  # connections_saturation
        held.connect()
    idle_tx = held.connect()
    idle_tx.execute("BEGIN; SELECT balance FROM accounts WHERE id = 9")
    idle_plain = held.connect()
    idle_plain.execute("SELECT 1")
    holder = held.connect()
    holder.execute("BEGIN; UPDATE accounts SET balance = balance + 1 WHERE id = 1")
    waiter = held.in_background("UPDATE accounts SET balance = balance - 1 WHERE id = 1")
    sleeper = held.in_background("SELECT pg_sleep(600)")
    held.loop(lambda c: c.execute("SET work_mem = '64kB'; SELECT count(DISTINCT v) FROM compact"))
    held.loop(lambda c: c.execute("SELECT count(*) FROM archive_scan"))
    # Nothing here may consume XIDs without bound: the wraparound near miss (xid_frozen) is as old
    # as the XIDs consumed after its freeze, and must stay under the clinic's warning age while
    # the review runs (the ledger's writes that make it write-heavy are loaded by build).
    pids = {
        name: held.pid(conn)
        for name, conn in (
            ("idle_tx", idle_tx),
            ("idle_plain", idle_plain),
            ("holder", holder),
            ("waiter", waiter),
            ("sleeper", sleeper),
        )
    }
    return held, pids
