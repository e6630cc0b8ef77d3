"""`dbcrew watch` and `dbcrew diagnose --from --to` as a user runs them: one line per pass into the store, Ctrl-C ends
the watch with 130, the diagnosis reads the watched interval, bad input exits 2 with one line (one case in a
process of its own, the kinds of bad input through the same entry point in this process: tests/cli_here.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.roles.watching import Watcher
from dbcrew.store.samples import open_samples
from dbcrew.targets import parse_target
from tests.cli_here import dbcrew_here


def test_watch_prints_a_line_per_pass_and_ctrl_c_exits_130(
    pg: EmbeddedPostgres, private_store: Path
) -> None:
    watcher = subprocess.Popen(
        [sys.executable, "-m", "dbcrew.cli", "watch", pg.dsn("postgres"), "--every", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    assert watcher.stdout is not None
    lines = [watcher.stdout.readline() for _ in range(4)]
    watcher.send_signal(signal.SIGINT)
    _out, err = watcher.communicate(timeout=60)
    assert watcher.returncode == 130, err
    assert (
        lines[0].startswith("watching 1 target(s) every 1 s into ") and "first readings" in lines[1]
    )
    assert all("active" in line and "commits/s" in line for line in lines[2:]), lines
    assert err.strip().splitlines()[-1] == "dbcrew: stopped by SIGINT"
    store = open_samples(str(private_store))
    identity = store.identity_of(parse_target(pg.dsn("postgres")).display)
    assert identity is not None
    assert (
        len(store.passes(identity, 0, datetime.now(UTC) - timedelta(minutes=5), datetime.now(UTC)))
        >= 2
    )


BAD_WATCH = [
    (("watch", "postgresql://nobody@127.0.0.1:1/x", "--every", "0"), "--every"),
    (("watch", "mysql://x"), "mysql"),
]


def said_once_with_exit_2(result: subprocess.CompletedProcess[str], message: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], lines


def test_bad_input_exits_2_with_one_line_from_a_process_of_its_own() -> None:
    """As a user runs it: the process's status, and all its start writes to stderr is the one line."""
    args, message = BAD_WATCH[0]
    said_once_with_exit_2(
        subprocess.run(
            [sys.executable, "-m", "dbcrew.cli", *args], capture_output=True, text=True, timeout=120
        ),
        message,
    )


@pytest.mark.parametrize(("args", "message"), BAD_WATCH)
def test_bad_input_exits_2_with_one_line(args: tuple[str, ...], message: str) -> None:
    """Each kind through the same entry point in this process (tests/cli_here.py: no interpreter each)."""
    said_once_with_exit_2(dbcrew_here(*args), message)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--from", "yesterday"), "--from/--to: 'yesterday' is not a time"),
        (("--from", "-10m", "--to", "-20m"), "--from/--to: the interval must end after it starts"),
        (
            ("--from", "-10m", "--to", "2999-01-01T00:00:00+00:00"),
            "--from/--to: the interval ends in the future",
        ),
        (("--to", "-10m"), "--to needs --from"),
        (("--from", "-1h"), "no samples of postgresql://"),
    ],
)
def test_a_past_interval_that_is_not_one_or_was_not_watched_exits_2(
    pg: EmbeddedPostgres, args: tuple[str, ...], message: str
) -> None:
    said_once_with_exit_2(dbcrew_here("diagnose", pg.dsn("postgres"), *args), message)


@pytest.mark.prefect
def test_diagnose_from_to_reads_the_watched_interval(
    pg: EmbeddedPostgres, prefect_server: str, tmp_path: Path
) -> None:
    started = datetime.now(UTC)
    Watcher([parse_target(pg.dsn("postgres"))], open_samples(), every=1.0).run(rounds=8)
    out = tmp_path / "report"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "dbcrew.cli",
            "diagnose",
            pg.dsn("postgres"),
            "--from",
            started.isoformat(),
            "--to",
            "now",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PREFECT_API_URL": prefect_server},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads((out / "report.json").read_text())
    assert report["schema_version"] == 1 and report["interval"]["start"].startswith(
        f"{started:%Y-%m-%dT%H:%M}"
    )
    assert report["root_causes"] == [], "a quiet server had no anomaly"
    assert "the past interval" in report["diagnosis"]["anomaly_description"]
