"""Bad command lines: exit 2 with one line on stderr and no traceback, before any work is done.

One case runs as a user runs it, a process of its own (its status, all its start writes to stderr);
the kinds of bad input run through the same entry point in this process (tests/cli_here.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dbcrew.cli.outdir import prepare_out
from dbcrew.errors import UsageError
from tests.cli_here import dbcrew_here

NOWHERE = (
    "postgresql://nobody@127.0.0.1:1/x"  # never reached: every case must fail before connecting
)


def dbcrew(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dbcrew.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **NO_MODEL},
    )


BAD_INPUT = [
    (("review", NOWHERE, "--window", "abc"), "--window"),
    (("review",), "Missing argument"),
    (("no-such-command",), "No such command"),
    (("review", NOWHERE, "--no-such-option"), "No such option"),
    (("review", NOWHERE, "--window", "nan"), "--window"),
    (("review", NOWHERE, "--window", "inf"), "--window"),
    (("baseline", NOWHERE, "--window", "nan", "--out", "/tmp/never.json"), "--window"),
    (("review", NOWHERE, "--threshold", "idle_in_transaction_seconds=nan"), "not a number"),
    (("review", NOWHERE, "--out", "/proc/x"), "--out /proc/x: cannot write there"),
    (("review", NOWHERE, "--out", "/etc/hostname"), "not a folder"),
    (("diagnose", NOWHERE, "--baseline", "/etc/hostname"), "not a baseline"),
]
NO_MODEL = {"OPENAI_API_KEY": "", "DBCREW_LLM_BASE_URL": ""}


def said_once_with_exit_2(result: subprocess.CompletedProcess[str], message: str) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in result.stderr, (
        result.stderr
    )


def test_bad_input_exits_2_with_one_line_from_a_process_of_its_own() -> None:
    """What the CLI's process writes to stderr, its start included, is the one line; the status is 2."""
    args, message = BAD_INPUT[0]
    said_once_with_exit_2(dbcrew(*args), message)


@pytest.mark.parametrize(("args", "message"), BAD_INPUT)
def test_bad_input_exits_2_with_one_line(args: tuple[str, ...], message: str) -> None:
    """Each kind of bad input through the entry point (tests/cli_here.py: no interpreter each)."""
    said_once_with_exit_2(dbcrew_here(*args, env=NO_MODEL), message)


def test_a_bad_variable_is_named_as_itself_not_blamed_on_an_option() -> None:
    result = dbcrew_here(
        "incidents", NOWHERE, "--since", "-1h", env={**NO_MODEL, "DBCREW_WATCH_SESSIONS": "many"}
    )
    said_once_with_exit_2(result, "DBCREW_WATCH_SESSIONS")
    assert "--since" not in result.stderr, result.stderr


def test_a_garbage_baseline_that_is_json_is_refused_too(tmp_path: Path) -> None:
    garbage = tmp_path / "baseline.json"
    garbage.write_text(json.dumps({"window": "quiet", "series": 3}))
    result = dbcrew_here("diagnose", NOWHERE, "--baseline", str(garbage), env=NO_MODEL)
    assert result.returncode == 2 and "not a baseline" in result.stderr


def test_a_reused_out_folder_starts_clean(tmp_path: Path) -> None:
    (tmp_path / "charts").mkdir()
    for name in ("report.json", "report.md", "workspace.duckdb", "charts/table_activity.png"):
        (tmp_path / name).write_text("from the previous run")
    assert prepare_out(tmp_path) == tmp_path and list(tmp_path.iterdir()) == []


def test_an_out_folder_with_other_files_is_refused_not_emptied(tmp_path: Path) -> None:
    (tmp_path / "thesis.tex").write_text("mine")
    with pytest.raises(UsageError, match="not empty"):
        prepare_out(tmp_path)
    (tmp_path / "report.json").write_text("{}")
    with pytest.raises(UsageError, match=r"thesis\.tex"):
        prepare_out(tmp_path)
    assert (tmp_path / "thesis.tex").read_text() == "mine" and (tmp_path / "report.json").exists()
