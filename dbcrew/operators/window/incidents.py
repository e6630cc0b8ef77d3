"""Incidents: each pass of a target against the target's own recent passes and, once known, its same hour on earlier days.

A signal (active and waiting sessions, commit and rollback rates, tuple rates, temp bytes, WAL,
reads, the server's CPU and private memory, sessions waiting on I/O, the statements' execution time) is abnormal in a pass when its value lies at least Z_OPEN robust standard
deviations from the median of the target's last HISTORY passes (the MAD scaled to a standard
deviation, never under the signal's LEAST deviation: one session, ten commits a second, so a flat
history does not turn one stray session into an anomaly). Hysteresis: an incident opens after
OPEN_AFTER consecutive abnormal passes (one noisy pass is not an incident; the pass just before the
first one counts as its start when it already rose past Z_CLOSE on one of its signals, the same way:
an anomaly that begins mid-pass makes that pass only partly abnormal, and waiting for two whole
abnormal passes would open it up to three intervals after it began) and closes after
CLOSE_AFTER consecutive passes with every signal back under Z_CLOSE. Passes inside an incident
never join the history, so a long incident does not become the target's normal.

Same hour of day. The last hour alone calls a nightly batch an incident every night: at 02:00 its
work is far from what 01:00-02:00 did. So the detector also knows what the target did around the
same time of day on earlier days, from the store's 1-minute buckets (`recall`: the watcher keeps
them 14 days). For a pass at time t, each earlier day d (1 to SAME_HOUR_DAYS days back) that has at
least SAME_HOUR_MIN_MINUTES minute buckets within SAME_HOUR_REACH of t's time of day gives an
envelope per signal: the lowest and highest pass of its minutes there (a bucket keeps them beside
its mean, dbcrew/operators/window/passes.py `merge`; one stored without them gives its mean). Once
at least SAME_HOUR_MIN_DAYS such days exist, the hour's normal range for a signal is from the N-th
lowest of the days' lows to the N-th highest of their highs (N = SAME_HOUR_MIN_DAYS): a level the target reached at this time on at least
N earlier days is this hour's normal (work that recurs daily), while a level reached on fewer days
(a one-off incident, a batch that only just started) is not, so one past anomaly never hides the
same anomaly again. A signal is then abnormal only if it is abnormal against the recent history AND
outside the hour's range by the same number of robust deviations (the edge's 5 %, the pass's 5 %,
the signal's least deviation, or how much that edge moved from day to day, the MAD of the days'
edges as a standard deviation, whichever is largest: a batch whose work varies from night to night
is judged in that variation, as the recent history is by its MAD, while one day's anomaly does not
widen it), in the same direction; its score is the smaller of the two. Fewer than N known days: the
recent history alone decides, as before. Passes, not minute means: a pass is judged, and a minute's
mean is narrower than its passes, so a range of means can call a bursty batch's ordinary passes
abnormal (a swing under a signal's floor is not kept: the floor absorbs it). Hourly buckets (kept
90 days) are not used: they cannot say when in the hour a burst was. Days are 24 h apart in UTC:
after a daylight-saving change a
local-time batch is at its new hour on N days later, and is an incident until then.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import NamedTuple

import numpy as np

from dbcrew.models.incident import IncidentSignal
from dbcrew.operators.window.anomaly import MAD_TO_SIGMA, robust_z
from dbcrew.operators.window.metrics import floors
from dbcrew.store.samples import Incident

# Each signal, with the smallest deviation that counts as one standard deviation (its unit's noise: the metric's floor
# in metrics.py); why CPU and I/O are the server's own and the floors' levels: docs/watch.md, why these levels.
SIGNALS: dict[str, float] = floors()  # the catalogue's (metrics.py): name -> floor, in its unit
Z_OPEN = 4.0
Z_CLOSE = 2.0
OPEN_AFTER = 2
CLOSE_AFTER = 3
HISTORY = 240  # passes: an hour at 15 s
MIN_HISTORY = 5  # fewer passes say nothing of what is normal
SAME_HOUR_DAYS = (
    14  # earlier days looked at: the 1-minute tier's retention (dbcrew/roles/watching.py TIERS)
)
SAME_HOUR_MIN_DAYS = (
    3  # N: known days needed before the same hour judges, and days a level must recur on
)
SAME_HOUR_REACH = timedelta(
    minutes=30
)  # either side of the pass's time of day, for a batch's daily jitter
SAME_HOUR_MIN_MINUTES = 10  # minute buckets a day needs within the reach to count as a known day
LEVEL_SHARE = 0.05  # as robust_z's floor: a deviation is never under 5 % of the level


class Minute(NamedTuple):
    """One stored 1-minute bucket as the same hour reads it: when it ended, each signal's lowest and highest pass."""

    ended: datetime
    low: dict[str, float]
    high: dict[str, float]


Minutes = list[Minute]
Recall = Callable[[datetime, datetime], Minutes]
"""The target's stored 1-minute buckets that ended in (after, until], oldest first."""


@dataclass
class EarlierDay:
    """One earlier day's minutes near the hour: when each ended (epoch seconds), each signal's lowest and highest pass
    (minutes x SIGNALS)."""

    back: int
    ends: np.ndarray
    lows: np.ndarray
    highs: np.ndarray


@dataclass
class SameHour:
    """The earlier days' minutes around one clock hour, loaded once per hour (one store read per earlier day)."""

    hour: datetime
    days: list[EarlierDay]

    @classmethod
    def load(cls, recall: Recall, at: datetime) -> SameHour:
        hour = at.replace(minute=0, second=0, microsecond=0)
        days = []
        for back in range(1, SAME_HOUR_DAYS + 1):
            then = hour - timedelta(days=back)
            minutes = recall(then - SAME_HOUR_REACH, then + timedelta(hours=1) + SAME_HOUR_REACH)
            if minutes:
                days.append(
                    EarlierDay(
                        back=back,
                        ends=np.array([m.ended.timestamp() for m in minutes]),
                        lows=np.array(
                            [[m.low.get(name, 0.0) for name in SIGNALS] for m in minutes]
                        ),
                        highs=np.array(
                            [[m.high.get(name, 0.0) for name in SIGNALS] for m in minutes]
                        ),
                    )
                )
        return cls(hour=hour, days=days)

    def ranges(self, at: datetime) -> dict[str, HourRange] | None:
        """Each signal's normal range at `at`'s time of day, or None with fewer than SAME_HOUR_MIN_DAYS known days."""
        lows, highs = [], []
        reach = SAME_HOUR_REACH.total_seconds()
        for day in self.days:
            near = np.abs(day.ends - (at - timedelta(days=day.back)).timestamp()) <= reach
            if np.count_nonzero(near) >= SAME_HOUR_MIN_MINUTES:
                lows.append(day.lows[near].min(axis=0))
                highs.append(day.highs[near].max(axis=0))
        if len(lows) < SAME_HOUR_MIN_DAYS:
            return None
        n = SAME_HOUR_MIN_DAYS
        low = np.sort(np.array(lows), axis=0)[n - 1]  # the N-th lowest of the days' lows
        high = -np.sort(-np.array(highs), axis=0)[n - 1]  # the N-th highest of their highs
        below, above = _spread(np.array(lows)), _spread(np.array(highs))
        return {
            name: HourRange(float(low[i]), float(high[i]), float(below[i]), float(above[i]))
            for i, name in enumerate(SIGNALS)
        }


def _spread(edges: np.ndarray) -> np.ndarray:
    """Per signal, how much the days' edges (days x SIGNALS) differ from day to day: their MAD, scaled to a standard
    deviation (robust: one day's anomaly does not widen it)."""
    centre = np.median(edges, axis=0)
    return np.asarray(np.median(np.abs(edges - centre), axis=0) * MAD_TO_SIGMA, dtype=float)


class HourRange(NamedTuple):
    """A signal's normal range at one time of day, and how much its low and high edges moved from day to day."""

    low: float
    high: float
    below: float
    above: float

    def outside(self, value: float, least: float) -> float:
        """How many deviations `value` lies above the range (positive) or below it (negative); 0 inside. A deviation
        is the edge's or the value's LEVEL_SHARE, the signal's least, or the edge's day-to-day spread, the largest:
        a level within what the days themselves varied by is not far from them."""
        if self.low <= value <= self.high:
            return 0.0
        edge, spread = (self.high, self.above) if value > self.high else (self.low, self.below)
        return (value - edge) / max(
            LEVEL_SHARE * abs(edge), LEVEL_SHARE * abs(value), least, spread
        )


@dataclass(frozen=True)
class SignalJudgement:
    """One signal of one pass as judged: its value, the recent history's median and the robust z against it, the same
    hour's range (None while fewer than SAME_HOUR_MIN_DAYS days are known), and the score that counts."""

    value: float
    median: float
    recent: float
    band: HourRange | None
    score: float


@dataclass
class Pending:
    """An abnormal pass not yet part of an incident."""

    started_at: datetime
    ended_at: datetime
    rates: dict[str, float]
    z: dict[str, float]


@dataclass
class Detector:
    """One target's detector: its recent normal passes, the abnormal passes pending, its open incident."""

    target: str
    history: deque[dict[str, float]] = field(default_factory=lambda: deque(maxlen=HISTORY))
    pending: list[Pending] = field(default_factory=list)
    incident: Incident | None = None
    calm: int = 0
    recall: Recall | None = field(
        default=None, repr=False
    )  # the target's earlier days (None: the recent history alone)
    same_hour: SameHour | None = field(default=None, repr=False)
    onset: Pending | None = None  # the last pass, when it rose past Z_CLOSE without reaching Z_OPEN

    def carry(self, incident: Incident) -> None:
        """Carry on an incident another watcher left open (it stopped, or gave the target up while it was open): the
        passes from here extend it or, once CLOSE_AFTER of them are calm, close it, as if this detector had opened it."""
        self.incident = incident.model_copy(deep=True)
        self.pending.clear()
        self.onset = None
        self.calm = 0

    def judge(
        self, rates: dict[str, float], at: datetime | None = None
    ) -> dict[str, SignalJudgement]:
        """Each signal of a pass as the detector judges it: against the recent history and, where the same hour is known
        (at `at`), against its range; what an incident's opening, or a pass that opened none, is explained by."""
        ranges = self._ranges(at) if at is not None else None
        judged = {}
        for name, least in SIGNALS.items():
            value = rates.get(name, 0.0)
            past = np.array([h.get(name, 0.0) for h in self.history])
            recent = robust_z(np.array([value]), past, least) if len(past) else 0.0
            band = None if ranges is None else ranges[name]
            score = recent
            if band is not None:
                hour = band.outside(value, least)
                score = (
                    float(np.sign(recent)) * min(abs(recent), abs(hour))
                    if recent * hour > 0
                    else 0.0
                )
            centre = float(np.median(past)) if len(past) else 0.0
            judged[name] = SignalJudgement(
                value=value, median=centre, recent=recent, band=band, score=score
            )
        return judged

    def scores(self, rates: dict[str, float], at: datetime | None = None) -> dict[str, float]:
        """Each signal's score: its robust z against the recent history, kept only where the same hour agrees (at `at`)."""
        return {name: j.score for name, j in self.judge(rates, at).items()}

    def _ranges(self, at: datetime) -> dict[str, HourRange] | None:
        if self.recall is None:
            return None
        if self.same_hour is None or self.same_hour.hour != at.replace(
            minute=0, second=0, microsecond=0
        ):
            self.same_hour = SameHour.load(self.recall, at)
        return self.same_hour.ranges(at)

    def observe(
        self, ended_at: datetime, seconds: float, rates: dict[str, float]
    ) -> Incident | None:
        """Take one pass (its rates, its span); the incident it opened, extended or closed, which the caller stores."""
        if len(self.history) < MIN_HISTORY:
            self.history.append(rates)
            return None
        z = self.scores(rates, ended_at - timedelta(seconds=seconds / 2))
        limit = Z_CLOSE if self.incident is not None else Z_OPEN
        abnormal = {name: value for name, value in z.items() if abs(value) >= limit}
        started_at = ended_at - timedelta(seconds=seconds)
        if self.incident is not None:
            return self._during(ended_at, rates, abnormal)
        held, self.onset = self.onset, None
        if not abnormal:
            self.history.extend(
                p.rates for p in self.pending
            )  # a lone abnormal pass was noise: it is normal after all
            self.pending.clear()
            if held is not None:
                self.history.append(held.rates)
            rising = {name: value for name, value in z.items() if abs(value) >= Z_CLOSE}
            if rising:  # perhaps the partial first pass of an anomaly: the next pass tells
                self.onset = Pending(
                    started_at=started_at, ended_at=ended_at, rates=rates, z=rising
                )
            else:
                self.history.append(rates)
            return None
        if held is not None and not self.pending and _same_way(held.z, abnormal):
            self.pending.append(held)
        elif held is not None:
            self.history.append(held.rates)
        self.pending.append(
            Pending(started_at=started_at, ended_at=ended_at, rates=rates, z=abnormal)
        )
        if len(self.pending) < OPEN_AFTER:
            return None
        self.incident = Incident(
            target=self.target, started_at=self.pending[0].started_at, ended_at=ended_at
        )
        for p in self.pending:
            self._widen(p.rates, p.z)
        self.pending.clear()
        return self.incident

    def _during(
        self, ended_at: datetime, rates: dict[str, float], abnormal: dict[str, float]
    ) -> Incident | None:
        assert self.incident is not None
        if abnormal:
            self.calm = 0
            self.incident.ended_at = ended_at
            self._widen(rates, abnormal)
            return self.incident
        self.calm += 1
        if self.calm < CLOSE_AFTER:
            return None
        closed, self.incident, self.calm = (
            self.incident.model_copy(update={"closed": True}),
            None,
            0,
        )
        self.history.append(rates)
        return closed

    def _widen(self, rates: dict[str, float], z: dict[str, float]) -> None:
        """Fold one abnormal pass into the open incident's signals: the farthest value and score of each."""
        assert self.incident is not None
        known = {s.name: s for s in self.incident.signals}
        for name, score in z.items():
            seen = known.get(name)
            if seen is None or abs(score) > abs(seen.z):
                centre = float(np.median([h.get(name, 0.0) for h in self.history]))
                known[name] = IncidentSignal(
                    name=name, baseline_median=centre, peak=rates.get(name, 0.0), z=round(score, 1)
                )
        self.incident.signals = sorted(known.values(), key=lambda s: -abs(s.z))


def _same_way(onset: dict[str, float], abnormal: dict[str, float]) -> bool:
    """Whether a rising pass announced this abnormal one: a signal of both, moved the same way."""
    return any(name in onset and onset[name] * value > 0 for name, value in abnormal.items())
