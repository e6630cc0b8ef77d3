"""The slow_query floors on made-up statement totals: what they keep is set by the numbers, not a host's speed."""

from __future__ import annotations

import zlib

from dbcrew.operators.checks.statements import StatementTotals, workload_of
from dbcrew.settings.thresholds import Thresholds


def totals(query: str, total_ms: float, *, own: bool = False) -> StatementTotals:
    return StatementTotals(
        queryid=zlib.crc32(query.encode()),
        query=query,
        own=own,
        calls=10,
        total_exec_time=total_ms,
        calls_delta=0,
    )


ROWS = [
    totals("SELECT * FROM orders WHERE status = $1", 600.0),
    totals("SELECT * FROM customers WHERE email = $1", 300.0),
    totals("SELECT name FROM products WHERE id = $1", 15.0),
    totals("SELECT 1 FROM customers WHERE id = $1", 0.0),
    totals("SELECT * FROM pg_stat_statements\n/* dbcrew */", 5_000.0, own=True),
    totals("CREATE INDEX ON orders (status)", 10_000.0),
    totals("VACUUM ANALYZE orders", 8_000.0),
]


def heavy(t: Thresholds) -> list[str]:
    return [r.query.split(" WHERE ")[0].split()[-1] for r in workload_of(ROWS, t).heavy]


def test_the_workload_is_neither_the_reviews_statements_nor_utility_commands():
    load = workload_of(ROWS, Thresholds())
    assert (load.total_ms, load.statements, load.own, load.utility) == (915.0, 4, 1, 2)


def test_a_statement_must_pass_the_share_floor_and_the_absolute_one():
    # Default floors: 2 % of 915 ms is 18.3 ms, but 1 s in all is more than any statement took.
    assert heavy(Thresholds()) == []
    # The absolute floor decides where it is the higher: 100 ms keeps the two statements over it.
    assert heavy(Thresholds(slow_query_min_total_ms=100)) == ["orders", "customers"]
    # The share decides where it is: half of 915 ms keeps the one statement over 457.5 ms.
    assert heavy(Thresholds(slow_query_min_total_ms=100, slow_query_min_share=0.5)) == ["orders"]
    # 2 % of the workload is 18.3 ms: the 15 ms statement is under it, though over a 10 ms floor.
    assert heavy(Thresholds(slow_query_min_total_ms=10)) == ["orders", "customers"]
    assert heavy(Thresholds(slow_query_min_total_ms=10, slow_query_min_share=0)) == [
        "orders",
        "customers",
        "products",
    ]


def test_a_statement_at_the_floor_is_kept_and_one_that_took_no_time_never():
    at_the_floor = Thresholds(slow_query_min_total_ms=300, slow_query_min_share=0)
    assert heavy(at_the_floor) == ["orders", "customers"]
    no_floors = Thresholds(slow_query_min_total_ms=0, slow_query_min_share=0)
    assert heavy(no_floors) == ["orders", "customers", "products"]
