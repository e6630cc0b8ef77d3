"""The watcher's samples in the shared store: one row per sampling pass of a target, its gaps, its statement texts.

Same backends as the rest of the store (backends.py: a DuckDB file by default, PostgreSQL when
`DBCREW_STORE_URL` names one), same dialect subset, its own tables. A pass's evidence (per-second
rates, the session tally, statements, tables) is a JSON body the store does not interpret: its
model lives with the sampler (dbcrew/operators/window/passes.py), which also merges passes when the
watcher downsamples them. Incidents (the watcher's detections) are kept with their abnormal
signals, and each with its diagnosis (incident_diagnoses.py). The store keys a pass by target identity, resolution (0 for a raw pass,
else the seconds of the bucket it summarises) and the time its span ended, and keeps query texts
once per target (a pass names them by digest): the texts are most of a pass's bytes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from dbcrew.models.incident import IncidentRef, IncidentSignal, RunIncident
from dbcrew.store import open_backend
from dbcrew.store.backends import Backend, Session, create_tables, utc
from dbcrew.store.incident_diagnoses import SCHEMA as DIAGNOSES_SCHEMA
from dbcrew.store.incident_diagnoses import IncidentDiagnosis, current

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS watch_passes (
        target TEXT NOT NULL, resolution INTEGER NOT NULL, ended_at TIMESTAMPTZ NOT NULL, seconds DOUBLE PRECISION NOT NULL,
        body TEXT NOT NULL, PRIMARY KEY (target, resolution, ended_at))""",
    """CREATE TABLE IF NOT EXISTS watch_gaps (
        target TEXT NOT NULL, started_at TIMESTAMPTZ NOT NULL, ended_at TIMESTAMPTZ NOT NULL, reason TEXT NOT NULL,
        PRIMARY KEY (target, started_at))""",
    """CREATE TABLE IF NOT EXISTS watch_texts (
        target TEXT NOT NULL, digest TEXT NOT NULL, query TEXT NOT NULL, PRIMARY KEY (target, digest))""",
    """CREATE TABLE IF NOT EXISTS watch_incidents (
        target TEXT NOT NULL, started_at TIMESTAMPTZ NOT NULL, ended_at TIMESTAMPTZ NOT NULL, closed BOOLEAN NOT NULL,
        signals TEXT NOT NULL, PRIMARY KEY (target, started_at))""",
    """CREATE TABLE IF NOT EXISTS watch_targets (
        target TEXT PRIMARY KEY, display TEXT NOT NULL, facts TEXT NOT NULL, updated_at TIMESTAMPTZ NOT NULL)""",
    DIAGNOSES_SCHEMA,
)


class StoredPass(BaseModel):
    """One pass (resolution 0) or one bucket of merged passes: its span ended at `at` and covered `seconds`."""

    target: str
    resolution: int = Field(
        0, description="0: a raw pass; else the seconds of the bucket it summarises"
    )
    at: datetime
    seconds: float
    body: str = Field(
        description="the pass's evidence as JSON (dbcrew/operators/window/passes.py PassBody)"
    )


class Gap(BaseModel):
    """A stretch in which the watcher could not sample the target: from its last pass to its next one."""

    target: str
    started_at: datetime
    ended_at: datetime
    reason: str


class Incident(BaseModel):
    """A stretch in which the target left its own recent behaviour (dbcrew/roles/watching.py: detected as it happens)."""

    target: str
    started_at: datetime
    ended_at: datetime = Field(description="the end of its last abnormal pass (so far, while open)")
    closed: bool = False
    signals: list[IncidentSignal] = Field(default_factory=list, description="strongest first")
    diagnoses: list[IncidentDiagnosis] = Field(
        default_factory=list,
        description="its diagnoses, oldest first: as it stood while open (a long one), and at its close",
    )

    @property
    def diagnosis(self) -> IncidentDiagnosis | None:
        """The incident's diagnosis: its close's when there is one, else the latest; None when not diagnosed."""
        return current(self.diagnoses)

    def ref(self) -> IncidentRef:
        """This incident as a diagnosis names it: diagnosed now, while open or at its close."""
        return IncidentRef(
            target=self.target, started_at=self.started_at, while_open=not self.closed
        )

    def for_run(self) -> RunIncident:
        """This incident as the diagnosis run it starts names it: its reference and its signals, strongest first."""
        return RunIncident(**self.ref().model_dump(), signals=self.signals)


class WatchedTarget(BaseModel):
    """What the watcher knows of a target between passes: its password-free display and its facts (JSON)."""

    target: str
    display: str
    facts: str = Field(
        description="settings, cores, memory and version as JSON (dbcrew/operators/window/passes.py TargetFacts)"
    )
    updated_at: datetime


class SampleStore:
    """The watcher's tables on one store backend; every method is one short transaction."""

    def __init__(self, backend: Backend):
        self.backend = backend
        create_tables(backend, SCHEMA)

    @property
    def location(self) -> str:
        return self.backend.location

    def record(
        self,
        passes: Iterable[StoredPass],
        gaps: Iterable[Gap] = (),
        texts: dict[tuple[str, str], str] | None = None,
        targets: Iterable[WatchedTarget] = (),
        incidents: Iterable[Incident] = (),
        also: Callable[[Session], None] | None = None,
    ) -> None:
        """Keep one sampling round: its passes, the gaps and incidents opened, extended or closed, new texts, changed
        target facts; and whatever `also` writes of the round (a shared watcher's tenures), in the same transaction."""
        with self.backend.session() as session:
            if also is not None:
                also(session)
            for p in passes:
                session.run(
                    "DELETE FROM watch_passes WHERE target = ? AND resolution = ? AND ended_at = ?",
                    [p.target, p.resolution, p.at],
                )
                session.run(
                    "INSERT INTO watch_passes VALUES (?, ?, ?, ?, ?)",
                    [p.target, p.resolution, p.at, p.seconds, p.body],
                )
            for g in gaps:
                session.run(
                    "DELETE FROM watch_gaps WHERE target = ? AND started_at = ?",
                    [g.target, g.started_at],
                )
                session.run(
                    "INSERT INTO watch_gaps VALUES (?, ?, ?, ?)",
                    [g.target, g.started_at, g.ended_at, g.reason],
                )
            for (target, digest), query in (texts or {}).items():
                session.run(
                    "INSERT INTO watch_texts VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                    [target, digest, query],
                )
            for i in incidents:
                session.run(
                    "DELETE FROM watch_incidents WHERE target = ? AND started_at = ?",
                    [i.target, i.started_at],
                )
                session.run(
                    "INSERT INTO watch_incidents VALUES (?, ?, ?, ?, ?)",
                    [
                        i.target,
                        i.started_at,
                        i.ended_at,
                        i.closed,
                        json.dumps([s.model_dump() for s in i.signals]),
                    ],
                )
            for t in targets:
                session.run("DELETE FROM watch_targets WHERE target = ?", [t.target])
                session.run(
                    "INSERT INTO watch_targets VALUES (?, ?, ?, ?)",
                    [t.target, t.display, t.facts, t.updated_at],
                )

    def passes(
        self, target: str, resolution: int, after: datetime, until: datetime
    ) -> list[StoredPass]:
        """The target's passes at `resolution` whose span ended in (after, until], oldest first."""
        with self.backend.session() as session:
            rows = session.run(
                "SELECT target, resolution, ended_at, seconds, body FROM watch_passes WHERE target = ? AND resolution = ?"
                " AND ended_at > ? AND ended_at <= ? ORDER BY ended_at",
                [target, resolution, after, until],
            )
        return [
            StoredPass(target=r[0], resolution=r[1], at=utc(r[2]), seconds=r[3], body=r[4])
            for r in rows
        ]

    def latest(self, target: str, resolution: int) -> datetime | None:
        """When the target's latest pass at `resolution` ended, or None."""
        return self._bound("max", target, resolution)

    def earliest(self, target: str, resolution: int) -> datetime | None:
        """When the target's earliest pass at `resolution` ended, or None."""
        return self._bound("min", target, resolution)

    def _bound(self, which: Literal["min", "max"], target: str, resolution: int) -> datetime | None:
        with self.backend.session() as session:
            rows = session.run(
                f"SELECT {which}(ended_at) FROM watch_passes WHERE target = ? AND resolution = ?",
                [target, resolution],
            )
        return utc(rows[0][0]) if rows and rows[0][0] is not None else None

    def resolutions(self, target: str) -> list[int]:
        """The resolutions the store holds passes of the target at, finest first."""
        with self.backend.session() as session:
            rows = session.run(
                "SELECT DISTINCT resolution FROM watch_passes WHERE target = ? ORDER BY resolution",
                [target],
            )
        return [int(r[0]) for r in rows]

    def gaps(self, target: str, after: datetime, until: datetime) -> list[Gap]:
        """The target's gaps that overlap (after, until], oldest first."""
        with self.backend.session() as session:
            rows = session.run(
                "SELECT target, started_at, ended_at, reason FROM watch_gaps WHERE target = ? AND ended_at > ?"
                " AND started_at <= ? ORDER BY started_at",
                [target, after, until],
            )
        return [
            Gap(target=r[0], started_at=utc(r[1]), ended_at=utc(r[2]), reason=r[3]) for r in rows
        ]

    def incidents(self, target: str, since: datetime) -> list[Incident]:
        """The target's incidents that ended after `since`, oldest first."""
        with self.backend.session() as session:
            rows = session.run(
                "SELECT target, started_at, ended_at, closed, signals FROM watch_incidents WHERE target = ?"
                " AND ended_at > ? ORDER BY started_at",
                [target, since],
            )
            diagnosed = session.run(
                "SELECT d.started_at, d.body FROM watch_diagnoses d JOIN watch_incidents i"
                " ON i.target = d.target AND i.started_at = d.started_at"
                " WHERE d.target = ? AND i.ended_at > ? ORDER BY d.diagnosed_at",
                [target, since],
            )
        diagnoses: dict[datetime, list[IncidentDiagnosis]] = {}
        for started_at, body in diagnosed:
            diagnoses.setdefault(utc(started_at), []).append(
                IncidentDiagnosis.model_validate_json(body)
            )
        return [
            Incident(
                target=r[0],
                started_at=utc(r[1]),
                ended_at=utc(r[2]),
                closed=r[3],
                signals=[IncidentSignal.model_validate(s) for s in json.loads(r[4])],
                diagnoses=diagnoses.get(utc(r[1]), []),
            )
            for r in rows
        ]

    def record_diagnosis(self, incident: IncidentRef, diagnosis: IncidentDiagnosis) -> None:
        """Keep a diagnosis with its incident, in one transaction: a later one of the same kind (while open, at
        the close) replaces it; the close's joins the one made while open."""
        with self.backend.session() as session:
            session.run(
                "DELETE FROM watch_diagnoses WHERE target = ? AND started_at = ? AND while_open = ?",
                [incident.target, incident.started_at, incident.while_open],
            )
            session.run(
                "INSERT INTO watch_diagnoses VALUES (?, ?, ?, ?, ?)",
                [
                    incident.target,
                    incident.started_at,
                    incident.while_open,
                    diagnosis.diagnosed_at,
                    diagnosis.model_dump_json(),
                ],
            )

    def texts(self, target: str, digests: Iterable[str]) -> dict[str, str]:
        """Query texts by digest (those the store has)."""
        wanted = sorted(set(digests))
        if not wanted:
            return {}
        with self.backend.session() as session:
            rows = session.run(
                f"SELECT digest, query FROM watch_texts WHERE target = ? AND digest IN ({', '.join('?' for _ in wanted)})",
                [target, *wanted],
            )
        return {str(digest): str(query) for digest, query in rows}

    def watched(self, target: str) -> WatchedTarget | None:
        with self.backend.session() as session:
            rows = session.run(
                "SELECT target, display, facts, updated_at FROM watch_targets WHERE target = ?",
                [target],
            )
        if not rows:
            return None
        return WatchedTarget(
            target=rows[0][0], display=rows[0][1], facts=rows[0][2], updated_at=utc(rows[0][3])
        )

    def identity_of(self, display: str) -> str | None:
        """The identity last recorded for a display (a target that does not answer cannot be asked for it)."""
        with self.backend.session() as session:
            rows = session.run(
                "SELECT target FROM watch_targets WHERE display = ? ORDER BY updated_at DESC LIMIT 1",
                [display],
            )
        return rows[0][0] if rows else None

    def last_watched(self, displays: Iterable[str]) -> dict[str, tuple[str, datetime | None]]:
        """For each display the store knows: its identity (as `identity_of`) and when its latest raw pass ended (as
        `latest`), in one transaction for them all (a watcher taking over hundreds of targets at once)."""
        wanted = sorted(set(displays))
        if not wanted:
            return {}
        marks = ", ".join("?" for _ in wanted)
        with self.backend.session() as session:
            known = session.run(
                f"SELECT display, target FROM watch_targets WHERE display IN ({marks}) ORDER BY updated_at",
                wanted,
            )
            identity = {str(d): str(t) for d, t in known}  # the latest row of each display wins
            targets = sorted(set(identity.values()))
            ends = (
                session.run(
                    "SELECT target, max(ended_at) FROM watch_passes WHERE resolution = 0 AND target IN"
                    f" ({', '.join('?' for _ in targets)}) GROUP BY target",
                    targets,
                )
                if targets
                else []
            )
        latest = {str(t): utc(at) for t, at in ends if at is not None}
        return {d: (t, latest.get(t)) for d, t in identity.items()}

    def replace(
        self,
        target: str,
        resolution: int,
        after: datetime,
        until: datetime,
        merged: Iterable[StoredPass],
    ) -> None:
        """Put `merged` (rollups) in place of whatever the target had at `resolution` in (after, until], in one transaction."""
        with self.backend.session() as session:
            session.run(
                "DELETE FROM watch_passes WHERE target = ? AND resolution = ? AND ended_at > ? AND ended_at <= ?",
                [target, resolution, after, until],
            )
            for p in merged:
                session.run(
                    "INSERT INTO watch_passes VALUES (?, ?, ?, ?, ?)",
                    [p.target, p.resolution, p.at, p.seconds, p.body],
                )

    def prune(self, target: str, resolution: int, before: datetime) -> None:
        """Drop the target's passes at `resolution` that ended before `before`."""
        with self.backend.session() as session:
            session.run(
                "DELETE FROM watch_passes WHERE target = ? AND resolution = ? AND ended_at < ?",
                [target, resolution, before],
            )

    def prune_gaps(self, target: str, before: datetime) -> None:
        with self.backend.session() as session:
            session.run(
                "DELETE FROM watch_gaps WHERE target = ? AND ended_at < ?", [target, before]
            )


def open_samples(url: str | None = None) -> SampleStore:
    """The sample tables of the store at `url` (default: the store the environment names), created if missing."""
    return SampleStore(open_backend(url))
