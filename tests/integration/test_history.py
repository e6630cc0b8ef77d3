"""History, baselines and alerts on a real PostgreSQL target, with the store on both backends.

Every test runs twice: on the default DuckDB file and with DBCREW_STORE_URL naming a database of
the embedded PostgreSQL (acceptance 4: the same tests pass on both). The module has its own
server: its planted databases come and go, and DROP DATABASE requests checkpoints. Reviews go through the one
review path (`dbcrew.roles.review.review`, which records history), as the flow does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from markupsafe import escape  # the escaping of report.html (Jinja autoescape)

from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.models import Report, Severity
from dbcrew.roles.crew.context import RunContext
from dbcrew.roles.crew.memory import target_identity
from dbcrew.roles.crew.run import Initialized
from dbcrew.roles.report.alerts import notify
from dbcrew.roles.report.comparing import TRENDS_CHART
from dbcrew.roles.report.recording import failed_report
from dbcrew.roles.spine import PlainPhases
from dbcrew.roles.spine import review as review_run
from dbcrew.settings.run import Settings
from dbcrew.settings.thresholds import Thresholds
from dbcrew.store import (
    STORE_ENV,
    RunRecord,
    RunStatus,
    Store,
    StoredFinding,
    Vitals,
    fingerprint,
    open_store,
)
from dbcrew.targets import parse_target
from dbcrew.workspace import Workspace
from tests.cli_here import dbcrew_here
from tests.webhooks import receiving_webhooks

PLANTED = """
CREATE TABLE audit (at timestamptz NOT NULL DEFAULT now(), what text NOT NULL);
CREATE TABLE items (id int PRIMARY KEY, sku text NOT NULL);
INSERT INTO audit (what) SELECT 'event ' || g FROM generate_series(1, 2000) g;
INSERT INTO items SELECT g, 'sku-' || g FROM generate_series(1, 2000) g;
CREATE INDEX items_sku_idx ON items (sku);
CREATE INDEX items_sku_copy_idx ON items (sku);
ANALYZE;
"""
FIX_ONE_ADD_ANOTHER = """
ALTER TABLE audit ADD COLUMN id bigserial PRIMARY KEY;
CREATE TABLE tags (id int PRIMARY KEY, item_id int NOT NULL, label text NOT NULL);
INSERT INTO tags SELECT g, g, 'tag' FROM generate_series(1, 2000) g;
CREATE INDEX tags_item_idx ON tags (item_id);
CREATE INDEX tags_item_copy_idx ON tags (item_id);
ANALYZE;
"""
BREAK_AGAIN = "ALTER TABLE audit DROP CONSTRAINT audit_pkey; ANALYZE;"


@pytest.fixture(scope="module")
def pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedPostgres]:
    """This module's own server: dropping databases requests checkpoints, which other modules' reviews would see."""
    server = EmbeddedPostgres(tmp_path_factory.mktemp("history-pg") / "data").start()
    yield server
    server.stop()


@pytest.fixture(params=["duckdb", "postgresql"])
def store_url(
    request: pytest.FixtureRequest,
    pg: EmbeddedPostgres,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> str:
    """The store of this test: a DuckDB file, or a fresh database on the embedded PostgreSQL."""
    if request.param == "duckdb":
        url = str(tmp_path / "store.duckdb")
    else:
        name = f"store_{uuid.uuid4().hex[:8]}"
        pg.psql(f"CREATE DATABASE {name};")
        url = pg.dsn(name)
    monkeypatch.setenv(STORE_ENV, url)
    return url


@pytest.fixture()
def planted(pg: EmbeddedPostgres) -> Iterator[str]:
    """A small database of its own with two planted problems (this test changes it between runs)."""
    name = f"hist_{uuid.uuid4().hex[:8]}"
    pg.psql(f"CREATE DATABASE {name};")
    pg.psql(PLANTED, dbname=name)
    yield pg.dsn(name)
    pg.psql(f"DROP DATABASE {name} WITH (FORCE);")


def review(
    dsn: str, out: Path, scenario: str = "health", window: float = 1.0, baseline: Path | None = None
) -> Report:
    run = RunContext(
        target=parse_target(dsn),
        scenario=scenario,
        out_dir=out,
        settings=Settings(
            window_seconds=window,
            activity_samples=2,
            baseline_path=str(baseline) if baseline else None,
        ),
    )
    return review_run(run, PlainPhases)


class Unreachable(PlainPhases):
    """Phases whose probe cannot reach the target; the error text carries a password that must go nowhere."""

    @staticmethod
    def initialize(run: RunContext) -> Initialized:
        raise ConnectionError("connection to postgresql://app:s3cret@db.internal/x refused")


def items(report: Report, change: str) -> set[tuple[str, str]]:
    assert report.history is not None
    return {(i.code, i.object) for i in getattr(report.history, change)}


def duplicate_on(report: Report, table: str) -> tuple[str, str]:
    (found,) = [
        (f.code, f.object)
        for f in report.findings
        if f.code == "index_duplicate" and f"public.{table}_" in f.object
    ]
    return found


def test_second_run_reports_new_absent_and_persisting_and_a_quick_return_persists(
    planted: str, store_url: str, tmp_path: Path
):
    first = review(planted, tmp_path / "first")
    assert first.history is not None and first.history.previous_run_id is None
    no_primary_key = ("table_without_primary_key", "public.audit")
    items_duplicate = duplicate_on(first, "items")
    assert {no_primary_key, items_duplicate} <= items(first, "new")
    assert TRENDS_CHART not in first.charts  # one run is no trend

    with psycopg.connect(planted, autocommit=True) as conn:
        conn.execute(FIX_ONE_ADD_ANOTHER)
    second = review(planted, tmp_path / "second")
    assert second.history is not None and second.history.previous_run_id == first.run_id
    tags_duplicate = duplicate_on(second, "tags")
    assert tags_duplicate in items(second, "new")
    assert no_primary_key in items(second, "absent") and items(second, "resolved") == set()
    assert items_duplicate in items(second, "persisting") and items_duplicate not in items(
        second, "new"
    )
    persisting = next(i for i in second.history.persisting if (i.code, i.object) == items_duplicate)
    assert persisting.first_seen == first.started_at
    # The report says it, in JSON, Markdown and HTML, with the trends chart and its caption.
    saved = json.loads((tmp_path / "second" / "report.json").read_text())
    assert saved["schema_version"] == 1 and saved["history"]["previous_run_id"] == first.run_id
    assert any((r["code"], r["object"]) == no_primary_key for r in saved["history"]["absent"])
    markdown = (tmp_path / "second" / "report.md").read_text()
    assert "## What changed" in markdown and f"Since run {first.run_id}" in markdown
    assert (
        TRENDS_CHART in second.charts and (tmp_path / "second" / TRENDS_CHART).stat().st_size > 5000
    )
    html = (tmp_path / "second" / "report.html").read_text()
    caption = escape(
        "Trends over this target's last 2 health reviews"
    )  # report.html is autoescaped
    assert "<h2>What changed</h2>" in html and f"<figcaption>{caption}" in html

    with psycopg.connect(planted, autocommit=True) as conn:
        conn.execute(BREAK_AGAIN)
    third = review(planted, tmp_path / "third")
    # Absent from one run only, never resolved: back, it persists (no flip, no alert).
    assert no_primary_key in items(third, "persisting")
    back = next(i for i in third.history.persisting if (i.code, i.object) == no_primary_key)
    assert back.first_seen == first.started_at
    assert no_primary_key not in items(third, "new") | items(third, "regressed")
    assert {tags_duplicate, items_duplicate} <= items(third, "persisting")

    store = open_store(store_url)
    identity = store.identity_of(parse_target(planted).display)
    assert identity is not None and identity.endswith("/" + planted.rsplit("/", 1)[1])
    assert [r.run_id for r in store.runs(identity)] == [first.run_id, second.run_id, third.run_id]
    trends = store.trends(identity, "health")
    assert [v.database_bytes is not None and v.cache_hit_ratio is not None for _, v in trends] == [
        True
    ] * 3
    assert trends[0][1].warning + trends[0][1].critical >= 2


def test_a_failed_run_is_stored_and_the_next_run_compares_with_the_last_good_one(
    planted: str, store_url: str, tmp_path: Path
):
    good = review(planted, tmp_path / "good")
    run = RunContext(
        target=parse_target(planted),
        out_dir=tmp_path / "failed",
        settings=Settings(window_seconds=1.0),
    )
    with pytest.raises(ConnectionError):
        review_run(run, Unreachable)
    store = open_store(store_url)
    identity = store.identity_of(parse_target(planted).display)
    failed = store.runs(identity)[-1]
    assert (failed.run_id, failed.status) == (
        run.run_id,
        RunStatus.FAILED,
    ) and "ConnectionError" in failed.error
    after = review(planted, tmp_path / "after")
    assert after.history is not None and after.history.previous_run_id == good.run_id
    assert after.history.resolved == []


def test_quiet_health_window_becomes_the_baseline_a_diagnosis_uses(
    planted: str, store_url: str, tmp_path: Path
):
    before = review(planted, tmp_path / "diagnose-before", scenario="diagnose")
    assert before.diagnosis is not None and "No baseline" in before.diagnosis.anomaly_description
    health = review(planted, tmp_path / "health")
    store = open_store(store_url)
    identity = store.identity_of(parse_target(planted).display)
    baseline = store.latest_baseline(identity)
    assert baseline is not None and baseline.quiet and baseline.run_id == health.run_id, baseline
    assert json.loads(baseline.window_json)["series"], "the sampled window's metric series are kept"
    diagnosis = review(planted, tmp_path / "diagnose-after", scenario="diagnose")
    assert diagnosis.diagnosis is not None
    assert (
        f"Baseline: the quiet window of health review {health.run_id}"
        in diagnosis.diagnosis.anomaly_description
    )
    facts = json.loads(_observation(tmp_path / "diagnose-after", "anomaly_facts"))
    assert facts["baseline"] is not None and facts["baseline_source"].startswith("the quiet window")
    given = tmp_path / "given-baseline.json"
    given.write_text(baseline.window_json)
    explicit = review(planted, tmp_path / "diagnose-given", scenario="diagnose", baseline=given)
    assert explicit.diagnosis is not None, "--baseline wins over the stored window"
    assert (
        "Baseline: the baseline file given-baseline.json." in explicit.diagnosis.anomaly_description
    )
    assert "quiet window of health review" not in explicit.diagnosis.anomaly_description


def _observation(run_dir: Path, key: str) -> str:
    (row,) = Workspace(run_dir / "workspace.duckdb").query(
        "SELECT body FROM observations WHERE key = ?", [key]
    )
    return str(row["body"])


@pytest.fixture()
def webhook() -> Iterator[tuple[str, list[dict[str, object]]]]:
    with receiving_webhooks() as (url, received):
        yield f"{url}/hook", received


def test_alerts_reach_a_webhook_for_new_problems_and_failures_never_for_old_news(
    planted: str, store_url: str, tmp_path: Path, webhook
):
    url, received = webhook
    first = review(planted, tmp_path / "first")
    sent = notify(
        first.model_copy(update={"link": "http://127.0.0.1:4200/runs/flow-run/abc"}), [url]
    )
    assert sent is not None and len(received) == 1
    (message,) = received
    assert message["path"] == "/hook" and message["type"] == "warning"
    assert parse_target(planted).display in str(message["title"])
    body = str(message["message"])
    assert (
        "http://127.0.0.1:4200/runs/flow-run/abc" in body
        and "table_without_primary_key on public.audit" in body
    )

    second = review(
        planted, tmp_path / "second"
    )  # nothing changed: persisting problems were told before
    assert notify(second, [url]) is None and len(received) == 1

    run = RunContext(
        target=parse_target(planted),
        out_dir=tmp_path / "failed",
        settings=Settings(window_seconds=1.0),
    )
    with pytest.raises(ConnectionError) as raised:
        review_run(run, Unreachable)
    notify(failed_report(run, raised.value), [url])
    assert len(received) == 2 and received[1]["type"] == "failure"
    assert "failed" in str(received[1]["title"]) and "s3cret" not in json.dumps(received)


def test_store_keeps_runs_sightings_trends_and_lessons_on_either_backend(store_url: str):
    store = open_store(store_url)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    target = "7300000000000000001/shop"

    def finding(code: str, obj: str, severity: Severity) -> StoredFinding:
        return StoredFinding(
            fingerprint=fingerprint(target, code, obj),
            code=code,
            object=obj,
            severity=severity,
            title=code,
        )

    for day, (status, found) in enumerate(
        [
            (RunStatus.COMPLETED, [finding("index_unused", "public.a_idx", Severity.WARNING)]),
            (
                RunStatus.COMPLETED,
                [
                    finding("index_unused", "public.a_idx", Severity.WARNING),
                    finding("index_unused", "public.a_idx", Severity.INFO),
                ],
            ),  # one per fingerprint: the worst
            (RunStatus.FAILED, []),
        ]
    ):
        run = RunRecord(
            run_id=f"r{day}",
            target=target,
            display="postgresql://u@h:5432/shop",
            scenario="health",
            started_at=start + timedelta(days=day),
            status=status,
        )
        store.record_run(
            run,
            found,
            Vitals(cache_hit_ratio=0.9 + day / 100, database_bytes=2**20 * (day + 1), warning=1),
        )
    assert [r.run_id for r in store.runs(target)] == ["r0", "r1", "r2"]
    assert [
        r.run_id for r in store.previous_runs(target, "health", start + timedelta(days=5), 3)
    ] == [
        "r1",
        "r0",
    ]  # not the failed one, the latest first
    assert [f.severity for f in store.findings("r1")] == [Severity.WARNING]
    sighting = store.sightings(target, "health", start + timedelta(days=5))[
        fingerprint(target, "index_unused", "public.a_idx")
    ]
    assert (sighting.first_seen, sighting.last_seen) == (start, start + timedelta(days=1))
    assert [round(v.cache_hit_ratio, 2) for _, v in store.trends(target, "health")] == [
        0.9,
        0.91,
        0.92,
    ]
    assert store.previous_runs(target, "diagnose", start + timedelta(days=5), 3) == []
    store.put_lesson(target, "collect_table_stats", "replace", '{"x": 1}', 2)
    assert open_store(store_url).lesson(target, "collect_table_stats") == (
        '{"x": 1}',
        2,
    )  # reopened: persisted


def test_a_transaction_is_one_session_that_commits_or_rolls_back_as_a_whole(
    store_url: str, monkeypatch: pytest.MonkeyPatch
):
    """A review's history calls share one connection (record_history); inside, reads see the block's writes."""
    store = open_store(store_url)
    sessions: list[int] = []
    backend_session = store.backend.session
    monkeypatch.setattr(store.backend, "session", lambda: sessions.append(1) or backend_session())
    target, start = "7300000000000000002/shop", datetime(2026, 1, 1, tzinfo=UTC)

    def run(run_id: str) -> RunRecord:
        return RunRecord(
            run_id=run_id,
            target=target,
            display="postgresql://u@h:5432/shop",
            scenario="health",
            started_at=start,
            status=RunStatus.COMPLETED,
        )

    with store.transaction():
        assert store.previous_runs(target, "health", start + timedelta(days=1), 1) == []
        store.record_run(run("kept"), [], Vitals(warning=1))
        with store.transaction():  # a nested block joins the outer one
            assert [r.run_id for r, _ in store.trends(target, "health")] == ["kept"]
    assert sessions == [1]
    with pytest.raises(RuntimeError, match="midway"), store.transaction():
        store.record_run(run("lost"), [])
        raise RuntimeError("midway")
    assert [r.run_id for r in open_store(store_url).runs(target)] == ["kept"]


def test_history_command_prints_runs_and_trends_and_refuses_an_unknown_target(
    planted: str, store_url: str, tmp_path: Path
):
    first = review(planted, tmp_path / "first")
    review(planted, tmp_path / "second")
    # Two through the CLI's entry point in this process (tests/cli_here.py), the last as a user runs it.
    shown = dbcrew_here("history", planted, env={STORE_ENV: store_url})
    assert shown.returncode == 0, shown.stderr
    assert parse_target(planted).display in shown.stdout
    assert (
        first.started_at.strftime("%Y-%m-%d %H:%M:%S") in shown.stdout
        and "completed" in shown.stdout
    )
    unknown = dbcrew_here("history", "nowhere", env={STORE_ENV: store_url})
    assert unknown.returncode == 2 and "no target in the store matches 'nowhere'" in unknown.stderr
    assert "Traceback" not in unknown.stderr
    env = {**os.environ, STORE_ENV: "postgresql://keeper:hunter2@127.0.0.1:1/nowhere"}
    down = subprocess.run(
        [sys.executable, "-m", "dbcrew.cli", "history", "x"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert (
        down.returncode == 2
        and "the store postgresql://keeper@127.0.0.1:1/nowhere cannot be used" in down.stderr
    )
    assert "hunter2" not in down.stderr and len(down.stderr.strip().splitlines()) == 1


def test_postgres_store_never_shows_its_password(pg: EmbeddedPostgres):
    pg.psql(
        "DROP ROLE IF EXISTS keeper; CREATE ROLE keeper LOGIN PASSWORD 'hunter2'; CREATE DATABASE keeper_store OWNER keeper;"
    )
    store = open_store(f"postgresql://keeper:hunter2@127.0.0.1:{pg.port}/keeper_store")
    assert "hunter2" not in store.location and store.location.startswith("postgresql://keeper@")
    assert isinstance(store, Store) and store.targets() == []


def test_identity_is_the_memory_identity(planted: str, store_url: str, tmp_path: Path):
    review(planted, tmp_path / "one")
    run = RunContext(target=parse_target(planted), out_dir=tmp_path / "probe")
    init = PlainPhases.initialize(run)
    assert open_store(store_url).identity_of(run.target.display) == target_identity(
        run.target, init.brief
    )


CHURNED = """
CREATE TABLE churn (id int PRIMARY KEY, v int) WITH (autovacuum_enabled = off);
INSERT INTO churn SELECT g, 0 FROM generate_series(1, 80000) g;
DELETE FROM churn WHERE id <= 60000;
"""


def test_a_statistics_reset_is_never_a_fix(planted: str, tmp_path: Path):
    """pg_stat_reset() zeroes the counters, not the dead tuples: the check says its counters are
    seconds old, and the history keeps the finding (not judged) instead of calling it resolved."""
    dead = ("dead_tuples_high", "public.churn")
    with psycopg.connect(planted, autocommit=True) as conn:
        conn.execute(CHURNED)
        conn.execute("SELECT pg_stat_force_next_flush()")
    first = review(planted, tmp_path / "first")
    assert dead in {(f.code, f.object) for f in first.findings}
    # A fresh cluster's counters are complete: judged.
    assert not next(c for c in first.coverage if c.check == "check_vacuum_health").unjudged

    with psycopg.connect(planted, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_reset()")
    second = review(planted, tmp_path / "second")
    assert dead not in {(f.code, f.object) for f in second.findings}  # the counters read 0 now
    assert dead not in items(second, "resolved")
    vacuum = next(c for c in second.coverage if c.check == "check_vacuum_health")
    assert vacuum.status.value == "ran" and "dead_tuples_high" in vacuum.unjudged
    assert "partial: statistics reset " in vacuum.reason and " s ago at " in vacuum.reason
    assert dead in items(second, "not_judged")
    markdown = (tmp_path / "second" / "report.md").read_text()
    assert "not judged this time" in markdown

    # Its last known state stands: once the counters are judged again, it is persisting, not back.
    judged_again = RunContext(
        target=parse_target(planted),
        out_dir=tmp_path / "third",
        settings=Settings(
            window_seconds=1.0,
            activity_samples=2,
            thresholds=Thresholds(counters_min_age_seconds=0),
        ),
    )
    with psycopg.connect(planted, autocommit=True) as conn:
        conn.execute("ANALYZE churn")  # the dead tuples counted again
        conn.execute("SELECT pg_stat_force_next_flush()")
    third = review_run(judged_again, PlainPhases)
    assert dead in items(third, "persisting"), third.history
