"""The freeze horizon with autovacuum on: a database already past autovacuum_freeze_max_age at its
last health review and older now is xid_wraparound_risk, because autovacuum is not keeping up.

Its own server, autovacuum on with the freeze limit at its minimum (100,000 transactions) and a
naptime of a second, so the server's anti-wraparound vacuums are launched as soon as the age passes
it. What keeps them from freezing anything is real: a session holding an XID (and so the xmin
horizon) from before every transaction spent, as a forgotten transaction does in production. Two
reviews share one store, as a nightly schedule's do; the first has no earlier age to compare.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.models import Finding
from dbcrew.roles.crew.context import RunContext
from dbcrew.roles.spine import PlainPhases
from dbcrew.roles.spine import review as review_run
from dbcrew.settings.run import Settings
from dbcrew.settings.thresholds import Thresholds
from dbcrew.targets import parse_target

FREEZE_MAX_AGE = 100_000
SPEND = "CALL spend(%s)"


@dataclass
class Reviews:
    first: list[Finding]
    second: list[Finding]
    ages: tuple[int, int]  # the database's age at each review


def database_age(conn: psycopg.Connection) -> int:
    row = conn.execute(
        "SELECT age(datfrozenxid) FROM pg_database WHERE datname = current_database()"
    ).fetchone()
    assert row is not None
    return int(row[0])


def reviewed(dsn: str, out: Path, store: Path) -> list[Finding]:
    run = RunContext(
        target=parse_target(dsn),
        out_dir=out,
        settings=Settings(
            window_seconds=1.0,
            activity_samples=2,
            max_workers=4,
            store_url=str(store),
            # the holder is 10,000s of transactions old, not the millions a fleet warns from
            thresholds=Thresholds(server_warm_up_seconds=0, horizon_holder_min_age=1_000),
        ),
    )
    return [
        f
        for f in review_run(run, PlainPhases).findings
        if f.code == "xid_wraparound_risk" and f.is_problem
    ]


@pytest.fixture(scope="module")
def reviews(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Reviews]:
    root = tmp_path_factory.mktemp("rising")
    server = EmbeddedPostgres(
        root / "data",
        settings={
            "autovacuum_freeze_max_age": str(FREEZE_MAX_AGE),
            "autovacuum_naptime": "1",
        },
    ).start()
    try:
        server.psql("CREATE DATABASE ledgerdb;")
        dsn = server.dsn("ledgerdb")
        with (
            psycopg.connect(dsn, autocommit=True) as conn,
            psycopg.connect(dsn) as holder,
        ):
            conn.execute("CREATE TABLE ledger (id int PRIMARY KEY, note text)")
            conn.execute(
                "CREATE PROCEDURE spend(n int) LANGUAGE plpgsql AS $$"
                " BEGIN FOR i IN 1..n LOOP PERFORM pg_current_xact_id(); COMMIT; END LOOP; END $$"
            )
            holder.execute("SELECT pg_current_xact_id()")  # holds the horizon until rollback
            conn.execute(SPEND, [FREEZE_MAX_AGE + 10_000 - database_age(conn)])
            before = database_age(conn)
            first = reviewed(dsn, root / "first", root / "store.duckdb")
            conn.execute(SPEND, [10_000])
            after = database_age(conn)
            second = reviewed(dsn, root / "second", root / "store.duckdb")
            holder.rollback()
        yield Reviews(first, second, (before, after))
    finally:
        server.stop()


def test_an_age_still_rising_past_the_freeze_limit_is_at_risk_with_autovacuum_on(
    reviews: Reviews,
):
    before, after = reviews.ages
    # Nothing froze between the reviews: the held horizon kept the forced vacuums from it.
    assert FREEZE_MAX_AGE <= before < after
    # The first review has no earlier age: past the freeze limit with autovacuum on is its
    # ordinary work, far from the hard limit, so no finding.
    assert [f.object for f in reviews.first if f.object == "database ledgerdb"] == []
    found = {f.object: f for f in reviews.second}
    database = found.get("database ledgerdb")
    assert database is not None, sorted(found)
    assert database.severity.value == "warning"
    assert database.evidence["autovacuum_off"] is False
    assert FREEZE_MAX_AGE <= database.evidence["earlier_review"]["age"] < database.evidence["age"]
    assert "still rising since the last review" in database.title
    # What holds the horizon is named: freezing cannot pass it.
    assert database.evidence.get("horizon_held_by"), database.evidence
