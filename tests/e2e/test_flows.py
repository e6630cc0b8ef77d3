"""The review as Prefect flows on the session's test server: phases, re-plan, artifacts."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from dbcrew.errors import TargetError
from dbcrew.flows.review import health_review
from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.lab.shop import DemoShop
from dbcrew.models import Report
from dbcrew.models.faults import FaultKind, FaultSpec
from dbcrew.models.request import ReviewRequest
from dbcrew.settings.run import Ablations, Settings
from dbcrew.targets import parse_target

pytestmark = pytest.mark.prefect


def test_health_review_flow_replans_and_posts_artifacts(
    shop: DemoShop, prefect_server: str, tmp_path: Path
):
    report = health_review(
        ReviewRequest(
            target=shop.dsn,
            settings=Settings(window_seconds=1.5),
            out=tmp_path,
            faults=[FaultSpec(operator="collect_index_stats", kind=FaultKind.MISFIT)],
        )
    )
    assert report == Report.model_validate_json((tmp_path / "report.json").read_text())
    # collect_index_stats has no equivalent: the re-plan removes its subgraph and says so.
    assert (report.phases.alerts, report.phases.replans) == (1, 1)
    coverage = {c.check: c.status.value for c in report.coverage}
    assert (
        coverage["check_duplicate_indexes"] == "skipped"
        and coverage["check_vacuum_health"] == "ran"
    )
    assert report.phases.reused_tasks >= 6
    # The monitor's decision carries the global state it saw; the re-plan's edits say what changed and why.
    assert report.decisions[0].state is not None and report.decisions[0].state.failed == [
        "collect_index_stats"
    ]
    removed = {e.task_id for e in report.edits if e.kind.value == "remove" and e.source == "replan"}
    assert {"collect_index_stats", "check_duplicate_indexes"} <= removed
    assert all(
        e.before is not None and "collect_index_stats failed" in e.reason for e in report.edits
    )

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(like_="dbcrew-"))
        )
    keys = {a.key for a in artifacts}
    slug = "127-0-0-1-" + shop.dsn.rsplit(":", 1)[1].replace("/", "-")
    kinds = ("plan", "replan", "report", "findings", "monitor", "edits")
    assert {f"dbcrew-{kind}-postgres-{slug}" for kind in kinds} <= keys, keys
    replan = next(a for a in artifacts if a.key == f"dbcrew-replan-postgres-{slug}")
    assert "| remove | check_duplicate_indexes |" in str(replan.data)
    monitor = next(a for a in artifacts if a.key == f"dbcrew-monitor-postgres-{slug}")
    assert "collect_index_stats" in str(monitor.data) and "finished while paused" in str(
        monitor.data
    )


@contextmanager
def run_logs_at_info() -> Iterator[None]:
    """The run loggers at INFO: the suite runs Prefect at WARNING (tests/conftest.py), where a healthy review
    sends no log line to the server, and a check of what its logs hold would read none."""
    loggers = [logging.getLogger(name) for name in ("prefect.flow_runs", "prefect.task_runs")]
    before = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        for logger, level in zip(loggers, before, strict=True):
            logger.setLevel(level)


def test_parsed_target_carries_its_password_to_every_session_and_into_no_flow_parameter(
    pg: EmbeddedPostgres, shop: DemoShop, prefect_server: str, tmp_path: Path
):
    pg.psql(
        "CREATE ROLE reviewer LOGIN PASSWORD 'hunter2'; GRANT pg_monitor TO reviewer;"
        " GRANT CONNECT ON DATABASE shop TO reviewer;"
    )
    hba = pg.datadir / "pg_hba.conf"
    hba.write_text("host all reviewer 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
    pg.psql("SELECT pg_reload_conf();")
    bare = pg.dsn("shop", user="reviewer")
    with pytest.raises(TargetError, match="password"):
        parse_target(bare).connect()  # this login really needs the password
    target = parse_target(bare.replace("reviewer@", "reviewer:hunter2@"))
    with run_logs_at_info():
        report = health_review(
            ReviewRequest(
                target=target,
                out=tmp_path,
                settings=Settings(window_seconds=1.5, ablations=Ablations(memory=False)),
            )
        )
    # The probe, every task run of the execute subflow and the reporter opened their sessions with it.
    assert {c.status.value for c in report.coverage} == {"ran"}, [
        (c.check, c.reason) for c in report.coverage
    ]
    assert report.target.display == target.display

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
    from prefect.logging.handlers import APILogHandler

    APILogHandler().flush()  # the log lines go to the server in batches: all of this run's before they are read
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs()
    # The request's and the phases' parameters name the target by its password-free URL.
    ours = [
        r
        for r in runs
        if target.url
        in (
            r.parameters.get("request", {}).get("target"),
            r.parameters.get("run", {}).get("target"),
        )
    ]
    assert {r.name.split("-")[0] for r in ours} >= {"health", "initialize", "execute"}, [
        r.name for r in ours
    ]
    logs: list = []
    with get_client(sync_client=True) as client:
        while page := client.read_logs(
            log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[r.id for r in ours])),
            offset=len(logs),
        ):
            logs += page
    assert logs, "the review's log lines reached the server"
    stored = json.dumps([r.parameters for r in runs]) + "".join(log.message for log in logs)
    assert "hunter2" not in stored and "hunter2" not in "".join(
        p.read_text() for p in tmp_path.glob("report.*")
    )


def test_an_analysis_question_runs_its_review_as_a_flow_run_with_artifacts(
    shop: DemoShop, prefect_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    from dbcrew.flows.ask import answer_question

    monkeypatch.setenv("DBCREW_REPORTS_DIR", str(tmp_path / "reports"))
    quick = Settings(window_seconds=1.0, activity_samples=2)
    answer = answer_question(
        "Assess index health, vacuum health and configuration and report",
        shop.dsn,
        None,
        None,
        quick,
    )
    assert (
        answer.route.value == "analysis"
        and not answer.refused
        and answer.tools[0].operator == "health_review"
    )
    written = json.loads(
        next((tmp_path / "reports" / "ask").glob("health-*/report.json")).read_text()
    )
    worst = [f for f in written["findings"] if f["severity"] == "critical"]
    assert worst and f"critical {worst[0]['code']} on {worst[0]['object']}" in answer.answer
    assert written["charts"] and "charts:" in answer.answer, "the painter drew"
    with get_client(sync_client=True) as client:
        run = next(
            r
            for r in client.read_flow_runs()
            if r.parameters.get("request", {}).get("out")
            == str(next((tmp_path / "reports" / "ask").glob("health-*")))
        )
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[run.id]))
        )
    assert run.state is not None and run.state.is_completed() and run.name == "health-review"
    assert {a.key.split("-")[1] for a in artifacts if a.key} >= {"report", "findings"}
