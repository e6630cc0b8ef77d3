"""The freeze horizon: a database whose transaction-ID age is close to autovacuum_freeze_max_age with
autovacuum off is xid_wraparound_risk, long before the hard limit's thresholds.

Its own server: autovacuum_freeze_max_age is a postmaster setting (lowered to its minimum, 100,000,
so that reaching it takes 100,000 transactions, not 200 million) and autovacuum off is server-wide.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.models.report import Report
from dbcrew.settings.thresholds import Thresholds
from tests.integration.health.conftest import review

FREEZE_MAX_AGE = 100_000
# 95 % of the freeze limit: past the 90 % the check warns from, short of the limit itself, where the
# server would start forcing anti-wraparound vacuums (autovacuum off or not) and make the age fall.
TARGET_AGE = 95_000


@pytest.fixture(scope="module")
def aged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Report]:
    server = EmbeddedPostgres(
        tmp_path_factory.mktemp("freeze") / "data",
        settings={"autovacuum": "off", "autovacuum_freeze_max_age": str(FREEZE_MAX_AGE)},
    ).start()
    try:
        server.psql("CREATE DATABASE frozen;")
        dsn = server.dsn("frozen")
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE ledger (id int PRIMARY KEY, note text)")
            # One transaction each, committed inside the procedure: 95,000 of them take well under
            # a second here (a client's round trip each takes a hundred times longer).
            conn.execute(
                "CREATE PROCEDURE spend(n int) LANGUAGE plpgsql AS $$"
                " BEGIN FOR i IN 1..n LOOP PERFORM pg_current_xact_id(); COMMIT; END LOOP; END $$"
            )
            row = conn.execute(
                "SELECT age(datfrozenxid) FROM pg_database WHERE datname = current_database()"
            ).fetchone()
            assert row is not None
            conn.execute("CALL spend(%s)", [TARGET_AGE - int(row[0])])
            conn.execute("CREATE TABLE fresh (id int PRIMARY KEY)")  # born now: young
        yield review(dsn, tmp_path_factory.mktemp("freeze-report"), thresholds=Thresholds())
    finally:
        server.stop()


def test_a_database_close_to_its_freeze_limit_with_autovacuum_off_is_at_risk(aged: Report):
    found = {f.object: f for f in aged.findings if f.code == "xid_wraparound_risk" and f.is_problem}
    database = found.get("database frozen")
    assert database is not None, sorted(found)
    assert database.severity.value == "warning"  # far from the hard limit: not critical
    assert database.evidence["autovacuum_freeze_max_age"] == FREEZE_MAX_AGE
    assert database.evidence["autovacuum_off"] is True
    assert TARGET_AGE <= database.evidence["age"] < FREEZE_MAX_AGE
    assert "of autovacuum_freeze_max_age (100,000) with autovacuum off" in database.title
    # The table as old as the database is at risk too; the one created since is not.
    assert "public.ledger" in found and "public.fresh" not in found
