"""Planning a statement read from the target never runs the target's code in the review's session.

The planner folds IMMUTABLE functions with constant arguments, so `EXPLAIN ... WHERE id = evil()`
would run `evil()` with the review's privileges. The hostile function here leaves a line in the
server log naming the session that ran it: the workload's runs prove the log works, and no line
may name the review's sessions.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.operators.explain import FOREIGN_CODE, unplannable
from dbcrew.operators.hypothetical_indexes import PLANNABLE, generic_plan_cost
from dbcrew.roles.crew.context import RunContext
from dbcrew.roles.spine import PlainPhases, review
from dbcrew.settings.run import Settings
from dbcrew.targets import parse_target

SETUP = """
CREATE EXTENSION IF NOT EXISTS pg_stat_statements;
CREATE EXTENSION IF NOT EXISTS citext;
CREATE SCHEMA shipping;
CREATE TABLE shipping.parcels (id int, tracking text, sent timestamptz, email citext);
CREATE VIEW shipping.recent_parcels AS SELECT * FROM shipping.parcels;
CREATE TABLE items (id int, note text);
INSERT INTO items SELECT g, 'n' || g FROM generate_series(1, 50000) g;
ANALYZE items;
CREATE FUNCTION evil() RETURNS int IMMUTABLE LANGUAGE plpgsql AS $$
BEGIN
  RAISE LOG 'evil ran as %', current_setting('application_name');
  RETURN 1;
END $$;
"""
HOT = "SELECT count(*) FROM items WHERE id = evil()"
RUNNING = "WITH pause AS (SELECT pg_sleep(30)) SELECT count(*) FROM items, pause WHERE id = evil()"


def evil_runs(pg: EmbeddedPostgres) -> list[str]:
    return [
        line
        for line in pg.log_path.read_text(errors="replace").splitlines()
        if "evil ran as" in line and "RAISE" not in line
    ]


@pytest.fixture(scope="module")
def hostile(pg: EmbeddedPostgres) -> str:
    pg.psql("CREATE DATABASE hostile;")
    pg.psql(SETUP, "hostile")
    return pg.dsn("hostile")


@pytest.fixture()
def workload(hostile: str) -> Iterator[None]:
    """The hot statement in a loop (pg_stat_statements) and one still running (pg_stat_activity)."""
    stop = threading.Event()

    def loop() -> None:
        with psycopg.connect(hostile, autocommit=True, application_name="workload") as conn:
            while not stop.is_set():
                conn.execute(HOT)

    running = psycopg.connect(hostile, autocommit=True, application_name="workload")
    long_one = threading.Thread(target=lambda: _ignore_cancel(running), daemon=True)
    hot = threading.Thread(target=loop, daemon=True)
    hot.start()
    long_one.start()
    try:
        yield
    finally:
        stop.set()
        running.cancel_safe()
        hot.join(10)
        long_one.join(10)
        running.close()


def _ignore_cancel(conn: psycopg.Connection) -> None:
    try:
        conn.execute(RUNNING)
    except psycopg.errors.QueryCanceled:
        pass  # the fixture ends it


def test_the_advisors_generic_plan_refuses_a_statement_calling_foreign_code(
    pg: EmbeddedPostgres, hostile: str
) -> None:
    with parse_target(hostile).session() as conn:
        cost = generic_plan_cost(conn, HOT, 180000)
        assert cost.total is None and cost.reason.startswith(FOREIGN_CODE), cost
        assert (
            generic_plan_cost(conn, "SELECT count(*) FROM items WHERE id = abs(-1)", 180000).total
            is not None
        )
    assert not [line for line in evil_runs(pg) if " dbcrew " in line]


@pytest.mark.parametrize(
    "query",
    [
        "SELECT * FROM shipping.parcels WHERE tracking = md5($1)",
        "SELECT * FROM shipping.parcels WHERE lower(tracking) = lower($1) AND email = $2",
        "SELECT date_trunc($1, sent), coalesce(tracking, $2), count(*) FROM shipping.parcels"
        " WHERE sent BETWEEN $3 AND now() GROUP BY 1, 2",
        "WITH recent AS (SELECT * FROM parcels WHERE sent > now() - $1::interval)"
        " SELECT upper(tracking) FROM recent",
    ],
)
def test_pg_catalogs_code_is_explained_whatever_overloads_an_extension_adds(
    hostile: str, query: str
) -> None:
    """citext defines `=`, `<`, ... in public: pg_catalog's own functions and operators still plan."""
    with parse_target(hostile).session() as conn:
        conn.execute("SET search_path = shipping, public")
        cost = generic_plan_cost(conn, query, 180000)
        assert cost.total is not None, cost


def test_a_refusal_names_the_code_and_the_schema_that_defines_it(hostile: str) -> None:
    with parse_target(hostile).session() as conn:
        assert (
            generic_plan_cost(conn, HOT, 180000).reason == f"{FOREIGN_CODE}: function public.evil"
        )
        conn.execute("SET search_path = shipping, public")
        assert unplannable(conn, "SELECT * FROM recent_parcels WHERE id = evil()", PLANNABLE) == (
            f"{FOREIGN_CODE}: function public.evil, view shipping.recent_parcels"
        )


def test_a_diagnosis_and_a_review_never_run_the_targets_functions(
    pg: EmbeddedPostgres, hostile: str, workload: None, tmp_path: Path
) -> None:
    settings = Settings(window_seconds=2, activity_samples=3, alert="queries are slower than usual")
    reports = {}
    for scenario in ("diagnose", "health"):
        run = RunContext(
            target=parse_target(hostile),
            scenario=scenario,
            settings=settings,
            out_dir=tmp_path / scenario,
        )
        reports[scenario] = review(run, PlainPhases)
    runs = evil_runs(pg)
    assert any(" workload " in line for line in runs), (
        "the hostile function never ran at all: the log proves nothing"
    )
    assert not [line for line in runs if " workload " not in line], (
        "the review ran the target's function"
    )
    diagnosis = reports["diagnose"].diagnosis
    assert diagnosis is not None
    assert any(
        "not explained: they call code outside pg_catalog (function public.evil)" in step
        for step in diagnosis.process
    ), diagnosis.process


def test_a_superuser_review_says_it_should_not_run_as_one(
    pg: EmbeddedPostgres, hostile: str, tmp_path: Path
) -> None:
    run = RunContext(
        target=parse_target(hostile),
        settings=Settings(window_seconds=1, activity_samples=2),
        out_dir=tmp_path,
    )
    report = review(run, PlainPhases)
    assert any("ran as superuser postgres" in note for note in report.notes)
    assert "ran as superuser postgres" in (tmp_path / "report.md").read_text()
