"""A pass body as the store keeps it: statements, tables and blocked sessions as rows, read back the same, and a body
stored before (objects) still read; the running texts of one statement kept under one text."""

from __future__ import annotations

import json
from collections import Counter

from dbcrew.models.report import CoverageStatus, SkipCause, SkipKind
from dbcrew.operators.watch.sampling import TargetWatch
from dbcrew.operators.window.evidence import BlockedSession, TableDelta
from dbcrew.operators.window.passes import (
    PassBody,
    StatementRate,
    StatementsUnread,
    as_stored,
    merge,
)
from dbcrew.operators.window.store import statements_unread_entry
from dbcrew.targets import parse_target


def body() -> PassBody:
    return PassBody(
        rates={"db.xact_commit": 12.5},
        statements=[
            StatementRate(
                queryid=-3886912043147135675,
                userid=10,
                digest="61232755bca1528a",
                calls=3.5,
                total_exec_time_ms=81.25,
                rows=3.5,
                temp_blks_written=2.0,
            ),
            StatementRate(
                queryid=7, userid=10, digest="b67d", calls=1.0, total_exec_time_ms=2.0, rows=0.0
            ),
        ],
        tables=[
            TableDelta(
                name="public.pgbench_accounts", idx_scan=64.0, n_tup_upd=32.0, total_bytes=16228352
            )
        ],
        blocked=[
            BlockedSession(
                pid=3530, blocker_pid=3531, blocker_state="active", blocker_xact_seconds=0.25
            )
        ],
    )


def test_statements_tables_and_blocked_sessions_are_stored_as_rows_and_read_back_the_same() -> None:
    stored = as_stored(body())
    raw = json.loads(stored)
    assert raw["statements"][1] == [7, 10, "b67d", 1.0, 2.0, 0.0], (
        "fields in order, the trailing defaults left out"
    )
    assert raw["statements"][0][-1] == 2.0, (
        "a field set after defaults keeps the defaults before it"
    )
    assert raw["tables"] == [
        ["public.pgbench_accounts", 0.0, 0.0, 64.0, 0.0, 32.0, 0.0, 0.0, 0.0, 0, 16228352]
    ]
    assert raw["blocked"] == [[3530, 3531, "active", 0.25]]
    assert PassBody.model_validate_json(stored) == body()
    objects = json.dumps(body().model_dump(exclude_defaults=True), separators=(",", ":"))
    assert len(stored) < len(objects), "fewer bytes than the same body's objects"


def test_a_body_stored_with_objects_is_read_as_before() -> None:
    before = json.dumps(body().model_dump(exclude_defaults=True))
    assert json.loads(before)["statements"][0]["queryid"] == -3886912043147135675, (
        "the old form: objects"
    )
    assert PassBody.model_validate_json(before) == body()


def test_a_merge_of_stored_bodies_is_a_merge_of_the_bodies() -> None:
    parts = [(15.0, body()), (15.0, body())]
    again = [(s, PassBody.model_validate_json(as_stored(b))) for s, b in parts]
    assert as_stored(merge(again)) == as_stored(merge(parts))


def test_the_running_texts_of_one_statement_are_kept_under_its_first_text_in_every_pass() -> None:
    watch = TargetWatch(parse_target("postgresql://u@localhost/db"))
    first = watch.running(
        Counter(
            {
                "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = 17": 2,
                "UPDATE pgbench_accounts SET abalance = abalance + 5 WHERE aid = 9": 1,
                "SELECT abalance FROM pgbench_accounts WHERE aid = 9": 1,
            }
        )
    )
    assert first == Counter(
        {
            "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = 17": 3,
            "SELECT abalance FROM pgbench_accounts WHERE aid = 9": 1,
        }
    )
    later = watch.running(
        Counter({"UPDATE pgbench_accounts SET abalance = abalance + 3 WHERE aid = 4": 2})
    )
    assert later == Counter(
        {"UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = 17": 2}
    ), "a later pass names the statement by the same text, so buckets merge it into one"


def test_a_merge_keeps_each_signals_lowest_and_highest_pass_where_they_lie_a_floor_from_the_mean() -> (
    None
):
    passes = [
        PassBody(rates={"db.xact_commit": c, "db.tup_fetched": f, "io.reads": r})
        for c, f, r in ((1000.0, 100.0, 5.0), (1600.0, 300.0, 50.0), (400.0, 200.0, 95.0))
    ]
    minute = merge([(15.0, p) for p in passes])
    assert minute.rates["db.xact_commit"] == 1000.0
    assert (minute.lowest("db.xact_commit"), minute.highest("db.xact_commit")) == (400.0, 1600.0)
    assert "db.tup_fetched" not in minute.lows | minute.highs, (
        "a swing of 100 rows under the signal's floor (50000) is not kept: it reads as the mean"
    )
    assert minute.highest("db.tup_fetched") == minute.rates["db.tup_fetched"] == 200.0
    assert "io.reads" not in minute.highs, "only the detector's signals"
    hour = merge([(60.0, minute), (60.0, PassBody(rates={"db.xact_commit": 1000.0}))])
    assert (hour.lowest("db.xact_commit"), hour.highest("db.xact_commit")) == (400.0, 1600.0), (
        "merging buckets keeps the extremes of the passes they merged"
    )
    again = PassBody.model_validate_json(as_stored(minute))
    assert again == minute
    before = PassBody.model_validate_json('{"rates":{"db.xact_commit":1000.0},"passes":4}')
    assert before.lowest("db.xact_commit") == before.highest("db.xact_commit") == 1000.0, (
        "a bucket stored before the extremes were kept reads as its mean"
    )


def test_a_merge_counts_the_passes_that_could_not_read_statements_and_a_diagnosis_says_how_many() -> (
    None
):
    refused = SkipCause.of_failure("permission denied for view pg_stat_statements", "watcher")
    unloaded = SkipCause(kind=SkipKind.MISSING_EXTENSION, detail="not preloaded")
    parts = [
        (15.0, body()),
        (15.0, body().model_copy(update={"statements_unread": StatementsUnread(cause=refused)})),
        (15.0, body().model_copy(update={"statements_unread": StatementsUnread(cause=unloaded)})),
    ]
    stored = [(s, PassBody.model_validate_json(as_stored(b))) for s, b in parts]
    minute = merge(stored)
    assert minute.statements_unread == StatementsUnread(cause=unloaded, passes=2), (
        "two of three passes, the latest's cause"
    )
    assert (
        merge([(60.0, minute), (15.0, parts[0][1])]).statements_unread == minute.statements_unread
    )
    assert merge(parts[:1]).statements_unread is None

    partial = statements_unread_entry(minute.statements_unread, passes=3)
    assert (partial.status, partial.reason) == (
        CoverageStatus.RAN,
        "partial: 2 of 3 passes read no statements: not preloaded",
    )
    whole = statements_unread_entry(StatementsUnread(cause=refused, passes=4), passes=4)
    assert whole.status is CoverageStatus.SKIPPED and whole.cause is not None
    assert whole.reason == (
        "4 of 4 passes read no statements: permission denied for view pg_stat_statements"
        " (GRANT SELECT ON pg_stat_statements TO watcher;)"
    )
