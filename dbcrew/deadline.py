"""A run's deadline, and the CPU it got on the way there.

A diagnosis is asked for when the host is on fire, and a saturated host gives the run's process a
small share of a core (every PostgreSQL backend is a scheduling group of its own: at 30 clients a
core the run gets about 2 % of one). A run that ends without a report is worse than a partial one,
so every run has a deadline, its window plus `Settings.deadline_after_window_seconds` from its
start; the work that can wait (charts, a model's experts, a statement's extra plans) stands down
once less than `Settings.deadline_reserve_seconds` are left, the time kept for writing the causes
found so far, and the report says what stood down and how much CPU the run got.

The deadline is a wall-clock instant (UTC), not a monotonic one: a run's phases are Prefect
subflows that may rebuild the run's context from its serialized parameters.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta


@dataclass(frozen=True, slots=True)
class Deadline:
    """When the run's answer is due, and how much time before it the work that can wait stands down."""

    due: datetime
    reserve_seconds: float

    @classmethod
    def after(cls, start: datetime, seconds: float, reserve_seconds: float) -> Deadline:
        return cls(due=start + timedelta(seconds=seconds), reserve_seconds=reserve_seconds)

    def left(self) -> float:
        """Seconds until the deadline (negative once it passed)."""
        return (self.due - datetime.now(UTC)).total_seconds()

    def near(self) -> bool:
        """Whether work that can wait should stand down now: less than the reserve is left."""
        return self.left() < self.reserve_seconds

    def until_reserve(self) -> float:
        """Seconds work that can wait may still run before the reserve begins (0 once it has)."""
        return max(0.0, self.left() - self.reserve_seconds)

    def stand_down_reason(self, running: bool = False) -> str:
        """The words a skipped piece of work carries: how far the deadline was, and why it matters;
        `running` for work already started that the run stopped waiting for."""
        left = self.left()
        when = f"{left:.0f} s away" if left >= 0 else f"passed {-left:.0f} s before"
        what = "left unfinished, not in the report" if running else "stood down"
        return (
            f"{what}: the run's deadline was {when}"
            f" (under the {self.reserve_seconds:.0f} s kept for writing the causes found)"
        )


@dataclass(frozen=True, slots=True)
class CpuClock:
    """The process CPU time and wall time at a run's start, to say what share of a core the run got."""

    cpu_at_start: float
    wall_at_start: float

    @classmethod
    def start(cls) -> CpuClock:
        return cls(cpu_at_start=time.process_time(), wall_at_start=time.monotonic())

    def reading(self) -> tuple[float, float]:
        """(CPU-seconds of this process, wall seconds) since the start."""
        return time.process_time() - self.cpu_at_start, time.monotonic() - self.wall_at_start

    def describe(self) -> str:
        cpu, wall = self.reading()
        share = cpu / wall if wall > 0 else 0.0
        return f"this process got {cpu:.1f} CPU-s in {wall:.0f} s ({share:.0%} of a core)"
