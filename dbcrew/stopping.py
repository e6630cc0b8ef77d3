"""A run asked to stop (Ctrl-C, SIGTERM): what is running winds down so a partial report can be written.

The CLI asks (`request`) when the first signal arrives. Sampling waits (`pause`) end at once, a
worker records its task as stopped instead of retrying it, the crew starts no new task and no
re-plan, and the report says what did not run. The CLI's watchdog still ends the process after its
grace period if the report is not written by then.
"""

from __future__ import annotations

import threading

_STOP = threading.Event()
_WHY: list[str] = []


def request(why: str) -> None:
    """Ask every part of this process's run to wind down; `why` is what the report says (e.g. `stopped by SIGINT`)."""
    if not _WHY:
        _WHY.append(why)
    _STOP.set()


def requested() -> str:
    """Why the run was asked to stop; empty when it was not."""
    return _WHY[0] if _STOP.is_set() and _WHY else ""


def pause(seconds: float) -> bool:
    """Sleep up to `seconds`; True when the run was asked to stop meanwhile (the caller stops waiting)."""
    return _STOP.wait(max(0.0, seconds))
