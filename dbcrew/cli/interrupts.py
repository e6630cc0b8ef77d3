"""Ctrl-C and SIGTERM stop the whole run within seconds: exit 130 / 143, no process left behind.

SIGTERM's default action kills the process at once (no `finally`, no atexit): the Prefect server
the CLI started lived on as an orphan. Ctrl-C unwound into Prefect's task runner, which waits for
its worker threads, one of them possibly in a sampling window of minutes. Here the first signal
asks the run to stop (dbcrew.stopping: sampling waits end, no new task or re-plan starts, the
report says what did not run) and arms a watchdog: whichever comes first, the partial report
written or the grace period ending, ends every process the run started and exits 128 + the
signal at once.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar

import psutil

from dbcrew import stopping
from dbcrew.cli.console import fail

T = TypeVar("T")
GRACE_SECONDS = 10.0
_received: list[int] = []
_stopping = threading.Lock()


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    _received.append(signum)
    if len(_received) == 1:
        threading.Thread(target=_watchdog, args=(signum,), daemon=True, name="dbcrew-stop").start()
        raise KeyboardInterrupt(signal.Signals(signum).name)


def _watchdog(signum: int) -> None:
    threading.Event().wait(GRACE_SECONDS)
    stop(signum)


def run_interruptible(fn: Callable[[], T]) -> T:
    """`fn()` (a flow call) in a daemon thread while the main thread waits, so signals stay with the
    CLI: a flow in the main thread arms Prefect's own SIGTERM handler, which unwinds only after
    every worker thread has finished its task."""
    box: dict[str, Any] = {}
    done = threading.Event()

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread as it is
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=target, daemon=True, name="dbcrew-run").start()
    # An Event, not Thread.join: a join interrupted by the signal's KeyboardInterrupt can leave the
    # thread looking finished while it still runs.
    while not done.is_set():
        try:
            done.wait(0.2)
        except KeyboardInterrupt as exc:
            # The first signal: the run winds down and writes a partial report; the watchdog ends
            # everything after the grace period if it has not by then.
            stopping.request(f"stopped by {exc}")
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


def install() -> None:
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _on_signal)


def received() -> list[int]:
    """The signals that arrived, first first (empty when none did)."""
    return list(_received)


def stop(signum: int) -> None:
    """End every process this one started, say so in one line, exit 128 + `signum` at once (worker
    threads may be inside a long sampling window: a normal exit would wait for them)."""
    with _stopping:
        ended = _end_children()
        fail(
            f"dbcrew: stopped by {signal.Signals(signum).name}"
            + (f"; {len(ended)} child process(es) ended" if ended else "")
        )
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(128 + signum)


def _end_children() -> list[int]:
    """Terminate every process this one started (recursively), kill what outlives the grace period."""
    children = psutil.Process().children(recursive=True)
    end_processes(children, GRACE_SECONDS)
    return [c.pid for c in children]


def end_processes(processes: list[psutil.Process], grace: float) -> None:
    """SIGTERM each of `processes`, SIGKILL those still alive after `grace` seconds, reap them."""
    for process in processes:
        try:
            process.terminate()
        except psutil.NoSuchProcess:
            continue
    _gone, alive = psutil.wait_procs(processes, timeout=grace)
    for process in alive:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            continue
    psutil.wait_procs(alive, timeout=grace)
