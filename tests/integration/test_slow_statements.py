"""slow_query names the target's workload: never the review's own statements, utility commands or
statements too cheap to matter, on a real pg_stat_statements read by the real collector."""

from __future__ import annotations

import psycopg
import pytest

import dbcrew.operators  # noqa: F401  (registers the operators)
from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.operators.checks.statements import (
    TOTALS_SQL,
    StatementTotals,
    check_slow_queries,
    workload_of,
)
from dbcrew.operators.collect.window import WindowParams, collect_statements
from dbcrew.operators.registry import OperatorContext
from dbcrew.settings.run import Settings
from dbcrew.settings.thresholds import Thresholds
from dbcrew.targets import parse_target
from dbcrew.workspace import Workspace

APP_SLEEP = "SELECT pg_sleep(0.01), $1::int AS app"  # the workload's one statement that takes time
OWN_SLEEP = "SELECT pg_sleep(0.01), 'review' AS own"  # as heavy, sent by a review session
SLEEPS = 12  # each sleeper runs this often: at least 120 ms in all, pg_sleep's time on any host
NO_FLOORS = Thresholds(slow_query_min_share=0, slow_query_min_total_ms=0)
# Under the sleepers' 120 ms, far over the cheap statements: the loads are one statement each (the 200
# children and their 200 foreign-key look-ups: 1.0 ms and 0.2 ms in all on a quiet 2-core host, not 200
# inserts each paying its own executor start), so only a host a hundred times slower would lift them
# over it, and no host brings a sleeper's total under 120 ms.
CHEAP_FLOOR = Thresholds(slow_query_min_total_ms=100, slow_query_mean_ms=5)


def statement_texts(dsn: str, pattern: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT query FROM pg_stat_statements WHERE query LIKE %s"
            " AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())",
            [pattern],
        ).fetchall()
    return [r[0] for r in rows]


@pytest.fixture(scope="module")
def noisy(pg: EmbeddedPostgres, tmp_path_factory: pytest.TempPathFactory) -> OperatorContext:
    """A database whose statements are the workload, DDL and maintenance, foreign-key look-ups, and the
    review's own reads (also a foreign session calling itself dbcrew, whose statements are the workload's,
    and another role running the review's very statement, whose entry is the workload's)."""
    pg.psql("CREATE DATABASE noisy;")
    dsn = pg.dsn("noisy")
    with psycopg.connect(dsn, autocommit=True, application_name="dbcrew") as app:
        app.execute("CREATE EXTENSION pg_stat_statements")
        app.execute(
            "SET pg_stat_statements.track = 'all'"
        )  # foreign-key look-ups are nested statements
        app.execute("CREATE TABLE parent (id int PRIMARY KEY)")
        app.execute("CREATE TABLE child (id int PRIMARY KEY, parent_id int REFERENCES parent)")
        app.execute("INSERT INTO parent SELECT generate_series(1, 200)")
        app.execute("INSERT INTO child SELECT g, g FROM generate_series(1, 200) g")  # 200 look-ups
        app.execute("CREATE INDEX ON child (parent_id)")
        app.execute("VACUUM ANALYZE child")
        for i in range(SLEEPS):
            app.execute(APP_SLEEP.replace("$1", "%s"), [i])
        app.execute("CREATE ROLE twin LOGIN SUPERUSER")
        # the review's role may not turn tracking off for its sessions (a superuser's are not tracked at all)
        app.execute("CREATE ROLE slow_reader LOGIN IN ROLE pg_read_all_stats")
    with psycopg.connect(pg.dsn("noisy", user="twin"), autocommit=True) as twin:
        for _ in range(SLEEPS):
            twin.execute(OWN_SLEEP)  # the review's statement, run by another role: its own entry
    target = parse_target(dsn)
    with parse_target(pg.dsn("noisy", user="slow_reader")).session() as review:
        for _ in range(SLEEPS):
            review.execute(OWN_SLEEP)
    ctx = OperatorContext(
        target=target,
        workspace=Workspace(tmp_path_factory.mktemp("noisy") / "w.duckdb"),
        settings=Settings(window_seconds=0),
        brief=None,
        run_dir=tmp_path_factory.mktemp("noisy-run"),
    )
    collect_statements(ctx, WindowParams(window_seconds=0))
    return ctx


def reported(ctx: OperatorContext, thresholds: Thresholds) -> dict[str, str]:
    """query text -> severity of each slow_query finding under `thresholds`."""
    run = OperatorContext(
        target=ctx.target,
        workspace=ctx.workspace,
        settings=Settings(thresholds=thresholds),
        brief=None,
        run_dir=ctx.run_dir,
    )
    return {f.evidence["query"]: f.severity.value for f in check_slow_queries(run).findings}


def test_the_review_marks_its_statements_and_pg_stat_statements_keeps_the_mark(
    noisy: OperatorContext,
):
    texts = statement_texts(noisy.target.dsn, "SELECT pg_sleep($_), $_ AS own%")
    assert sorted(texts) == [
        "SELECT pg_sleep($1), $2 AS own",  # the other role's entry
        "SELECT pg_sleep($1), $2 AS own\n/* dbcrew */",  # the review's
    ], texts


def test_own_statements_and_utility_commands_are_never_slow(noisy: OperatorContext):
    found = reported(noisy, NO_FLOORS)
    assert any(q.endswith("AS app") for q in found), found
    assert [q for q in found if "AS own" in q] == ["SELECT pg_sleep($1), $2 AS own"], (
        "the review's entry was reported, or the other role's was hidden with it"
    )
    utility = [q for q in found if q.split(None, 1)[0].upper() in ("CREATE", "VACUUM", "SET")]
    assert utility == [], utility


def test_cheap_statements_fall_below_the_floors_of_time(noisy: OperatorContext):
    found = reported(noisy, CHEAP_FLOOR)
    assert [q for q in found if "FOR KEY SHARE" in q] == []
    assert [q for q in found if q.startswith("INSERT")] == []
    assert found == {
        "SELECT pg_sleep($2), $1::int AS app": "warning",
        "SELECT pg_sleep($1), $2 AS own": "warning",  # the other role's
    }
    rows = noisy.workspace.rows(StatementTotals, TOTALS_SQL)
    assert any("FOR KEY SHARE" in r.query for r in rows), "the look-ups were tracked"
    assert any(r.query.startswith("INSERT INTO child") for r in rows), "the load was tracked"
    load = workload_of(rows, CHEAP_FLOOR)
    assert load.own >= 1 and load.utility >= 4
