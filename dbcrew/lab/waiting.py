"""Waiting for a condition, never for a duration: what tests and benches wait on must hold on a fast
host and on a slow one alike (issue 35), so they poll for what they need, within a generous bound."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    check: Callable[[], T | None], what: str, seconds: float = 300.0, pause: float = 1.0
) -> T:
    """`check()`'s first truthy answer, polled every `pause` seconds; TimeoutError naming `what` after `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(pause)
    raise TimeoutError(f"waited {seconds:.0f} s for {what}")
