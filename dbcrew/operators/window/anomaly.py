"""Abnormal-metric detection: the window against a baseline, per metric.

A metric is abnormal when its window values come from a different distribution than the
baseline's (two-sample Kolmogorov-Smirnov, p < 0.05, exact: smirnov.py) *and* the window median sits far from the
baseline median in robust units (|z| >= 3 with the MAD scaled to a standard deviation, floored so
a flat baseline does not turn noise into an anomaly). Both tests: KS alone flags tiny but
consistent shifts; the z-score alone flags one spike.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel

from dbcrew.operators.window.evidence import WindowEvidence
from dbcrew.operators.window.smirnov import ks_2samp_pvalue

KS_P_VALUE = 0.05
Z_THRESHOLD = 3.0
MAD_TO_SIGMA = 1.4826


class AbnormalMetric(BaseModel):
    name: str
    baseline_median: float
    window_median: float
    z: float
    ks_p: float

    @property
    def direction(self) -> str:
        return "up" if self.window_median > self.baseline_median else "down"


def robust_z(window: np.ndarray, baseline: np.ndarray, least: float = 1e-6) -> float:
    """How many robust standard deviations the window median lies from the baseline median.

    `least` is the smallest deviation that counts as one standard deviation, in the metric's unit
    (the watcher's incidents give each signal its own: one session, ten commits a second)."""
    centre = float(np.median(baseline))
    mad = float(np.median(np.abs(baseline - centre))) * MAD_TO_SIGMA
    # Floor: 5% of the level (or of the window's level when the baseline sits at zero), so a
    # flat baseline does not make any wobble infinitely abnormal.
    floor = max(0.05 * abs(centre), 0.05 * abs(float(np.median(window))), least)
    return (float(np.median(window)) - centre) / max(mad, floor)


def abnormal_metrics(
    window: WindowEvidence, baseline: WindowEvidence | None
) -> list[AbnormalMetric]:
    """Metrics of `window` that left the baseline's range, strongest first; none without a baseline."""
    if baseline is None:
        return []
    found = []
    for name, values in window.series.items():
        base = baseline.series.get(name)
        if not base or len(values) < 3 or len(base) < 3:
            continue
        w, b = np.asarray(values, dtype=float), np.asarray(base, dtype=float)
        if np.allclose(w, b.mean()) and np.allclose(b, b.mean()):
            continue
        z = robust_z(w, b)
        if abs(z) < Z_THRESHOLD:
            continue
        p = ks_2samp_pvalue(values, base)
        if p < KS_P_VALUE:
            found.append(
                AbnormalMetric(
                    name=name,
                    baseline_median=float(np.median(b)),
                    window_median=float(np.median(w)),
                    z=z,
                    ks_p=p,
                )
            )
    return sorted(found, key=lambda m: -abs(m.z))
