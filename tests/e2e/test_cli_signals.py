"""Ctrl-C and SIGTERM stop a running review, its Prefect server included: exit 130 / 143, nothing left,
and the report of what ran so far is written, saying it was stopped. SIGKILL leaves nothing running
either, and the folder it left is taken over by the next run."""

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

from dbcrew.cli.outdir import prepare_out
from dbcrew.cli.reviewing import prepare_review
from dbcrew.errors import UsageError
from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.roles.crew.context import RunContext
from dbcrew.roles.spine import PlainPhases, review
from dbcrew.targets import parse_target

# Checks that judge what happened during the review's window (deltas of its collectors).
WINDOW_CHECKS = {"check_cache_hit_ratio", "check_temp_files", "check_unused_indexes"}


def own_prefect(tmp_path: Path) -> dict[str, str]:
    """The environment of a CLI review that starts its own temporary Prefect server."""
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_HOME")}
    env["PREFECT_HOME"] = str(tmp_path / "prefect")
    return env


def long_review(pg: EmbeddedPostgres, out: Path) -> list[str]:
    """A CLI review whose 600 s window is still running when the test stops it."""
    return [
        sys.executable,
        "-m",
        "dbcrew.cli",
        "review",
        pg.dsn(),
        "--brain",
        "rules",
        "--window",
        "600",
        "--out",
        str(out),
    ]


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_stops_the_run_and_everything_it_started(
    pg: EmbeddedPostgres, tmp_path: Path, signum: int, code: int
) -> None:
    env = own_prefect(tmp_path)
    command = long_review(pg, tmp_path / "out")
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


def test_kill_9_leaves_no_server_and_the_next_run_takes_over_its_folder(
    pg: EmbeddedPostgres, tmp_path: Path
) -> None:
    """SIGKILL runs no code of the CLI's: the kernel ends its temporary Prefect server (the parent-death
    signal), the kernel drops its workspace's lock, and the next run in the folder takes it over."""
    env = own_prefect(tmp_path)
    out = tmp_path / "out"
    command = long_review(pg, out)
    log = (
        tmp_path / "cli.err"
    )  # a file, as a terminal: a pipe closed after the kill would end the server too
    with log.open("w") as stderr, subprocess.Popen(command, env=env, stderr=stderr) as cli_proc:
        cli = psutil.Process(cli_proc.pid)
        deadline = time.monotonic() + 300
        while (
            cli_proc.poll() is None
            and time.monotonic() < deadline
            and not (out / "workspace.duckdb").exists()
        ):
            time.sleep(
                0.5
            )  # the review is under way once its workspace exists, its server long before
        assert cli_proc.poll() is None, log.read_text()
        started = cli.children(recursive=True)
        assert started, "the CLI started no server"
        with pytest.raises(UsageError, match=rf"a review \(PID {cli_proc.pid}\) is writing there"):
            prepare_out(out)  # a live review's folder is refused
        cli_proc.kill()
        cli_proc.wait(timeout=60)
    _, alive = psutil.wait_procs(started, timeout=30)
    assert alive == [], f"processes the killed CLI started outlived it: {alive}"

    request = prepare_review(pg.dsn(), window=0, out_dir=out, brain="rules")
    report = review(RunContext.of(request, parse_target(pg.dsn()), out), PlainPhases)
    assert report.coverage and json.loads((out / "report.json").read_text())["run_id"] == (
        report.run_id
    )
