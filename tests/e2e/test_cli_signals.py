"""Ctrl-C and SIGTERM stop a running review, its Prefect server included: exit 130 / 143, nothing left,
and the report of what ran so far is written, saying it was stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from lab.embedded import EmbeddedPostgres

# Checks that judge what happened during the review's window (deltas of its collectors).
WINDOW_CHECKS = {"check_cache_hit_ratio", "check_temp_files", "check_unused_indexes"}


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_stops_the_run_and_everything_it_started(
    pg: EmbeddedPostgres, tmp_path: Path, signum: int, code: int
) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_HOME")}
    env["PREFECT_HOME"] = str(tmp_path / "prefect")  # its own ephemeral server, started by the CLI
    command = [
        sys.executable,
        "-m",
        "cli",
        "review",
        pg.dsn(),
        "--brain",
        "rules",
        "--window",
        "600",
        "--out",
        str(tmp_path / "out"),
    ]
    with subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as cli_proc:
        cli = psutil.Process(cli_proc.pid)
        started: set[int] = set()
        deadline = time.monotonic() + 300
        while not started and cli_proc.poll() is None and time.monotonic() < deadline:
            started = {p.pid for p in cli.children(recursive=True)}
            time.sleep(0.5)
        assert started, "the CLI started no server"
        while (
            cli_proc.poll() is None
            and time.monotonic() < deadline
            and not (tmp_path / "out" / "workspace.duckdb").exists()
        ):
            started |= {p.pid for p in cli.children(recursive=True)}
            time.sleep(0.5)  # the review is under way once its workspace exists
        assert cli_proc.poll() is None, cli_proc.stderr.read() if cli_proc.stderr else ""
        started |= {p.pid for p in cli.children(recursive=True)}
        cli_proc.send_signal(signum)
        try:
            _out, err = cli_proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            cli_proc.kill()
            raise
    assert cli_proc.returncode == code, err[-2000:]
    assert "Traceback" not in err and f"stopped by {signal.Signals(signum).name}" in err, err[
        -2000:
    ]
    survivors = [
        pid
        for pid in started
        if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    ]
    assert survivors == [], "processes the run started outlived it"
    name = signal.Signals(signum).name
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["partial"].startswith(f"stopped by {name}: "), report["partial"]
    # Checks of the catalogue alone may have finished before the signal (they ran, and say so); no
    # check of the 600 s window can have, so each of those says it was stopped.
    stopped = {
        c["check"]
        for c in report["coverage"]
        if c["status"] == "skipped" and c["reason"] == f"stopped by {name}"
    }
    assert WINDOW_CHECKS <= stopped, report["coverage"]
