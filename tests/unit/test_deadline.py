"""A run's deadline: when the work that can wait stands down, and the words it leaves in the report."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dbcrew.deadline import CpuClock, Deadline
from dbcrew.settings.run import Settings


def test_work_stands_down_once_less_than_the_reserve_is_left():
    now = datetime.now(UTC)
    assert not Deadline.after(now, 3600, reserve_seconds=15).near()
    assert Deadline.after(now, 10, reserve_seconds=15).near()  # 10 s left, 15 kept
    assert Deadline.after(now - timedelta(seconds=100), 60, reserve_seconds=0).near()  # passed


def test_the_stand_down_reason_says_how_far_the_deadline_was():
    now = datetime.now(UTC)
    ahead = Deadline.after(now, 3600, reserve_seconds=7200).stand_down_reason()
    assert ahead.startswith("stood down: the run's deadline was") and "s away" in ahead
    assert "7200 s kept" in ahead
    passed = Deadline.after(now - timedelta(seconds=100), 60, reserve_seconds=0)
    assert "passed" in passed.stand_down_reason()


def test_the_cpu_clock_reports_what_this_process_spent():
    clock = CpuClock.start()
    sum(i * i for i in range(200_000))  # some CPU, however fast the host
    cpu, wall = clock.reading()
    assert cpu > 0 and wall > 0
    assert "CPU-s in" in clock.describe() and "of a core" in clock.describe()


def test_the_default_deadline_is_the_window_plus_a_minute():
    s = Settings()
    assert s.deadline_after_window_seconds == 60.0 and s.deadline_reserve_seconds >= 0
