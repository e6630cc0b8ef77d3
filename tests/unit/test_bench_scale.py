"""bench scale's count of target-intervals sampled, from the passes' ends (no cluster, no server)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bench.scale import coverage

START = datetime(2026, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return START + timedelta(seconds=seconds)


def test_each_whole_interval_counts_once_sampled_and_twice_sampled_ones_are_told_apart() -> None:
    passes = {
        "steady": [at(5), at(15), at(25)],
        "doubled": [at(1), at(9), at(25)],  # two in the first interval, none in the second
        "late": [at(29.5), at(31)],  # the last pass ends after the stretch: not counted
    }
    intervals, sampled, doubled = coverage(passes, START, at(30), every=10)
    assert intervals == 9
    assert sampled == 3 + 2 + 1
    assert doubled == 1


def test_a_partial_last_interval_is_left_out() -> None:
    intervals, sampled, _ = coverage({"t": [at(5), at(15)]}, START, at(19), every=10)
    assert (intervals, sampled) == (1, 1)
