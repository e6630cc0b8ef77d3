"""Session samplers on one budget, against a real PostgreSQL: together they keep to the budget's samples a second."""

from __future__ import annotations

import threading
import time

import pytest

from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.operators.watch.session_sampler import SamplePace, SessionSampler
from dbcrew.targets import Resumable, parse_target


def test_samplers_sampling_together_take_no_more_than_the_budget(pg: EmbeddedPostgres) -> None:
    """Twenty samplers on one budget of 20 a second: each one samples about once a second, not every 0.05 s."""
    pace = SamplePace(base=0.05, per_second=20.0)
    sessions = [Resumable(parse_target(pg.dsn())) for _ in range(20)]
    samplers = [SessionSampler(s, pace) for s in sessions]
    try:
        for sampler in samplers:
            sampler.start()
        deadline = time.monotonic() + 60
        while pace._sampling < len(samplers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pace.step() == pytest.approx(1.0)
        for sampler in samplers:  # count from here, every sampler on the shared step
            with sampler.lock:
                sampler.take()
        started = time.monotonic()
        time.sleep(3.0)
        taken = 0
        for sampler in samplers:
            with sampler.lock:
                taken += sampler.take().samples
        elapsed = time.monotonic() - started
    finally:
        for sampler in samplers:
            sampler.close()
        for s in sessions:
            s.close()
    # At most one sample a sampler per step over the elapsed time (and the one each may have been due at the start):
    # the unbudgeted step, 0.05 s, would be about 60 a sampler.
    assert taken <= len(samplers) * (elapsed / pace.step() + 1)
    assert pace._sampling == 0
    assert threading.active_count() < 100
