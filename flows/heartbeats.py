"""Flow runs that send no heartbeats, where the process that runs them already answers for them.

Prefect 3.8's heartbeat thread sleeps in 1 s steps and a flow run's end joins it: up to 1 s of idle
wall time per flow run (avg 0.5 s), measured at ~30% of a warm review's main thread. Heartbeats exist
so that a server-side automation can mark a run whose process died as crashed. Two kinds of run do
not need them:
- a review's phases (subflows): they run in the review's process and thread, and the review's own
  flow run heartbeats for them;
- a review started by `dbcrew review`/`diagnose` or the MCP server: the run lives in the user's
  process, which marks it cancelled on Ctrl-C or SIGTERM (cli/interrupts.py). Only a SIGKILL leaves
  it Running, as it would leave any local Prefect flow run without an automation watching.
Runs a worker takes from the pool keep their heartbeats: there the worker may die under them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from prefect.settings import temporary_settings


@contextmanager
def without_heartbeats() -> Iterator[None]:
    """Flow runs started in this block, in this thread, send no heartbeats."""
    with temporary_settings(updates={"flows.heartbeat_frequency": None}):
        yield
