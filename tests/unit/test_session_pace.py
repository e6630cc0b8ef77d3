"""The session samplers of one watcher keep one budget of samples a second, however many targets it watches.

Without it, each watched target's sampler read pg_stat_activity once a second, so a worker's sampling grew
with its share of the fleet: 1,000 targets took a 2-core host (bench scale)."""

from __future__ import annotations

import pytest

from dbcrew.operators.watch.session_sampler import SamplePace, session_step


def test_the_step_is_the_base_within_the_budget_and_widens_beyond_it() -> None:
    pace = SamplePace(base=1.0, per_second=50.0)
    for _ in range(50):
        pace.join()
    assert pace.step() == 1.0  # 50 targets at 1 s: 50 samples a second, the budget
    for _ in range(450):
        pace.join()
    assert pace.step() == pytest.approx(
        10.0
    )  # 500 targets: one sample each every 10 s, still 50 a second
    for _ in range(500):
        pace.leave()
    assert pace.step() == 1.0


def test_a_short_interval_keeps_its_own_shorter_step() -> None:
    assert SamplePace(base=session_step(2.0), per_second=50.0).step() == pytest.approx(0.4)
