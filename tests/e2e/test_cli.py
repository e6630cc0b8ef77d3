"""The `dbcrew` command as a user runs it: exit codes, one-line errors, a real review through Prefect."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dbcrew.lab.shop import QUICK_IDLE_SECONDS, DemoShop
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


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (
            "postgresql://nobody@127.0.0.1:1/x",
            "cannot connect to postgresql://nobody@127.0.0.1:1/x",
        ),
        ("mysql://root@localhost/x", "unsupported target"),
        ("postgresql://u:s3cret@127.0.0.1:1/x?sslmode=bogus", "dbcrew: error:"),
    ],
)
def test_unusable_target_exits_2_with_one_line(target: str, message: str):
    result = dbcrew("review", target)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert "Traceback" not in result.stderr and "s3cret" not in result.stderr + result.stdout


def test_bad_option_value_exits_2(shop: DemoShop):
    """The first as a user runs it (a process), the other kinds through the same entry point in this
    process (tests/cli_here.py: no interpreter each)."""
    result = dbcrew("review", shop.dsn, "--window", "-1")
    assert (
        result.returncode == 2 and "--window" in result.stderr and "Traceback" not in result.stderr
    )
    result = dbcrew_here("review", shop.dsn, "--inject-fault", "nonsense")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    for bad in ("no_such_threshold=1", "idle_in_transaction_seconds=soon", "dead_tuples_min=-5"):
        result = dbcrew_here("review", shop.dsn, "--threshold", bad)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2 and len(lines) == 1 and "--threshold" in lines[0], (
            result.stderr
        )


@pytest.mark.prefect
def test_cli_review_writes_the_report_and_hides_the_password(
    shop: DemoShop, prefect_server: str, tmp_path: Path
):
    url = shop.dsn.replace(
        "postgres@", "postgres:hunter2@"
    )  # trust auth ignores it; it must still never leak
    result = dbcrew(
        "review",
        url,
        "--window",
        "2",
        "--out",
        str(tmp_path),
        "--no-gap-narrow",
        "--no-memory",
        "--threshold",
        f"idle_in_transaction_seconds={QUICK_IDLE_SECONDS}",
        "--threshold",
        f"idle_in_transaction_critical_seconds={QUICK_IDLE_SECONDS}",
        env={"PREFECT_API_URL": prefect_server},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"report: {tmp_path / 'report.json'}" in result.stdout
    for name in ("report.json", "report.md", "report.html", "charts/table_activity.png"):
        assert (tmp_path / name).exists(), name
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["schema_version"] == 1 and report["brain"] == "rules"
    assert report["ablations"] == ["no-gap-narrow", "no-memory"]
    assert {"index_duplicate", "index_invalid", "dead_tuples_high"} <= {
        f["code"] for f in report["findings"]
    }
    # Both overrides reach the check: the planted session, seconds old when this module runs (the
    # defaults: a warning from 30 s, critical from 600 s), is a critical finding through them only.
    assert ("idle_in_transaction", shop.idle_object(), "critical") in {
        (f["code"], f["object"], f["severity"]) for f in report["findings"]
    }
    everything = (
        result.stdout
        + result.stderr
        + "".join(p.read_text(errors="ignore") for p in tmp_path.glob("report.*"))
    )
    assert "hunter2" not in everything
