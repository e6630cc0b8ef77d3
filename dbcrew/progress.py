"""In-process progress events (plan drawn, task finished) for the CLI's progress bar.

Listeners are process-local and never serialized; a review run under a Prefect worker simply has none.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Any


class ProgressEvent(StrEnum):
    PLAN = (
        "plan"  # a strategy starts executing: total= tasks in it, done= already completed (reused)
    )
    TASK = "task"  # a task finished: task_id=, status=


Listener = Callable[[ProgressEvent, dict[str, Any]], None]
_LISTENERS: list[Listener] = []


def listen(listener: Listener) -> Callable[[], None]:
    _LISTENERS.append(listener)
    return lambda: _LISTENERS.remove(listener)


def emit(event: ProgressEvent, **data: Any) -> None:
    for listener in list(_LISTENERS):
        listener(event, data)
