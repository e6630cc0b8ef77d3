"""Reviews on a real PostgreSQL through the plain phase runner (no Prefect): plants, privileges, faults."""

from __future__ import annotations

import re
from pathlib import Path

import psycopg
import pytest
from markupsafe import escape

from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.lab.shop import QUICK_IDLE_SECONDS, DemoShop
from dbcrew.models.faults import FaultKind, FaultSpec
from dbcrew.roles.crew.context import RunContext
from dbcrew.roles.spine import PlainPhases
from dbcrew.roles.spine import review as review_run
from dbcrew.settings.run import Settings
from dbcrew.settings.thresholds import Thresholds
from dbcrew.targets import parse_target

READ_ONLY_STATEMENTS = {"select", "show", "set", "begin", "commit", "rollback", "with", "explain"}
# The shop's idle session is planted QUICK_IDLE_SECONDS before the tests start, not 30 s (tests/conftest.py).
SEES_THE_IDLE_SESSION = Thresholds(idle_in_transaction_seconds=QUICK_IDLE_SECONDS)
# And the planted slow statement: the shop's workload is its build's bulk loads (about 400,000 rows
# written once) and lab.shop.WORKLOAD_ROUNDS email lookups, each a sequential scan of the 50,000
# customers beside look-ups by an index. Rows written against rows scanned, both set by the shop,
# give the lookups their share (16 % measured on a quiet 2-core host, eight times the 2 % floor) on
# a fast host as on a slow one; their total in milliseconds is the host's speed, over the default 1 s
# floor on a slow host and under it on a fast one. That floor has its own test (test_slow_statements).
SEES_THE_PLANTED_PROBLEMS = Thresholds(
    idle_in_transaction_seconds=QUICK_IDLE_SECONDS, slow_query_min_total_ms=0
)
EMAIL_LOOKUP = "SELECT id, name FROM customers WHERE email = $1"
FAR_DEADLINE_SECONDS = 3600.0


def review(
    dsn: str,
    out: Path,
    faults: list[FaultSpec] | None = None,
    window: float = 1.5,
    thresholds: Thresholds | None = None,
):
    run = RunContext(
        target=parse_target(dsn),
        settings=Settings(
            window_seconds=window,
            activity_samples=3,
            thresholds=thresholds or Thresholds(),
            # Charts are asserted below: no deadline cuts them on a slow host (the default stands
            # them down from 45 s after the window). Standing down has its own test.
            deadline_after_window_seconds=FAR_DEADLINE_SECONDS,
        ),
        out_dir=out,
        faults=faults or [],
    )
    return review_run(run, PlainPhases)


def test_review_finds_every_planted_problem_and_nothing_else(shop: DemoShop, tmp_path: Path):
    report = review(shop.dsn, tmp_path, thresholds=SEES_THE_PLANTED_PROBLEMS)
    found = {(f.code, f.object) for f in report.findings}
    assert shop.expected <= found, f"missed: {shop.expected - found}"
    unplanted = {(f.code, f.object) for f in report.findings if f.is_problem} - shop.expected
    assert unplanted == set()
    assert all(c.status.value == "ran" for c in report.coverage)
    assert (tmp_path / "report.html").read_text().count("data:image/png;base64,") == 1
    assert (tmp_path / "charts" / "table_activity.png").stat().st_size > 1000
    assert report.charts and all(report.captions.get(c) for c in report.charts), (
        "every chart says what it shows"
    )
    html = (tmp_path / "report.html").read_text()
    slow = [f for f in report.findings if f.code == "slow_query"]
    assert slow and all(f.object.startswith("queryid:") and f.statement for f in slow)
    assert EMAIL_LOOKUP in [f.statement for f in slow], [f.statement for f in slow]
    assert (
        f'<pre class="statement">{escape(slow[0].statement)}</pre>' in html
    )  # the text next to its query id
    missing = next(f for f in report.findings if f.code == "index_missing")
    assert missing.fix_sql == "CREATE INDEX CONCURRENTLY ON public.customers (email);"
    assert "email" in missing.evidence["query"]


def test_charts_stand_down_before_the_runs_deadline_and_every_finding_is_still_written(
    shop: DemoShop, tmp_path: Path
):
    """A deadline no later than the window's end, with every second of it kept for writing: the painters
    stand down (by construction, on any host), the checks all run, and the coverage says what stood down."""
    run = RunContext(
        target=parse_target(shop.dsn),
        settings=Settings(
            window_seconds=1.0,
            activity_samples=2,
            thresholds=SEES_THE_IDLE_SESSION,
            deadline_after_window_seconds=0,
            deadline_reserve_seconds=3600,
        ),
        out_dir=tmp_path,
    )
    report = review_run(run, PlainPhases)
    assert shop.expected <= {(f.code, f.object) for f in report.findings}
    assert report.charts == [] and not (tmp_path / "charts" / "table_activity.png").exists()
    assert not report.partial  # charts judge nothing: history may still resolve findings
    entry = next(c for c in report.coverage if c.check == "run_deadline")
    assert "stood down before the deadline: paint_" in entry.reason
    assert "CPU-s in" in entry.reason
    checks = [c for c in report.coverage if c.check != "run_deadline"]
    assert checks and all(c.status.value == "ran" for c in checks)


def test_review_writes_nothing_to_its_target(pg: EmbeddedPostgres, shop: DemoShop, tmp_path: Path):
    start = pg.log_path.stat().st_size
    review(shop.dsn, tmp_path)
    log = pg.log_path.read_text(errors="replace")[start:]
    statements = re.findall(r" dbcrew \S+ LOG:  statement: (.*?)(?=\n\S|\Z)", log, flags=re.S)
    assert len(statements) > 10  # the log really holds the review's statements
    verbs = {s.strip().split(None, 1)[0].lower() for s in statements}
    assert verbs <= READ_ONLY_STATEMENTS, verbs


def test_review_sessions_refuse_writes(shop: DemoShop):
    with (
        parse_target(shop.dsn).session() as conn,
        pytest.raises(psycopg.errors.ReadOnlySqlTransaction),
    ):
        conn.execute("CREATE TABLE dbcrew_must_not_exist (id int)")


def test_role_without_read_all_stats_gets_an_honest_report(
    pg: EmbeddedPostgres, shop: DemoShop, tmp_path: Path
):
    pg.psql(
        "DROP ROLE IF EXISTS auditor; CREATE ROLE auditor LOGIN; GRANT CONNECT ON DATABASE shop TO auditor;"
    )
    report = review(pg.dsn("shop", user="auditor"), tmp_path, thresholds=SEES_THE_IDLE_SESSION)
    privilege = next(f for f in report.findings if f.code == "privilege_insufficient")
    assert privilege.evidence["grant"] == "GRANT pg_read_all_stats TO auditor;"
    sessions = next(c for c in report.coverage if c.check == "check_sessions")
    assert sessions.status.value == "ran" and "partial" in sessions.reason
    # It cannot see the planted idle session of another role, and it does not pretend to.
    assert not any(f.code == "idle_in_transaction" for f in report.findings)
    assert any(f.code == "index_duplicate" for f in report.findings)


def test_persistent_failure_goes_alert_monitor_instruction(shop: DemoShop, tmp_path: Path):
    report = review(
        shop.dsn, tmp_path, [FaultSpec(operator="check_sessions", kind=FaultKind.TIMEOUT)]
    )
    assert (report.phases.alerts, report.phases.instructions, report.phases.replans) == (1, 1, 0)
    decision = report.decisions[0]
    assert (decision.task_id, decision.branch, decision.leaf) == (
        "check_sessions",
        "pipeline",
        "timeout",
    )
    assert "statement timeout" in decision.error
    coverage = {c.check: c for c in report.coverage}
    assert coverage["check_sessions"].status.value == "failed"
    assert sum(c.status.value == "ran" for c in report.coverage) == len(report.coverage) - 1


def test_transient_failure_is_fixed_by_the_worker_alone(shop: DemoShop, tmp_path: Path):
    report = review(
        shop.dsn, tmp_path, [FaultSpec(operator="check_sessions", kind=FaultKind.TIMEOUT, times=1)]
    )
    assert report.phases.alerts == 0
    assert all(c.status.value == "ran" for c in report.coverage)


def test_team_error_replans_and_keeps_completed_tasks(shop: DemoShop, tmp_path: Path):
    report = review(
        shop.dsn, tmp_path, [FaultSpec(operator="collect_table_stats", kind=FaultKind.MISFIT)]
    )
    assert (report.phases.alerts, report.phases.replans, report.phases.plans) == (1, 1, 2)
    assert report.decisions[0].leaf == "wrong_operator" and report.decisions[0].branch == "logic"
    assert report.phases.reused_tasks >= 6  # every collector that finished before the alert
    assert all(c.status.value == "ran" for c in report.coverage)
    assert ("index_missing", "public.customers(email)") in {
        (f.code, f.object) for f in report.findings
    }


def test_clean_database_has_no_problem_findings(pg: EmbeddedPostgres, tmp_path: Path):
    pg.psql("CREATE DATABASE clean;")
    pg.psql(
        "CREATE EXTENSION pg_stat_statements; CREATE TABLE items (id bigint PRIMARY KEY, name text);"
        " INSERT INTO items SELECT g, 'item ' || g FROM generate_series(1, 20000) g;"
        " SELECT pg_stat_force_next_flush();",
        dbname="clean",
    )
    pg.psql(
        "ANALYZE;", dbname="clean"
    )  # after the load's statistics are flushed, as a loader would
    report = review(pg.dsn("clean"), tmp_path)
    assert [f for f in report.findings if f.is_problem] == []
    assert all(c.status.value == "ran" for c in report.coverage)
