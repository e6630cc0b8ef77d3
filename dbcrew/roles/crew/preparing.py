"""Before a plan runs: the work its operators' first calls would wait for, started off the critical path.

A review's window collectors spend the window asleep between samples, and the tasks that come after
the window (the painters' charts) are what the report waits for. The window's host readings leave
this process's own CPU out (dbcrew/operators/window/readers.py, HostProbe), so preparing meanwhile does
not read as the target host's load. An operator names its preparation
(`Operator.prepare`, e.g. loading matplotlib: ~0.5 s of imports and ~0.4 s of font and canvas set-up
on 2 cores); the execute phase starts it in a background thread when the plan begins, so it happens
while the window runs. Each preparation is idempotent and cached by its operator module, so a worker
process running many reviews pays once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from dbcrew.logs import data_logger
from dbcrew.models import TaskSpec
from dbcrew.operators.registry import REGISTRY

log = data_logger(__name__)


def preparations(tasks: Iterable[TaskSpec]) -> list[Callable[[], None]]:
    """The distinct preparations of the tasks' operators, in plan order."""
    found: list[Callable[[], None]] = []
    for spec in tasks:
        operator = REGISTRY.get(spec.operator)  # an unknown operator fails as its task, not here
        prepare = operator.prepare if operator else None
        if prepare is not None and prepare not in found:
            found.append(prepare)
    return found


def start_preparing(tasks: Iterable[TaskSpec]) -> threading.Thread | None:
    """Run the tasks' preparations in one thread (a review never waits for it); None when there are none.

    Not a daemon thread: the process waits for it at exit. A daemon thread still inside a C++
    extension when the interpreter finalizes is unwound through code that cannot be, and the
    process aborts (matplotlib laying out a font: `terminate called without an active exception`,
    exit -6, seen in 3 of 21 in-process diagnoses whose painters had nothing to draw)."""
    steps = preparations(tasks)
    if not steps:
        return None
    thread = threading.Thread(target=_prepare, args=(steps,), name="dbcrew-prepare", daemon=False)
    thread.start()
    return thread


def _prepare(steps: list[Callable[[], None]]) -> None:
    for step in steps:
        try:
            step()
        except (
            Exception
        ):  # the operator's own call meets the same failure and reports it as its outcome
            log.debug("preparing %r failed; its operator will report why", step, exc_info=True)
