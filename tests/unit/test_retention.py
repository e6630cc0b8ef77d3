"""Reports on a worker's disk are kept for a number of days and within a size; only run directories are ever
removed, and a run there keeps its report, not its workspace."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from dbcrew.roles.report.reporter import prune_reports, prune_reports_due
from dbcrew.settings.paths import RETENTION_ENV, reports_max_bytes, reports_retention_days
from dbcrew.workspace import Workspace, discard

DAY = 86_400.0


def run_dir(root: Path, name: str, age_days: float, now: float, chart_bytes: int = 0) -> Path:
    path = root / name
    (path / "charts").mkdir(parents=True)
    (path / "report.json").write_text("{}")
    (path / "charts" / "a.png").write_bytes(b"x" * chart_bytes)
    os.utime(path / "report.json", (now - age_days * DAY, now - age_days * DAY))
    return path


def test_old_runs_go_and_everything_else_stays(tmp_path: Path):
    now = 1_800_000_000.0
    old = run_dir(tmp_path, "old", 20, now)
    young = run_dir(tmp_path, "young", 3, now)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "keep.txt").write_text("not a run")
    assert prune_reports(tmp_path, 14, 2**30, now=now) == [old]
    assert not old.exists() and young.exists() and (tmp_path / "notes" / "keep.txt").exists()
    assert prune_reports(tmp_path / "missing", 14, 2**30, now=now) == []


def test_the_retention_setting_is_checked(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(RETENTION_ENV, raising=False)
    assert reports_retention_days() == 14
    monkeypatch.setenv(RETENTION_ENV, "2.5")
    assert reports_retention_days() == 2.5
    for bad in ("soon", "-1"):
        monkeypatch.setenv(RETENTION_ENV, bad)
        with pytest.raises(ValueError, match=RETENTION_ENV):
            reports_retention_days()


def test_past_the_size_bound_the_oldest_runs_go_first_and_the_newest_always_stays(tmp_path: Path):
    now = 1_800_000_000.0
    runs = [run_dir(tmp_path, f"run{n}", 5 - n, now, chart_bytes=1000) for n in range(5)]
    asked = run_dir(
        tmp_path / "ask", "health-1", 0.5, now, chart_bytes=1000
    )  # an ask's review, one deeper
    (tmp_path / "notes.txt").write_bytes(b"n" * 10_000)  # not a run: never counted, never removed
    assert prune_reports(tmp_path, 14, 3_100, now=now) == runs[:3]
    assert [r.exists() for r in runs] == [False, False, False, True, True] and asked.exists()
    assert prune_reports(tmp_path, 14, 0, now=now) == [runs[3], runs[4]]
    assert asked.exists() and (tmp_path / "notes.txt").exists()


def test_a_discarded_workspace_leaves_the_rest_of_its_run(tmp_path: Path):
    run = run_dir(tmp_path, "run", 0, 1_800_000_000.0)
    workspace = Workspace(run / "workspace.duckdb")
    workspace.write_table("t", [("a", "BIGINT")], [(n,) for n in range(1000)])
    assert "workspace.duckdb" in {p.name for p in run.iterdir()}
    discard(run / "workspace.duckdb")
    assert sorted(p.name for p in run.iterdir()) == ["charts", "report.json"]


def test_the_size_setting_is_in_mib(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("DBCREW_REPORTS_MAX_MB", raising=False)
    assert reports_max_bytes() == 1024 * 2**20
    monkeypatch.setenv("DBCREW_REPORTS_MAX_MB", "0.5")
    assert reports_max_bytes() == 2**19


def test_a_root_is_walked_once_in_a_while_not_at_every_runs_end(tmp_path: Path):
    """A fleet's reviews end a second apart on one worker: the reports are walked every `every` seconds at most."""
    now = time.time()
    first = run_dir(tmp_path, "first", 20, now)
    hour = 3_600.0
    assert prune_reports_due(tmp_path, 14, 2**30, every=hour) == [first]
    second = run_dir(tmp_path, "second", 20, now)
    assert prune_reports_due(tmp_path, 14, 2**30, every=hour) == [], "walked again within the hour"
    assert second.exists()
    assert prune_reports_due(tmp_path, 14, 2**30, every=0) == [second]
    assert not second.exists()
    elsewhere = run_dir(tmp_path.parent / f"{tmp_path.name}-elsewhere", "old", 20, now)
    assert prune_reports_due(elsewhere.parent, 14, 2**30, every=hour) == [elsewhere], (
        "another root is walked on its own clock"
    )
