"""Reports on a worker's disk are kept for a number of days; only run directories are ever removed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dbcrew.settings import RETENTION_ENV, reports_retention_days
from roles.report.reporter import prune_reports

DAY = 86_400.0


def run_dir(root: Path, name: str, age_days: float, now: float) -> Path:
    path = root / name
    path.mkdir(parents=True)
    (path / "report.json").write_text("{}")
    os.utime(path / "report.json", (now - age_days * DAY, now - age_days * DAY))
    return path


def test_old_runs_go_and_everything_else_stays(tmp_path: Path):
    now = 1_800_000_000.0
    old = run_dir(tmp_path, "old", 20, now)
    young = run_dir(tmp_path, "young", 3, now)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "keep.txt").write_text("not a run")
    assert prune_reports(tmp_path, 14, now=now) == [old]
    assert not old.exists() and young.exists() and (tmp_path / "notes" / "keep.txt").exists()
    assert prune_reports(tmp_path / "missing", 14, now=now) == []


def test_the_retention_setting_is_checked(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(RETENTION_ENV, raising=False)
    assert reports_retention_days() == 14
    monkeypatch.setenv(RETENTION_ENV, "2.5")
    assert reports_retention_days() == 2.5
    for bad in ("soon", "-1"):
        monkeypatch.setenv(RETENTION_ENV, bad)
        with pytest.raises(ValueError, match=RETENTION_ENV):
            reports_retention_days()
