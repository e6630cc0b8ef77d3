"""statistics_stale against a late statistics flush (rows changed before an ANALYZE, counted after it) and against
a bulk load right after an ANALYZE."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg

import dbcrew.operators  # noqa: F401
from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.operators.checks.tables import check_vacuum_health
from dbcrew.operators.collect.catalog import collect_settings
from dbcrew.operators.collect.window import (
    WindowParams,
    collect_database_stats,
    collect_table_stats,
)
from dbcrew.operators.registry import OperatorContext
from dbcrew.settings.run import Settings
from dbcrew.settings.thresholds import Thresholds
from dbcrew.targets import parse_target
from dbcrew.workspace import Workspace
from tests.integration.health.clinic import flush_statistics
from tests.integration.health.conftest import review

SETTLE_SECONDS = 8.0


def analyzed_seconds_ago(conn: psycopg.Connection[Any], table: str) -> float:
    row = conn.execute(
        "SELECT extract(epoch FROM now() - last_analyze)::float8 FROM pg_stat_user_tables WHERE relname = %s",
        [table],
    ).fetchone()
    assert row is not None and row[0] is not None
    return float(row[0])


def stale_tables(dsn: str, tmp_path: Path) -> set[str]:
    """The real collectors and check over a real workspace, at once (no window: the analyzes' ages are the subject)."""
    ctx = OperatorContext(
        target=parse_target(dsn),
        workspace=Workspace(tmp_path / "w.duckdb"),
        settings=Settings(thresholds=Thresholds(stale_flush_grace_seconds=SETTLE_SECONDS)),
        brief=None,
        run_dir=tmp_path,
    )
    collect_settings(ctx)
    collect_table_stats(ctx, WindowParams(window_seconds=0))
    return {f.object for f in check_vacuum_health(ctx).findings if f.code == "statistics_stale"}


def test_a_flush_landing_after_analyze_is_not_staleness_but_real_changes_are(
    pg: EmbeddedPostgres, tmp_path: Path
):
    pg.psql("CREATE DATABASE late_flush;")
    dsn = pg.dsn("late_flush")
    with psycopg.connect(dsn, autocommit=True) as conn:
        # Really changed: analyzed over settled counts, then half its rows updated.
        conn.execute(
            "CREATE TABLE changed (id int PRIMARY KEY, v int) WITH (autovacuum_enabled = false);"
            " INSERT INTO changed SELECT g, g FROM generate_series(1, 5000) g"
        )
        flush_statistics(conn)
        conn.execute("ANALYZE changed")
        conn.execute("UPDATE changed SET v = v + 1 WHERE id % 2 = 0")
        flush_statistics(conn)
        time.sleep(max(0.0, SETTLE_SECONDS - analyzed_seconds_ago(conn, "changed")))

        # Loaded and analyzed by one session: one message, so the backend never goes idle between
        # the INSERT's commit and the ANALYZE and cannot flush the INSERT's counts before it.
        conn.execute(
            "CREATE TABLE loaded (id int PRIMARY KEY, v int) WITH (autovacuum_enabled = false)"
        )
        conn.execute(
            "BEGIN; INSERT INTO loaded SELECT g, g FROM generate_series(1, 5000) g; COMMIT; ANALYZE loaded"
        )
        flush_statistics(conn)
        # The late flush landed: every row the ANALYZE saw now counts as changed since it.
        late = conn.execute(
            "SELECT n_mod_since_analyze, n_live_tup FROM pg_stat_user_tables WHERE relname = 'loaded'"
        ).fetchone()
        assert late == (5000, 10000)

    stale = stale_tables(dsn, tmp_path)
    with psycopg.connect(dsn) as conn:
        assert analyzed_seconds_ago(conn, "loaded") < SETTLE_SECONDS, (
            "the check ran too late to judge the young analyze"
        )
    assert stale == {"public.changed"}


def test_a_table_bulk_loaded_right_after_its_analyze_is_stale_in_a_review_seconds_later(
    pg: EmbeddedPostgres, tmp_path: Path
):
    """Analyzed at 100 rows, loaded to 300 times that: the planner still plans from 100 rows, and a review that starts
    at once says so, long before the old five-minute wait on young analyzes would have let it."""
    pg.psql("CREATE DATABASE bulk_loaded;")
    dsn = pg.dsn("bulk_loaded")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE loaded (id int PRIMARY KEY, v int) WITH (autovacuum_enabled = false);"
            " INSERT INTO loaded SELECT g, g FROM generate_series(1, 100) g"
        )
        flush_statistics(conn)
        conn.execute("ANALYZE loaded")
        conn.execute("INSERT INTO loaded SELECT g, g FROM generate_series(101, 30100) g")
        flush_statistics(conn)
    report = review(dsn, tmp_path, thresholds=Thresholds(), window=1.0)
    stale = {f.object: f for f in report.findings if f.code == "statistics_stale"}
    assert set(stale) == {"public.loaded"}
    finding = stale["public.loaded"]
    assert (finding.evidence["reltuples"], finding.evidence["n_live_tup"]) == (100, 30100)
    assert finding.evidence["analyzed_seconds_ago"] < 60, (
        "the review did not start seconds after the load"
    )


def first_readings_done(conn: psycopg.Connection[Any], *marks: str) -> None:
    """Wait until every window session whose reading contains one of `marks` ran it and sits idle before its second."""
    for _ in range(400):
        running = {
            mark
            for mark in marks
            if conn.execute(
                "SELECT 1 FROM pg_stat_activity WHERE state = 'idle' AND pid <> pg_backend_pid() AND strpos(query, %s) > 0",
                [mark],
            ).fetchone()
        }
        if running == set(marks):
            return
        time.sleep(0.05)
    raise AssertionError(f"no window session read {marks} within 20 s")


def test_counters_reset_during_the_window_count_from_the_reset_and_say_so(
    pg: EmbeddedPostgres, tmp_path: Path
):
    """A crash restart or pg_stat_reset between the window's readings: the end reads lower than the start. The deltas
    count from the reset (never a negative rate a check would misjudge), the observation says which rows were set
    back, and the server's start time, which a reset does not touch, still says it did not restart."""
    pg.psql("CREATE DATABASE reset_mid_window;")
    dsn = pg.dsn("reset_mid_window")
    ctx = OperatorContext(
        target=parse_target(dsn),
        workspace=Workspace(tmp_path / "w.duckdb"),
        settings=Settings(),
        brief=None,
        run_dir=tmp_path,
    )
    with psycopg.connect(dsn, autocommit=True) as conn, ThreadPoolExecutor(2) as pool:
        conn.execute(
            "CREATE TABLE scanned (id int); INSERT INTO scanned SELECT generate_series(1, 100)"
        )
        for _ in range(5):
            conn.execute("SELECT count(*) FROM scanned")
        flush_statistics(conn)
        tables = pool.submit(collect_table_stats, ctx, WindowParams(window_seconds=6))
        database = pool.submit(collect_database_stats, ctx, WindowParams(window_seconds=6))
        first_readings_done(
            conn, "seq_tup_read", "wal_checkpoints_max"
        )  # each reading's last statement
        conn.execute("SELECT pg_stat_reset()")
        for _ in range(2):
            conn.execute("SELECT count(*) FROM scanned")
        flush_statistics(conn)
        observed, server = tables.result(timeout=60), database.result(timeout=60)
    (row,) = ctx.workspace.query(
        "SELECT seq_scan, seq_scan_delta FROM table_stats WHERE relname = 'scanned'"
    )
    assert (row["seq_scan"], row["seq_scan_delta"]) == (2, 2.0)
    assert (
        "table_stats: counters of 1 row set back during the window (a crash restart or pg_stat_reset)"
        in observed.partial
    )
    (db,) = ctx.workspace.query(
        "SELECT xact_commit_delta, server_started_delta FROM database_stats"
    )
    assert db["server_started_delta"] == 0 and db["xact_commit_delta"] >= 0
    assert "database_stats: counters of 1 row set back" in server.partial


def test_pg_read_all_stats_revoked_during_the_window_is_named_with_its_grant(
    pg: EmbeddedPostgres, tmp_path: Path
):
    """Privileges are checked per statement: a REVOKE mid-window hides other roles' statements without an error.
    The end reading's own session asks again, and the observation names what to GRANT."""
    from dbcrew.operators.collect.probe import probe
    from dbcrew.operators.collect.window import collect_statements

    pg.psql("CREATE DATABASE revoked_mid_window;")
    pg.psql("CREATE EXTENSION pg_stat_statements;", dbname="revoked_mid_window")
    pg.psql('CREATE ROLE "Stats Reader" LOGIN; GRANT pg_read_all_stats TO "Stats Reader";')
    dsn = pg.dsn("revoked_mid_window", user="Stats%20Reader")
    ctx = OperatorContext(
        target=parse_target(dsn),
        workspace=Workspace(tmp_path / "w.duckdb"),
        settings=Settings(),
        brief=None,
        run_dir=tmp_path,
    )
    ctx.brief = probe(ctx)
    assert ctx.brief.can_read_all_stats
    try:
        with (
            psycopg.connect(pg.dsn("revoked_mid_window"), autocommit=True) as conn,
            ThreadPoolExecutor(1) as pool,
        ):
            window = pool.submit(collect_statements, ctx, WindowParams(window_seconds=6))
            first_readings_done(conn, "pg_stat_statements s")
            conn.execute('REVOKE pg_read_all_stats FROM "Stats Reader"')
            assert 'GRANT pg_read_all_stats TO "Stats Reader";' in window.result(timeout=60).partial
    finally:
        pg.psql(
            'DROP OWNED BY "Stats Reader"; DROP ROLE "Stats Reader";', dbname="revoked_mid_window"
        )
