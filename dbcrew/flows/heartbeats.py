"""Flow runs that send no heartbeats, where the process that runs them already answers for them.

Prefect 3.8's heartbeat thread sleeps in 1 s steps and a flow run's end joins it: up to 1 s of idle
wall time per flow run (avg 0.5 s), measured at ~30% of a warm review's main thread. Heartbeats exist
so that a server-side automation can mark a run whose process died as crashed. Two kinds of run do
not need them:
- a review's phases (subflows): they run in the review's process and thread, and the review's own
  flow run heartbeats for them;
- a review started by `dbcrew review`/`diagnose` or the MCP server: the run lives in the user's
  process and ends with it. Ctrl-C or SIGTERM stops the review, which finishes its flow run with a
  partial report (dbcrew/cli/interrupts.py); a process killed outright, or one whose grace period ran
  out, leaves the run Running. With heartbeats, only an automation the user sets up on missing
  heartbeats (none exists by default; Prefect's interval is 180 s) would mark it crashed, so
  little is lost against up to 1 s on every run.
Runs a worker takes from the pool keep their heartbeats: there the worker may die under them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from prefect.context import SettingsContext, get_settings_context
from prefect.settings import Settings

_last: tuple[Settings, Settings] | None = (
    None  # (settings, the same without heartbeats), last derived
)


def _quiet(settings: Settings) -> Settings:
    """`settings` with no heartbeat frequency. Deriving it validates every Prefect setting anew (~35 ms); a
    worker's reviews all start from the same settings, so the last derivation is kept (one tuple, replaced whole,
    so threads never see half of one)."""
    global _last
    held = _last
    if held is None or held[0] is not settings:
        held = _last = (
            settings,
            settings.copy_with_update(updates={"flows.heartbeat_frequency": None}),
        )
    return held[1]


@contextmanager
def without_heartbeats() -> Iterator[None]:
    """Flow runs started in this block, in this thread, send no heartbeats (Prefect's `temporary_settings`,
    with the derived settings kept)."""
    context = get_settings_context()
    with SettingsContext(profile=context.profile, settings=_quiet(context.settings)):
        yield
