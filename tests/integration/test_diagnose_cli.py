"""`dbcrew diagnose` / `dbcrew baseline` / `dbcrew extract-knowledge` as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab.shop import DemoShop


def dbcrew(
    *args: str, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
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
    ],
)
def test_bad_input_exits_2_with_one_line(args: tuple[str, ...], message: str) -> None:
    result = dbcrew(*args, env={"OPENAI_API_KEY": "", "DBCREW_LLM_BASE_URL": ""})
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in result.stderr


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
