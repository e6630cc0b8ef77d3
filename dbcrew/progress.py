"""In-process progress events (task started, finished) for the CLI's progress bar.

Listeners are process-local and never serialized; a review run under a Prefect worker simply has none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Listener = Callable[[str, dict[str, Any]], None]
_LISTENERS: list[Listener] = []


def listen(listener: Listener) -> Callable[[], None]:
    _LISTENERS.append(listener)
    return lambda: _LISTENERS.remove(listener)


def emit(event: str, **data: Any) -> None:
    for listener in list(_LISTENERS):
        listener(event, data)
