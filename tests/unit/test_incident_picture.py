"""The usual band an incident is pictured against is the detector's own: a pass just outside it scores past Z_OPEN
against the same history, one just inside does not; the picture reads the passes around the incident and the
normal passes of the hour before it (none from another incident), from a real DuckDB store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from dbcrew.models.incident import IncidentSignal
from dbcrew.operators.window.anomaly import robust_z
from dbcrew.operators.window.incidents import SIGNALS, Z_OPEN
from dbcrew.operators.window.passes import PassBody, as_stored
from dbcrew.operators.window.picture import Band, picture_of
from dbcrew.store.samples import Incident, StoredPass, open_samples

T0 = datetime(2026, 11, 25, 3, 0, tzinfo=UTC)
TARGET = "7311111111111111111/shop"


@pytest.mark.parametrize(
    ("name", "history"),
    [
        ("db.xact_commit", [900.0 + 37.0 * (i % 7) for i in range(60)]),  # the MAD decides
        ("act.active", [0.0, 1.0, 0.0, 0.0, 2.0, 0.0] * 10),  # the signal's least deviation decides
        ("db.tup_returned", [4e6 + 1e3 * (i % 3) for i in range(60)]),  # 5 % of the level decides
    ],
)
def test_the_band_edges_are_where_the_detector_calls_a_pass_abnormal(
    name: str, history: list[float]
) -> None:
    band = Band.of(history, SIGNALS[name])
    past = np.asarray(history)
    for edge, outward in ((band.high, 1.0), (band.low, -1.0)):
        step = max(abs(edge), 1.0) * 1e-3
        outside = robust_z(np.array([edge + outward * step]), past, SIGNALS[name])
        inside = robust_z(np.array([edge - outward * step]), past, SIGNALS[name])
        if edge >= 0:  # a rate is never negative: no lower edge to cross below zero
            assert abs(outside) >= Z_OPEN > abs(inside), (name, edge, outside, inside)
    assert band.low < band.centre < band.high


def stored(at: datetime, commits: float) -> StoredPass:
    return StoredPass(
        target=TARGET,
        at=at,
        seconds=15.0,
        body=as_stored(PassBody(rates={"db.xact_commit": commits})),
    )


def test_the_picture_shows_the_passes_around_the_incident_against_the_hour_before(
    tmp_path: Path,
) -> None:
    store = open_samples(str(tmp_path / "store.duckdb"))
    every = timedelta(seconds=15)
    earlier = Incident(
        target=TARGET,
        started_at=T0 + timedelta(minutes=10),
        ended_at=T0 + timedelta(minutes=12),
        closed=True,
    )
    incident = Incident(
        target=TARGET,
        started_at=T0 + timedelta(minutes=60),
        ended_at=T0 + timedelta(minutes=62),
        closed=True,
        signals=[
            IncidentSignal(name="db.xact_commit", baseline_median=1000.0, peak=9000.0, z=80.0)
        ],
    )
    passes = []
    for i in range(1, 4 * 75):
        at = T0 + i * every
        inside = any(x.started_at <= at <= x.ended_at for x in (earlier, incident))
        passes.append(stored(at, 9000.0 if inside else 1000.0 + 10.0 * (i % 5)))
    store.record(passes, incidents=[earlier, incident])
    picture = picture_of(store, incident)
    (signal,) = picture.signals
    assert signal.band is not None and signal.band.centre == pytest.approx(1020.0)
    assert signal.band.high < 9000.0, "the incident's passes lie outside the band"
    assert picture.normal_passes == 4 * 60 - 1 - 9, (
        "the hour before, without the earlier incident's passes"
    )
    assert min(signal.minutes) >= picture.shown_from and max(signal.minutes) <= picture.shown_to
    assert picture.shown_from == -5.0, "five minutes either side of a two-minute incident"
    assert max(signal.values) == 9000.0 and signal.values[0] < 2000.0
