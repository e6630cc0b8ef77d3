"""What the run's deadline did to the report: the coverage line that says whether it was met, what
stood down before it, and how much CPU the run got (dbcrew/deadline.py says why runs have one)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dbcrew.models.report import CoverageEntry, CoverageStatus

if TYPE_CHECKING:  # the spine (dbcrew/roles/spine.py) writes reports through this module: no import cycle at run time
    from dbcrew.roles.crew.context import RunContext

RUN_DEADLINE = "run_deadline"  # the coverage line of the run itself, not of a check


def deadline_coverage(run: RunContext, stood_down: list[str]) -> CoverageEntry:
    """`stood_down`: the work that can wait which did not run because the deadline was near.

    The CPU share is what a saturated host gave the run: next to a late answer, it says why."""
    deadline = run.deadline
    s = run.settings
    left = deadline.left()
    due = (
        f"due {s.window_seconds:g} s + {s.deadline_after_window_seconds:g} s after the start,"
        + (f" {left:.0f} s left" if left >= 0 else f" passed {-left:.0f} s ago")
        + " when the report was built"
    )
    reason = f"{due}; {run.clock.describe()}"
    if stood_down:
        reason += f"; partial: stood down before the deadline: {', '.join(stood_down)}"
    return CoverageEntry(check=RUN_DEADLINE, status=CoverageStatus.RAN, reason=reason)
