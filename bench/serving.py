"""What the operating benches share: `dbcrew server` over an inventory, started and stopped as a user would."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

from lab.embedded import _free_port


@contextmanager
def crew_server(inventory: Path, work: Path, max_reviews: int = 1) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """(API URL, the `dbcrew server` process) on a free port; SIGTERM at the end, as Ctrl-C would."""
    port = _free_port()
    env = {**os.environ, "PREFECT_HOME": str(work / "prefect-home"), "DBCREW_REPORTS_DIR": str(work / "reports")}
    env.pop("PREFECT_API_URL", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "cli", "server", "--inventory", str(inventory), "--port", str(port),
         "--max-reviews", str(max_reviews), "--poll-seconds", "1", "--logs", str(work / "logs")],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=work)
    assert process.stdout is not None
    seen = []
    for out in process.stdout:
        seen.append(out)
        if out.startswith("press Ctrl-C"):
            break
    else:
        raise RuntimeError("dbcrew server did not start:\n" + "".join(seen))
    try:
        yield f"http://127.0.0.1:{port}/api", process
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=120)


def tree_rss(pid: int) -> int:
    """Resident memory of a process and everything it started, in bytes."""
    try:
        root = psutil.Process(pid)
        family = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for member in family:
        try:
            total += member.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total
