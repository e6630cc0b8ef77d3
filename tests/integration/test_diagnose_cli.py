"""`dbcrew diagnose` / `dbcrew baseline` / `dbcrew extract-knowledge` as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dbcrew.lab.shop import DemoShop
from tests.cli_here import dbcrew_here


def dbcrew(
    *args: str, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dbcrew.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


BAD_INPUT = [
    (
        ("diagnose", "postgresql://nobody@127.0.0.1:1/x"),
        "cannot connect to postgresql://nobody@127.0.0.1:1/x",
    ),
    (("diagnose", "postgresql://nobody@127.0.0.1:1/x", "--window", "0"), "--window"),
    (
        (
            "diagnose",
            "postgresql://nobody@127.0.0.1:1/x",
            "--baseline",
            "/nonexistent/baseline.json",
        ),
        "--baseline",
    ),
    (
        ("baseline", "postgresql://nobody@127.0.0.1:1/x", "--out", "/tmp/never.json"),
        "cannot connect",
    ),
    (("extract-knowledge", ".", "--out", "/tmp/never.yaml"), "needs the LLM brain"),
]
NO_MODEL = {"OPENAI_API_KEY": "", "DBCREW_LLM_BASE_URL": ""}


def said_once_with_exit_2(result: subprocess.CompletedProcess[str], message: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in result.stderr


def test_bad_input_exits_2_with_one_line_from_a_process_of_its_own() -> None:
    """As a user runs it: the process's status, and all its start writes to stderr is the one line."""
    args, message = BAD_INPUT[0]
    said_once_with_exit_2(dbcrew(*args, env=NO_MODEL), message)


@pytest.mark.parametrize(("args", "message"), BAD_INPUT)
def test_bad_input_exits_2_with_one_line(args: tuple[str, ...], message: str) -> None:
    """Each kind through the same entry point in this process (tests/cli_here.py: no interpreter each)."""
    said_once_with_exit_2(dbcrew_here(*args, env=NO_MODEL), message)


@pytest.mark.prefect
def test_cli_diagnose_through_prefect(shop: DemoShop, prefect_server: str, tmp_path: Path) -> None:
    baseline = tmp_path / "baseline.json"
    recorded = dbcrew("baseline", shop.dsn, "--window", "2", "--out", str(baseline))
    assert recorded.returncode == 0 and baseline.is_file(), recorded.stderr[-2000:]
    out = tmp_path / "report"
    result = dbcrew(
        "diagnose",
        shop.dsn,
        "--window",
        "2",
        "--alert",
        "nightly check",
        "--baseline",
        str(baseline),
        "--out",
        str(out),
        env={"PREFECT_API_URL": prefect_server},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads((out / "report.json").read_text())
    assert report["scenario"] == "diagnose" and report["diagnosis"]["title"]
    assert report["root_causes"] == []  # nothing injected: an idle shop has no anomaly
    assert "nightly check" in (out / "report.md").read_text()


def test_cli_diagnose_with_no_prefect_server_runs_in_process(shop: DemoShop, tmp_path: Path):
    """No server named: no temporary Prefect server is started (its database would appear under
    PREFECT_HOME), the diagnosis runs in this process and its report is written as ever."""
    home = tmp_path / "prefect-home"
    home.mkdir()
    out = tmp_path / "report"
    result = dbcrew(
        "diagnose",
        shop.dsn,
        "--window",
        "2",
        "--out",
        str(out),
        env={**NO_MODEL, "PREFECT_API_URL": "", "PREFECT_HOME": str(home)},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads((out / "report.json").read_text())
    assert report["scenario"] == "diagnose" and report["diagnosis"]["title"]
    assert report["link"] == ""  # no flow run to link to
    assert not any(home.rglob("*.db")), sorted(p.name for p in home.rglob("*"))
