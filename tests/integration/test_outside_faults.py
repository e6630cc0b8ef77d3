"""Faults outside the target cost only what they touch: a damaged store costs the history, a full disk the report.

Real parts: the session's PostgreSQL, a real DuckDB store file truncated on disk, a real tmpfs filled up.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from dbcrew.errors import OutNotWritable
from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.models import Report
from dbcrew.models.report import TargetInfo
from dbcrew.roles.crew.context import RunContext
from dbcrew.roles.crew.run import Initialized
from dbcrew.roles.report.reporter import REPORT_FILES
from dbcrew.roles.spine import PlainPhases, recorded_and_written, review
from dbcrew.settings.run import Settings
from dbcrew.store import RunRecord, RunStatus, Vitals, open_store
from dbcrew.targets import parse_target
from dbcrew.workspace import Workspace, release


@pytest.mark.prefect
def test_a_truncated_store_costs_the_review_its_history_only(
    pg: EmbeddedPostgres, prefect_server: str, private_store: Path, tmp_path: Path
) -> None:
    open_store(
        str(private_store)
    )  # a real store file, then cut short as a full disk or a crash leaves it
    os.truncate(private_store, private_store.stat().st_size // 2)
    out = tmp_path / "out"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "dbcrew.cli",
            "review",
            pg.dsn(),
            "--window",
            "0",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PREFECT_API_URL": prefect_server},
    )
    assert result.returncode == 3, result.stderr[-2000:]
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    said = f"history unavailable: the store {private_store} cannot be used: IO Error: "
    (shown,) = [line for line in result.stdout.splitlines() if line.startswith(said)]
    report = json.loads((out / "report.json").read_text())
    assert report["history"] is None and report["coverage"], report
    assert report["history_unavailable"]["store"] == str(private_store)
    assert shown == f"{said}{report['history_unavailable']['reason'].removeprefix('IO Error: ')}"
    assert said in (out / "report.md").read_text()


class Unreachable(PlainPhases):
    """Phases whose probe cannot reach the target."""

    @staticmethod
    def initialize(run: RunContext) -> Initialized:
        raise ConnectionError("connection to 127.0.0.1:1 refused")


def test_a_failed_run_the_store_cannot_record_keeps_its_own_error_with_a_note(
    private_store: Path, tmp_path: Path
) -> None:
    """A review that raises while the store is damaged: its own error goes on (not the store's), with
    a note that the run is not in the history."""
    open_store(str(private_store))
    os.truncate(private_store, private_store.stat().st_size // 2)
    run = RunContext(
        target=parse_target("postgresql://app@127.0.0.1:1/shop"),
        out_dir=tmp_path / "out",
        settings=Settings(),
    )
    with pytest.raises(ConnectionError, match=r"127\.0\.0\.1:1 refused") as raised:
        review(run, Unreachable)
    (note,) = raised.value.__notes__
    assert note.startswith(f"not recorded in the history: the store {private_store} cannot be used")


@pytest.fixture()
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KB tmpfs (mounting one needs root: CI runs as root), unmounted after the test."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)], check=True)
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def fill(disk: Path) -> None:
    """Write zeros until the disk refuses one more block."""
    with (
        (disk / "filler").open("wb", buffering=0) as filler,
        pytest.raises(OSError, match="No space"),
    ):
        while True:
            filler.write(b"\0" * 4096)


@pytest.mark.parametrize(
    ("earlier_runs", "refused_file"), [(0, "report.json"), (1, "charts/trends.png")]
)
def test_a_report_the_disk_refuses_is_one_error_and_a_failed_run_in_the_store(
    pg: EmbeddedPostgres,
    small_disk: Path,
    private_store: Path,
    earlier_runs: int,
    refused_file: str,
) -> None:
    """The report's files, its trends chart first when the target has history to draw."""
    full_disk = small_disk / "out"
    run = RunContext(target=parse_target(pg.dsn()), out_dir=full_disk, settings=Settings())
    Workspace(run.workspace_path).close()  # the run's workspace is there when the report is written
    store = open_store(str(private_store))
    display = run.target.display  # the identity of a run whose workspace holds no brief
    for n in range(earlier_runs):
        earlier = RunRecord(
            run_id=f"earlier{n}",
            target=display,
            display=display,
            scenario=run.scenario,
            started_at=run.started_at - timedelta(days=n + 1),
            status=RunStatus.COMPLETED,
        )
        store.record_run(earlier, [], Vitals())
    fill(small_disk)
    now = datetime.now(UTC)
    report = Report(
        run_id=run.run_id,
        target=TargetInfo(kind=run.target.kind, display=run.target.display),
        scenario=run.scenario,
        started_at=run.started_at,
        finished_at=now,
        brain="rules",
        summary="0 problems",
    )
    try:
        with pytest.raises(OutNotWritable) as refused:
            recorded_and_written(run, report)
    finally:
        release(run.workspace_path)  # as the flow does: the disk can be unmounted then
    assert str(refused.value).startswith(f"{full_disk / refused_file}: cannot write the ")
    assert str(refused.value).endswith(": No space left on device")
    assert not any((full_disk / name).exists() for name in REPORT_FILES)  # no truncated report left
    *_, stored = store.runs(display)
    assert stored.run_id == run.run_id and stored.status is RunStatus.FAILED, stored
    assert stored.report == "" and "No space left on device" in stored.error, stored


def test_a_workspace_write_the_disk_refuses_is_the_folders_fault(small_disk: Path) -> None:
    """A full disk under --out stops a review at its workspace first, mostly: exit 2 in one line, as for the report."""
    path = small_disk / "out" / "workspace.duckdb"
    workspace = Workspace(path)
    fill(small_disk)
    try:
        with pytest.raises(OutNotWritable) as refused:
            workspace.put_observation("brief", "x" * 10_000)
    finally:
        release(path)
    assert str(refused.value) == f"{path}: cannot write the workspace: No space left on device"


# DuckDB's file: three 4 KiB headers, then 256 KiB blocks; the second block holds part of the runs' rows.
SECOND_BLOCK = 3 * 4096 + 256 * 1024


def test_a_store_that_fails_only_when_read_is_one_line_for_history(private_store: Path) -> None:
    """What users met: a damaged store that opens, then fails on a page it reads (IOException at query time)."""
    open_store(str(private_store))
    with duckdb.connect(str(private_store)) as conn:
        conn.execute(
            "INSERT INTO runs SELECT 'r' || i, 't', 'd', 'health', now(), NULL, 'completed',"
            " repeat('x', 200), '', '' FROM range(20000) t(i)"
        )
        conn.execute("CHECKPOINT")
    with private_store.open("r+b") as store_file:
        store_file.seek(SECOND_BLOCK + 8)
        store_file.write(b"\xff" * 1000)
    open_store(str(private_store))  # it opens: the damage shows on the first read of that block
    result = subprocess.run(
        [sys.executable, "-m", "dbcrew.cli", "history", "d"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    (said,) = result.stderr.strip().splitlines()
    assert said.startswith(f"dbcrew: error: the store {private_store} cannot be used: "), said
