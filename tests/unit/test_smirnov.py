"""The plain-Python KS p-value the review path uses gives scipy's exact two-sided p-value (scipy only here)."""

from __future__ import annotations

import random

import pytest
from scipy.stats import ks_2samp

from dbcrew.operators.window.smirnov import ks_2samp_pvalue


def test_fully_separated_small_samples_have_the_textbook_p_value():
    # m = n = 3, every value of one below every value of the other: 2 of the C(6, 3) = 20 merges reach D = 1.
    assert ks_2samp_pvalue([1, 2, 3], [4, 5, 6]) == pytest.approx(0.1, rel=1e-15)
    assert ks_2samp_pvalue([1.0, 2.0], [1.0, 2.0]) == 1.0  # identical samples: D = 0


def test_agrees_with_scipy_exact_on_random_samples_of_window_sizes_with_ties():
    rng = random.Random(7)
    for _ in range(300):
        m, n = rng.randint(1, 40), rng.randint(1, 40)
        shift, digits = rng.choice([0.0, 0.5, 2.0]), rng.choice([0, 1, 3])  # 0 digits: many ties
        first = [round(rng.gauss(0, 1), digits) for _ in range(m)]
        second = [round(rng.gauss(shift, 1), digits) for _ in range(n)]
        expected = float(ks_2samp(first, second).pvalue)
        assert ks_2samp_pvalue(first, second) == pytest.approx(expected, rel=1e-12, abs=1e-300)


def test_empty_sample_is_refused():
    with pytest.raises(ValueError, match="non-empty"):
        ks_2samp_pvalue([], [1.0])
