"""Incidents: each pass of a target against the target's own recent passes, robust z-scores with hysteresis.

A signal (active and waiting sessions, commit and rollback rates, tuple rates, temp bytes, WAL,
reads, the server's CPU and private memory, sessions waiting on I/O, the statements' execution time) is abnormal in a pass when its value lies at least Z_OPEN robust standard
deviations from the median of the target's last HISTORY passes (the MAD scaled to a standard
deviation, never under the signal's LEAST deviation: one session, ten commits a second, so a flat
history does not turn one stray session into an anomaly). Hysteresis: an incident opens after
OPEN_AFTER consecutive abnormal passes (one noisy pass is not an incident) and closes after
CLOSE_AFTER consecutive passes with every signal back under Z_CLOSE. Passes inside an incident
never join the history, so a long incident does not become the target's normal.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np

from dbcrew.store.samples import Incident, IncidentSignal
from operators.diagnose.anomaly import robust_z

# Each signal, with the smallest deviation that counts as one standard deviation (its unit's noise). CPU is the
# server's own processes' (pg.cpu_cores, a local target's) and I/O its sessions waiting on it and its reads: the host's
# busy and iowait shares move with whatever else the host runs (on a shared CI host, busy swung from 20 % to 96 %
# between two quiet passes, and iowait kept an incident open after its anomaly ended). A fifth of a core: on an idle
# server, one session kept on the CPU is 5 deviations (measured: a range join's session took 0.57-0.98 of a core
# over 1 s passes, against 0-0.02 quiet), an autovacuum worker's half core 2.5.
SIGNALS: dict[str, float] = {
    "act.active": 1.0,
    "act.on_cpu": 1.0,
    "act.wait_lock": 1.0,
    "act.wait_io": 1.0,
    "act.wait_lwlock": 1.0,
    "act.wait_wal_flush": 1.0,
    "act.idle_in_xact": 1.0,
    "db.xact_commit": 50.0,
    "db.xact_rollback": 10.0,
    "db.tup_inserted": 5_000.0,
    "db.tup_updated": 2_000.0,
    "db.tup_deleted": 2_000.0,
    "db.tup_fetched": 50_000.0,
    "db.tup_returned": 100_000.0,
    "db.temp_bytes": 10 * 2**20,
    "wal.wal_bytes": 5 * 2**20,
    "db.blks_read": 1_000.0,
    "pg.cpu_cores": 0.2,
    "pg.private_mem_gb": 0.25,
    "stmt.exec_time": 250.0,  # ms of statements per second: a quarter of a session kept busy
}
Z_OPEN = 4.0
Z_CLOSE = 2.0
OPEN_AFTER = 2
CLOSE_AFTER = 3
HISTORY = 240  # passes: an hour at 15 s
MIN_HISTORY = 5  # fewer passes say nothing of what is normal


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

    def scores(self, rates: dict[str, float]) -> dict[str, float]:
        return {
            name: robust_z(
                np.array([rates.get(name, 0.0)]),
                np.array([h.get(name, 0.0) for h in self.history]),
                least,
            )
            for name, least in SIGNALS.items()
        }

    def observe(
        self, ended_at: datetime, seconds: float, rates: dict[str, float]
    ) -> Incident | None:
        """Take one pass (its rates, its span); the incident it opened, extended or closed, which the caller stores."""
        if len(self.history) < MIN_HISTORY:
            self.history.append(rates)
            return None
        z = self.scores(rates)
        limit = Z_CLOSE if self.incident is not None else Z_OPEN
        abnormal = {name: value for name, value in z.items() if abs(value) >= limit}
        started_at = ended_at - timedelta(seconds=seconds)
        if self.incident is not None:
            return self._during(ended_at, rates, abnormal)
        if not abnormal:
            self.history.extend(
                p.rates for p in self.pending
            )  # a lone abnormal pass was noise: it is normal after all
            self.pending.clear()
            self.history.append(rates)
            return None
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
