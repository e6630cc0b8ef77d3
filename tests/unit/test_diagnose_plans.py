"""The heaviest statements' plans judged against what they did per call, on a real PostgreSQL.

Two tables of realistic size (50k customers, 100k orders, analysed), built once. A statement is run
for real in a session of its own (with the planner settings a client could have set), its
pg_stat_statements deltas make the window, and the diagnosis plans and judges it from its own
session, which sees none of the client's settings: the plan, not the run, is what is judged.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.operators.diagnose.candidates import Facts
from dbcrew.operators.diagnose.cross_review import cross_review
from dbcrew.operators.diagnose.experts import EXPERTS
from dbcrew.operators.diagnose.heavy_statements import (
    Sizes,
    expected_blocks,
    join_keys,
    judge_statements,
    statement_candidates,
)
from dbcrew.operators.diagnose.judgements import filter_columns
from dbcrew.operators.window.evidence import StatementDelta, WindowEvidence
from dbcrew.operators.window.readers import read_statements, statement_deltas
from dbcrew.targets import PostgresTarget, parse_target

SETUP = """
CREATE EXTENSION IF NOT EXISTS pg_stat_statements;
CREATE TABLE cust (id int PRIMARY KEY, region int NOT NULL, name text NOT NULL);
INSERT INTO cust SELECT g, g % 50, md5(g::text) FROM generate_series(1, 50000) g;
CREATE TABLE ord (id int PRIMARY KEY, cust_id int NOT NULL, cust_ref text NOT NULL, amount int NOT NULL);
INSERT INTO ord SELECT g, g % 50000 + 1, (g % 50000 + 1)::text, g % 1000 FROM generate_series(1, 100000) g;
ANALYZE cust, ord;
"""
JOIN = (
    "SELECT c.region, sum(o.amount) FROM ord o JOIN cust c ON c.id = o.cust_id"
    " WHERE o.amount < %s GROUP BY c.region"
)
NESTED_LOOPS = ("SET enable_hashjoin = off", "SET enable_mergejoin = off")
ROWS = {"cust": 50_000.0, "ord": 100_000.0}


@pytest.fixture(scope="module")
def target(pg: EmbeddedPostgres) -> PostgresTarget:
    pg.psql("CREATE DATABASE plans;")
    pg.psql(SETUP, "plans")
    return parse_target(pg.dsn("plans"))


def ran(
    target: PostgresTarget, query: str, params: tuple[Any, ...], settings: tuple[str, ...]
) -> WindowEvidence:
    """A window holding what one call of `query` did, run by a client session with `settings`."""
    with psycopg.connect(target.dsn, autocommit=True) as client, target.session() as conn:
        for setting in settings:
            client.execute(setting)
        before = read_statements(conn)
        client.execute(query, params).fetchall()
        after = read_statements(conn, before)
        version = conn.info.server_version
    return WindowEvidence(
        started_at=0.0,
        seconds=5.0,
        interval=0.5,
        statements=[s for s in statement_deltas(before, after) if "ord o JOIN" in s.query],
        server_version_num=version,
    )


def test_a_forced_nested_loop_is_a_poor_join_named_with_its_statement(
    target: PostgresTarget,
) -> None:
    window = ran(target, JOIN, (500,), NESTED_LOOPS)
    plans = judge_statements(target, window, ROWS)
    facts = Facts(window=window, baseline=None, abnormal=[], plans=plans)
    candidates = EXPERTS["query"](facts)
    assert [c.code for c in candidates] == ["query_poor_join"]
    evidence = candidates[0].evidence
    assert evidence["queryid"] == window.statements[0].queryid
    assert "JOIN cust c ON c.id = o.cust_id" in str(evidence["query"])
    assert str(evidence["plan_node"]).startswith("Nested Loop")
    numbers = evidence["numbers"]
    assert isinstance(numbers, dict) and numbers["outer_rows"] >= 10_000
    assert numbers["buffers_per_call"] >= 10 * 3_000, "the loop's index lookups, measured"
    assert (
        "public.cust(id)" in candidates[0].objects
        and "public.ord(cust_id)" in candidates[0].objects
    )
    assert "hash and merge joins disabled" in str(evidence["plan"])
    assert any("not visible" in r for r in plans[0].remarks), "what it could not see is said"
    found, _notes = cross_review(candidates, facts)
    assert [c.code for c in found] == ["query_poor_join"]


def test_the_same_join_hashed_is_no_poor_join(target: PostgresTarget) -> None:
    window = ran(target, JOIN, (500,), ())
    plans = judge_statements(target, window, ROWS)
    assert plans and plans[0].queryid == window.statements[0].queryid
    assert plans[0].issues == [] and plans[0].remarks == []
    facts = Facts(window=window, baseline=None, abnormal=[], plans=plans)
    assert EXPERTS["query"](facts) == [] and EXPERTS["index"](facts) == []


def test_a_subquery_run_per_outer_row_is_correlated(target: PostgresTarget) -> None:
    query = "SELECT c.id, (SELECT count(*) FROM ord o WHERE o.cust_ref = c.name) FROM cust c WHERE c.region = 7"
    with target.session() as conn:
        version = conn.info.server_version
    window = WindowEvidence(
        started_at=0.0, seconds=5.0, interval=0.5, running={query: 40}, server_version_num=version
    )
    assert statement_candidates(window) == [(query, 1.0)]
    plans = judge_statements(target, window, ROWS)
    facts = Facts(window=window, baseline=None, abnormal=[], plans=plans)
    found = EXPERTS["query"](facts)
    assert [c.code for c in found] == ["query_correlated_subquery"]
    assert found[0].evidence["query"] == query and "public.ord" in found[0].objects


def test_join_keys_and_filter_columns_are_read_by_the_parser() -> None:
    ((left, right),) = join_keys("((c.id)::text = o.cust_ref)")
    assert (left.alias, left.column, left.cast, right.column) == ("c", "id", "text", "cust_ref")
    assert [(a.alias, b.alias) for a, b in join_keys("(id = o.cust_id)", own="c")] == [("c", "o")]
    assert join_keys("((i.order_id >= o.id) AND (i.order_id <= (o.id + 0)))") == []
    assert filter_columns("(((email)::text = $1) AND (created > $2) AND (md5(a) < $3))") == [
        "email",
        "created",
    ]
    assert filter_columns("(md5(a) < md5(b))") == []


def test_a_plan_is_held_to_the_buffers_it_expects() -> None:
    scan = {"Node Type": "Seq Scan", "Relation Name": "ord", "Plan Rows": 1000}
    lookup = {"Node Type": "Index Scan", "Relation Name": "cust", "Plan Rows": 1}
    loop = {"Node Type": "Nested Loop", "Plan Rows": 1000, "Plans": [scan, lookup]}
    pages = Sizes({"ord": 1300.0, "cust": 900.0})
    assert expected_blocks(scan, pages) == 1300
    assert expected_blocks(loop, pages) == 1300 + 1000 * 4, (
        "an index descent and a heap page per outer row"
    )
    gathered = {"Node Type": "Gather", "Workers Planned": 2, "Plans": [loop]}
    assert expected_blocks(gathered, pages) == 1300 + 3000 * 4, "each process's outer rows"
    memoized = {**loop, "Plans": [scan, {"Node Type": "Memoize", "Plans": [lookup]}]}
    known = Sizes(pages.pages, rows={"cust": 200.0})
    assert expected_blocks(memoized, known) == 1300 + 200 * 4, (
        "a memoized look-up runs once per key, at most once per row of its table"
    )
    assert expected_blocks(memoized, pages) == expected_blocks(loop, pages), "rows unknown"


def test_a_forced_loop_rescanning_a_large_input_for_few_outer_rows_is_a_poor_join(
    target: PostgresTarget,
) -> None:
    """A join key computed (`c.id + 0`: no index serves it) and hash joins disabled: each of a few
    hundred customers rescans every order. Its buffers are the hash join's; its time, set against the
    hash join's cost at the pace timed on the server, is not."""
    query = (
        "SELECT c.region, sum(o.amount) FROM ord o JOIN cust c ON o.cust_id = c.id + 0"
        " WHERE c.id <= %s GROUP BY c.region"
    )
    window = ran(target, query, (400,), NESTED_LOOPS)
    (plan,) = judge_statements(target, window, ROWS)
    assert [i.code for i in plan.issues] == ["query_poor_join"], plan
    assert "hash and merge joins disabled" in plan.issues[0].detail
    assert any("timed on the server now" in r for r in plan.remarks), plan.remarks
    hashed = ran(target, query, (400,), ())
    assert judge_statements(target, hashed, ROWS)[0].issues == []


def test_a_nested_loop_reading_far_more_than_its_plan_expects_is_misestimated(
    target: PostgresTarget,
) -> None:
    """The planner's own nested loop (one order's customer: one outer row), measured at 50k buffers
    a call: its outer input was far larger than estimated (the measurement stands for the run)."""
    query = (
        "SELECT c.name FROM ord o JOIN cust c ON c.id = o.cust_id WHERE o.amount = $1 AND o.id < $2"
    )
    with target.session() as conn:
        version = conn.info.server_version
    delta = StatementDelta(
        queryid=7, query=query, calls=2, total_exec_time_ms=80, rows=4000, shared_blks_hit=100_000
    )
    window = WindowEvidence(
        started_at=0.0, seconds=5.0, interval=0.5, statements=[delta], server_version_num=version
    )
    (plan,) = judge_statements(target, window, ROWS)
    assert [i.code for i in plan.issues] == ["query_poor_join"], plan
    assert "far more rows than the plan estimates" in plan.issues[0].detail
    assert plan.issues[0].numbers["buffers_per_call"] == 50_000
    assert any("does not account for the statement: 50000 buffers" in r for r in plan.remarks)
