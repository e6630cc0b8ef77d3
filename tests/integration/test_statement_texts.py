"""A watcher's pg_stat_statements reads: counters every time, a text only when its entry first changes, on a real
pg_stat_statements (the texts of every database's entries are what a read with texts copies)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.operators.window.readers import (
    STATEMENT_COUNTERS_SQL,
    StatementsUnreadable,
    read_statements,
    statement_deltas,
)

WORKLOAD = "SELECT count(*) FROM pg_class WHERE relpages > $1"


def texts_read(conn: psycopg.Connection[Any]) -> int:
    """How often this database's text reads ran (their own pg_stat_statements entry)."""
    row = conn.execute(
        "SELECT coalesce(sum(calls), 0)::int AS n FROM pg_stat_statements(true)"
        " WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
        " AND query LIKE %s",
        ["%s.toplevel AND s.queryid = ANY(%"],
    ).fetchone()
    assert row is not None
    return int(row["n"])


@pytest.fixture(scope="module")
def watched(pg: EmbeddedPostgres) -> str:
    pg.psql("CREATE DATABASE statement_texts;")
    with psycopg.connect(pg.dsn("statement_texts"), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    return pg.dsn("statement_texts")


def test_a_first_reading_reads_no_text_and_what_ran_since_is_named(watched: str) -> None:
    with psycopg.connect(watched, autocommit=True, row_factory=dict_row) as conn:
        first = read_statements(conn)
        assert first and all(row["query"] is None for row in first.values())
        for n in range(3):
            conn.execute("SELECT count(*) FROM pg_class WHERE relpages > %s", [n])
        second = read_statements(conn, first)
        ran = [d for d in statement_deltas(first, second) if d.query == WORKLOAD]
        assert len(ran) == 1 and ran[0].calls == 3, (
            "the workload's entry named by its text, its calls counted"
        )
        # An entry that did not change keeps no text it never had: nothing needed one.
        untouched = [
            k for k, row in second.items() if k in first and row["calls"] == first[k]["calls"]
        ]
        assert all(second[k]["query"] is None for k in untouched)


def test_an_idle_database_read_again_and_again_reads_no_more_texts(watched: str) -> None:
    with psycopg.connect(watched, autocommit=True, row_factory=dict_row) as conn:
        reading = read_statements(conn)
        for _ in range(4):  # the reads' own entries change and are named once, then carried
            reading = read_statements(conn, reading)
        before = texts_read(conn)
        for _ in range(5):
            reading = read_statements(conn, reading)
        # The counting read above is itself a new entry each time it is read: it is read once more at most.
        assert texts_read(conn) - before <= 1, "a text is read once, when its entry first changes"
        assert any(
            "s.temp_blks_written\n  FROM pg_stat_statements" in (row["query"] or "")
            for row in reading.values()
        ), "the counters' own entry, changed at every read, keeps the text it was named by"
        conn.execute("SELECT count(*) FROM pg_class WHERE relpages > %s", [9])
        named = statement_deltas(reading, read_statements(conn, reading))
        assert any(d.query == WORKLOAD for d in named), (
            "a statement seen before is named by its carried text"
        )


def test_an_entry_evicted_and_made_again_with_as_many_calls_is_named(watched: str) -> None:
    """A full pg_stat_statements evicts its least-used entries; one made again between two readings can count as
    many calls as before and less time. Its counts start anew, and the delta carries its text."""
    evicted = "SELECT pg_sleep(%s) AS evicted"
    with psycopg.connect(watched, autocommit=True, row_factory=dict_row) as conn:
        for _ in range(2):
            conn.execute(evicted, [0.02])
        first = read_statements(conn)
        row = conn.execute(
            "SELECT queryid FROM pg_stat_statements WHERE query LIKE '%%AS evicted'"
        ).fetchone()
        assert row is not None
        conn.execute("SELECT pg_stat_statements_reset(0, 0, %s)", [row["queryid"]])
        for _ in range(2):
            conn.execute(evicted, [0.0])  # as many calls, each far shorter than the 20 ms before
        second = read_statements(conn, first)
        named = [d for d in statement_deltas(first, second) if d.queryid == row["queryid"]]
    assert [(d.query, d.calls) for d in named] == [("SELECT pg_sleep($1) AS evicted", 2)]


def test_a_role_the_view_is_revoked_from_reads_no_statements(pg: EmbeddedPostgres) -> None:
    """REVOKE on the view is the administrator's word on who reads statements; the function behind it stays
    executable by PUBLIC, and the reads go through the function. A role without the view is told it may not read
    them (never an empty reading that looks like a quiet server), one granted it reads them."""
    pg.psql("CREATE DATABASE statements_revoked;")
    pg.psql(
        "CREATE EXTENSION pg_stat_statements; REVOKE ALL ON pg_stat_statements FROM PUBLIC;"
        " CREATE ROLE statements_denied LOGIN; CREATE ROLE statements_granted LOGIN;"
        " GRANT SELECT ON pg_stat_statements TO statements_granted;",
        dbname="statements_revoked",
    )
    with psycopg.connect(
        pg.dsn("statements_revoked", user="statements_denied"),
        autocommit=True,
        row_factory=dict_row,
    ) as conn:
        with pytest.raises(StatementsUnreadable):
            read_statements(conn)
        plan = [
            row["QUERY PLAN"].strip()
            for row in conn.execute(
                f"EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, BUFFERS OFF) {STATEMENT_COUNTERS_SQL}"
            ).fetchall()
        ]
        assert any(
            line.endswith("Function Scan on pg_stat_statements s (never executed)") for line in plan
        ), (
            "the view's privilege gates the read: no scan of the server's entries for a role kept out"
        )
        executable = conn.execute("SELECT count(*) AS n FROM pg_stat_statements(false)").fetchone()
        assert executable is not None and executable["n"] > 0, (
            "the function still answers this role: only the reader's check keeps it out"
        )
    with psycopg.connect(
        pg.dsn("statements_revoked", user="statements_granted"),
        autocommit=True,
        row_factory=dict_row,
    ) as conn:
        first = read_statements(conn)
        conn.execute("SELECT count(*) FROM pg_class WHERE relpages > %s", [1])
        assert WORKLOAD in [d.query for d in statement_deltas(first, read_statements(conn, first))]
