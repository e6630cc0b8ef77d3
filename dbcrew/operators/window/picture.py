"""An incident's picture: its abnormal signals around it, against the target's usual band as its detector drew it.

z-scores say how far a signal went, not what that looked like. The picture holds, for each of the
incident's strongest signals, its stored passes from a while before the incident to a while after,
and the band the detector judged it by: around the median of the target's normal passes of the
hour before the incident (those outside any incident, at most HISTORY of them, as the watcher seeds
its detector: dbcrew/roles/watching.py), Z_OPEN robust deviations either way (the MAD scaled to a standard
deviation, floored at the signal's least deviation and 5 % of the level, as dbcrew/operators/window/
incidents.py scores a pass). A value outside the band is what opened the incident. Where earlier
days are known, the detector also asks a signal to leave the same hour's range of those days; the
band drawn is the last hour's alone, and the picture says so.

Only the rates of the passes are read (one JSON field each, not the pass's statements and tables),
so a picture of an hour of passes costs milliseconds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np

from dbcrew.operators.window.anomaly import MAD_TO_SIGMA
from dbcrew.operators.window.incidents import HISTORY, LEVEL_SHARE, SIGNALS, Z_OPEN
from dbcrew.store.samples import Incident, SampleStore, StoredPass

RAW = 0  # the detector judges raw passes
SIGNALS_SHOWN = 4
AROUND_MIN = timedelta(minutes=5)  # shown before and after the incident, at least
AROUND_MAX = timedelta(minutes=30)  # and at most (as long as the incident in between)
HISTORY_SPAN = timedelta(hours=1)  # the detector's recent history: its last hour of normal passes


def normal_passes(store: SampleStore, identity: str, until: datetime) -> list[StoredPass]:
    """The target's raw passes of the hour before `until` that lie outside every incident, the last HISTORY of
    them: what its detector knew as normal at `until` (an incident's passes never become the target's normal)."""
    since = until - HISTORY_SPAN
    incidents = store.incidents(identity, since)
    normal = [
        p
        for p in store.passes(identity, RAW, since, until)
        if not any(i.started_at <= p.at <= i.ended_at for i in incidents)
    ]
    return normal[-HISTORY:]


@dataclass(frozen=True)
class Band:
    """A signal's usual range as the detector judged it: its median, and the edges Z_OPEN deviations away."""

    low: float
    centre: float
    high: float

    @classmethod
    def of(cls, history: list[float], least: float) -> Band:
        values = np.asarray(history, dtype=float)
        centre = float(np.median(values))
        mad = float(np.median(np.abs(values - centre))) * MAD_TO_SIGMA
        deviation = max(mad, LEVEL_SHARE * abs(centre), least)
        # A pass's own level also floors its deviation (5 % of it): above a positive centre the edge is
        # where both floors allow it.
        share = LEVEL_SHARE * Z_OPEN
        high = centre + Z_OPEN * deviation
        if centre > 0 and share < 1:
            high = max(high, centre / (1 - share))
        return cls(low=centre - Z_OPEN * deviation, centre=centre, high=high)


@dataclass(frozen=True)
class SignalPicture:
    name: str
    z: float
    minutes: list[float]  # each pass's end, in minutes from the incident's start
    values: list[float]
    band: Band | None  # None: too few normal passes before the incident to know its usual range


@dataclass(frozen=True)
class IncidentPicture:
    incident: Incident
    signals: list[SignalPicture]
    normal_passes: int  # how many passes the band was drawn from
    shown_from: float  # minutes from the incident's start (negative: before it)
    shown_to: float


def _rates(stored: StoredPass) -> dict[str, float]:
    rates = json.loads(stored.body).get("rates", {})
    return {str(k): float(v) for k, v in rates.items()}


def picture_of(store: SampleStore, incident: Incident) -> IncidentPicture:
    """The incident's strongest signals (at most SIGNALS_SHOWN) around it, each against its usual band."""
    length = incident.ended_at - incident.started_at
    around = min(max(length, AROUND_MIN), AROUND_MAX)
    since, until = incident.started_at - around, incident.ended_at + around
    shown = [
        (p.at.timestamp(), _rates(p)) for p in store.passes(incident.target, RAW, since, until)
    ]
    history = [_rates(p) for p in normal_passes(store, incident.target, incident.started_at)]
    start = incident.started_at.timestamp()
    signals = []
    for signal in incident.signals[:SIGNALS_SHOWN]:
        least = SIGNALS.get(signal.name, 1e-6)
        band = (
            Band.of([h.get(signal.name, 0.0) for h in history], least)
            if len(history) >= 3
            else None
        )
        signals.append(
            SignalPicture(
                name=signal.name,
                z=signal.z,
                minutes=[(at - start) / 60 for at, _r in shown],
                values=[r.get(signal.name, 0.0) for _at, r in shown],
                band=band,
            )
        )
    return IncidentPicture(
        incident=incident,
        signals=signals,
        normal_passes=len(history),
        shown_from=-around.total_seconds() / 60,
        shown_to=(until.timestamp() - start) / 60,
    )
