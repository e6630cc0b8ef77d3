"""bench scale's count of target-intervals sampled, from the passes' ends, and its shared schedule's slot (no
cluster, no server)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from bench.scale import coverage, far_slot, missed_by_interval

START = datetime(2026, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return START + timedelta(seconds=seconds)


def test_passes_at_the_phase_of_the_interval_count_once_each_whatever_their_jitter() -> None:
    steady = {"t": [at(10 * k + (0.01 if k % 2 else -0.01)) for k in range(1, 10)]}
    assert coverage(steady, START, at(90), every=10) == (9, 9, [])


def test_a_missed_round_is_one_interval_unsampled_and_a_pass_right_after_another_is_told() -> None:
    passes = {
        "gap": [at(5), at(15), at(35), at(45)],  # the round at 25 s missed
        "doubled": [at(5), at(7), at(15), at(25), at(35), at(45)],
        "late": [at(26), at(36), at(46)],  # first pass 26 s in: two intervals unsampled
    }
    assert coverage(passes, START, at(50), every=10) == (15, 12, [("doubled", at(5), at(7))])
    # Where they lie: the round at 25 s (the gap from 15 s began in interval 1), and the first two.
    assert missed_by_interval(passes, START, at(50), every=10) == {1: 1, 0: 2}


@given(st.datetimes(max_value=datetime(9000, 1, 1), timezones=st.just(UTC)))
def test_the_shared_schedule_fires_no_sooner_than_11_hours_after_the_bench_starts(
    now: datetime,
) -> None:
    minute, hour, *rest = far_slot(now).split()
    assert rest == ["*", "*", "*"]
    slot = now.replace(hour=int(hour), minute=int(minute), second=0, microsecond=0)
    if slot <= now:
        slot += timedelta(days=1)
    assert timedelta(hours=11) < slot - now <= timedelta(hours=12)
