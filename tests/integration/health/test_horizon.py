"""Who holds the xmin horizon: a review whose vacuum and wraparound findings name each kind of holder.

Its own server: the holders hold the horizon of the whole cluster (a prepared transaction needs
max_prepared_transactions, a logical slot wal_level = logical), and a standby sends
hot_standby_feedback without a slot, so its walsender carries the xmin.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest

from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.models.report import Report
from dbcrew.settings.thresholds import Thresholds
from tests.integration.health.clinic import flush_statistics
from tests.integration.health.conftest import review
from tests.integration.health.sessions import Held

CONSUMED_XIDS = 3000
THRESHOLDS = Thresholds(xid_warning_age=2_000, horizon_holder_min_age=1_000)


@dataclass
class HeldBack:
    report: Report
    long_pid: int
    young_pid: int


def _wait_for(conn: psycopg.Connection[Any], sql: str, what: str) -> None:
    deadline = time.monotonic() + 60
    while conn.execute(sql).fetchone() != (True,):
        assert time.monotonic() < deadline, f"no {what} after a minute"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def held_back(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HeldBack]:
    root = tmp_path_factory.mktemp("horizon")
    server = EmbeddedPostgres(
        root / "primary", settings={"wal_level": "logical", "max_prepared_transactions": "2"}
    ).start()
    standby = server.standby(root / "feedback", "feedback")
    server.psql("CREATE DATABASE vault;")
    with psycopg.connect(
        standby.dsn("postgres"), autocommit=True
    ) as replica:  # replay is asynchronous
        _wait_for(
            replica,
            "SELECT EXISTS (SELECT FROM pg_database WHERE datname = 'vault')",
            "database vault on the standby",
        )
    dsn = server.dsn("vault")
    held, on_standby = Held(dsn), Held(standby.dsn("vault"))
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                "CREATE TABLE old_rows (id int PRIMARY KEY); CREATE TABLE ledger (id int);"
                " CREATE TABLE churned (id int PRIMARY KEY, v text) WITH (autovacuum_enabled = false);"
                " INSERT INTO churned SELECT g, repeat('x', 20) FROM generate_series(1, 40000) g"
            )
            # A logical slot (first: its creation waits for every transaction holding an XID), a
            # long transaction with an XID, a prepared transaction nobody finished.
            conn.execute("SELECT pg_create_logical_replication_slot('decoder', 'pgoutput')")
            long_tx = held.connect()
            long_tx.execute("BEGIN; SELECT pg_current_xact_id()")
            with psycopg.connect(dsn, autocommit=True) as preparer:
                preparer.execute(
                    "BEGIN; INSERT INTO ledger VALUES (1); PREPARE TRANSACTION 'forgotten'"
                )
            # A standby query's snapshot, sent back by hot_standby_feedback: first through the
            # standby's physical slot (which keeps that xmin when the standby leaves it), then
            # without a slot, so that the walsender itself carries it.
            snapshot = on_standby.connect()
            snapshot.execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1")
            standby.psql("ALTER SYSTEM SET hot_standby_feedback = on; SELECT pg_reload_conf();")
            _wait_for(
                conn,
                "SELECT xmin IS NOT NULL FROM pg_replication_slots WHERE slot_name = 'feedback_slot'",
                "feedback through the standby's slot",
            )
            standby.psql("ALTER SYSTEM SET primary_slot_name = ''; SELECT pg_reload_conf();")
            _wait_for(
                conn,
                "SELECT EXISTS (SELECT 1 FROM pg_stat_replication WHERE application_name = 'feedback'"
                " AND backend_xmin IS NOT NULL)",
                "feedback from the standby without a slot",
            )
            # Deleted after every holder's xmin: vacuum has to leave these rows.
            conn.execute("DELETE FROM churned WHERE id % 2 = 0")
            flush_statistics(conn)
            conn.execute("VACUUM churned")
            conn.execute(
                "CREATE PROCEDURE burn_xids(n int) LANGUAGE plpgsql AS $$"
                " BEGIN FOR i IN 1..n LOOP PERFORM pg_current_xact_id(); COMMIT; END LOOP; END $$"
            )
            conn.execute("CALL burn_xids(%s)", [CONSUMED_XIDS])
            young_tx = held.connect()  # ordinary traffic: an XID taken just now is not named
            young_tx.execute("BEGIN; SELECT pg_current_xact_id()")
        report = review(dsn, root / "report", thresholds=THRESHOLDS, window=0.5)
        yield HeldBack(report=report, long_pid=held.pid(long_tx), young_pid=held.pid(young_tx))
    finally:
        held.close()
        on_standby.close()
        standby.stop()
        server.stop()


def holders(report: Report, code: str, obj: str) -> list[dict[str, Any]]:
    finding = next(f for f in report.findings if (f.code, f.object) == (code, obj))
    named = finding.evidence.get("horizon_held_by", [])
    assert [h["xmin_age"] for h in named] == sorted((h["xmin_age"] for h in named), reverse=True), (
        "oldest first"
    )
    return named


def named(report: Report, code: str, obj: str) -> set[str]:
    return {h["holder"] for h in holders(report, code, obj)}


def test_a_table_too_old_to_freeze_names_who_holds_its_horizon(held_back: HeldBack):
    """The logical slot holds only the catalogs, and the young transaction is ordinary traffic."""
    long_tx = f"pid:{held_back.long_pid}"
    assert named(held_back.report, "xid_wraparound_risk", "public.old_rows") == {
        long_tx,
        "prepared forgotten",
        "slot feedback_slot",
        "replica feedback@127.0.0.1",
    }
    by_holder = {
        h["holder"]: h for h in holders(held_back.report, "xid_wraparound_risk", "public.old_rows")
    }
    assert (
        by_holder[long_tx]["kind"] == "transaction"
        and by_holder[long_tx]["xmin_age"] >= CONSUMED_XIDS
    )
    assert by_holder["prepared forgotten"]["kind"] == "prepared_transaction"
    assert by_holder["replica feedback@127.0.0.1"]["kind"] == "standby"
    assert (
        by_holder["slot feedback_slot"]["kind"] == "replication_slot"
        and "inactive" in by_holder["slot feedback_slot"]["detail"]
    )
    finding = next(
        f
        for f in held_back.report.findings
        if (f.code, f.object) == ("xid_wraparound_risk", "public.old_rows")
    )
    assert finding.evidence["horizon_held_by"][0]["holder"] in finding.recommendation


def test_a_database_too_old_to_freeze_also_names_the_slot_holding_its_catalogs(held_back: HeldBack):
    assert named(held_back.report, "xid_wraparound_risk", "database vault") == {
        f"pid:{held_back.long_pid}",
        "prepared forgotten",
        "slot decoder",
        "slot feedback_slot",
        "replica feedback@127.0.0.1",
    }
    # The session and the prepared transaction belong to vault: they do not hold another database back.
    assert named(held_back.report, "xid_wraparound_risk", "database postgres") == {
        "slot decoder",
        "slot feedback_slot",
        "replica feedback@127.0.0.1",
    }


def test_dead_tuples_vacuum_had_to_leave_name_who_holds_them(held_back: HeldBack):
    finding = next(
        f
        for f in held_back.report.findings
        if (f.code, f.object) == ("dead_tuples_high", "public.churned")
    )
    assert finding.evidence["last_vacuum"] != "None" and finding.evidence["n_dead_tup"] >= 20000
    assert named(held_back.report, "dead_tuples_high", "public.churned") == {
        f"pid:{held_back.long_pid}",
        "prepared forgotten",
        "slot feedback_slot",
        "replica feedback@127.0.0.1",
    }
    assert not any(
        f"pid:{held_back.young_pid}" in named(held_back.report, f.code, f.object)
        for f in held_back.report.findings
        if f.code in ("dead_tuples_high", "xid_wraparound_risk")
    )
