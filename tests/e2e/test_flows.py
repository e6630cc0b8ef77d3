"""The review as Prefect flows on the session's test server: phases, re-plan, artifacts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.embedded import EmbeddedPostgres
from lab.shop import DemoShop
from dbcrew.errors import TargetError
from dbcrew.models import Report
from dbcrew.models.faults import FaultKind, FaultSpec
from dbcrew.targets import parse_target
from flows.review import health_review

pytestmark = pytest.mark.prefect


def test_health_review_flow_replans_and_posts_artifacts(shop: DemoShop, prefect_server: str, tmp_path: Path):
    path = health_review(target=shop.dsn, window=1.5, out=str(tmp_path),
                         faults=[FaultSpec(operator="collect_index_stats", kind=FaultKind.MISFIT)])
    report = Report.model_validate_json(Path(path).read_text())
    # collect_index_stats has no equivalent: the re-plan removes its subgraph and says so.
    assert (report.phases.alerts, report.phases.replans) == (1, 1)
    coverage = {c.check: c.status.value for c in report.coverage}
    assert coverage["check_duplicate_indexes"] == "skipped" and coverage["check_vacuum_health"] == "ran"
    assert report.phases.reused_tasks >= 6
    # The monitor's decision carries the global state it saw; the re-plan's edits say what changed and why.
    assert report.decisions[0].state is not None and report.decisions[0].state.failed == ["collect_index_stats"]
    removed = {e.task_id for e in report.edits if e.kind.value == "remove" and e.source == "replan"}
    assert {"collect_index_stats", "check_duplicate_indexes"} <= removed
    assert all(e.before is not None and "collect_index_stats failed" in e.reason for e in report.edits)

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(like_="dbcrew-")))
    keys = {a.key for a in artifacts}
    slug = "127-0-0-1-" + shop.dsn.rsplit(":", 1)[1].replace("/", "-")
    kinds = ("plan", "replan", "report", "findings", "monitor", "edits")
    assert {f"dbcrew-{kind}-postgres-{slug}" for kind in kinds} <= keys, keys
    replan = next(a for a in artifacts if a.key == f"dbcrew-replan-postgres-{slug}")
    assert "| remove | check_duplicate_indexes |" in str(replan.data)
    monitor = next(a for a in artifacts if a.key == f"dbcrew-monitor-postgres-{slug}")
    assert "collect_index_stats" in str(monitor.data) and "finished while paused" in str(monitor.data)


def test_parsed_target_carries_its_password_to_every_session_and_into_no_flow_parameter(
        pg: EmbeddedPostgres, shop: DemoShop, prefect_server: str, tmp_path: Path):
    pg.psql("CREATE ROLE reviewer LOGIN PASSWORD 'hunter2'; GRANT pg_monitor TO reviewer;"
            " GRANT CONNECT ON DATABASE shop TO reviewer;")
    hba = pg.datadir / "pg_hba.conf"
    hba.write_text("host all reviewer 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
    pg.psql("SELECT pg_reload_conf();")
    bare = pg.dsn("shop", user="reviewer")
    with pytest.raises(TargetError, match="password"):
        parse_target(bare).connect()  # this login really needs the password
    target = parse_target(bare.replace("reviewer@", "reviewer:hunter2@"))
    path = health_review(target=target, window=1.5, out=str(tmp_path), memory=False)
    report = Report.model_validate_json(Path(path).read_text())
    # The probe, every task run of the execute subflow and the reporter opened their sessions with it.
    assert {c.status.value for c in report.coverage} == {"ran"}, [(c.check, c.reason) for c in report.coverage]
    assert report.target.display == target.display

    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs()
        logs = client.read_logs()
    ours = [r for r in runs if r.parameters.get("target", {}) == json.loads(target.model_dump_json())
            or r.parameters.get("run", {}).get("target", {}).get("display") == target.display]
    assert {r.name.split("-")[0] for r in ours} >= {"health", "initialize", "execute"}, [r.name for r in ours]
    stored = json.dumps([r.parameters for r in runs]) + "".join(log.message for log in logs)
    assert "hunter2" not in stored and "hunter2" not in "".join(p.read_text() for p in tmp_path.glob("report.*"))
