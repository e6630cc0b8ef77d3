"""The trends chart labels at most TIME_TICKS run times under each panel, whatever the history's length: a
month of nightly runs drew 30 overlapping labels, each a tick made and drawn (the chart's CPU grew with them)."""

from __future__ import annotations

from itertools import pairwise

import pytest

from dbcrew.operators.paint import TIME_TICKS, labelled_runs


@pytest.mark.parametrize("count", [2, TIME_TICKS])
def test_a_short_history_labels_every_run(count: int):
    assert labelled_runs(count) == list(range(count))


@pytest.mark.parametrize("count", [TIME_TICKS + 1, 10, 30, 31])
def test_a_long_history_labels_a_bounded_spread_with_the_first_and_the_latest_run(count: int):
    shown = labelled_runs(count)
    assert len(shown) == TIME_TICKS
    assert shown == sorted(set(shown)) and shown[0] == 0 and shown[-1] == count - 1
    gaps = [b - a for a, b in pairwise(shown)]
    assert max(gaps) - min(gaps) <= 1, f"spread unevenly: {shown}"
