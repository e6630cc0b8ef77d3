"""A watcher's incident as a run names it: which one it is, and the signals it found abnormal.

The watcher detects incidents (dbcrew/operators/window/incidents.py) and stores them with their
signals (dbcrew/store/samples.py); a diagnosis of one is started with its reference (so its causes
are kept with it) and its signals typed, so the planner composes the team from the metrics the
incident already named instead of reading them back out of the alert's text.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

# An incident's strongest signals that its alert names and its diagnosis's team is composed from
# (an incident is about one problem: its weaker signals are mostly that problem's echoes).
STRONGEST_SIGNALS = 4


class IncidentSignal(BaseModel):
    """A signal an incident found abnormal: the target's usual level, the farthest it went, how far in robust units."""

    name: str = Field(description="the watcher's metric, e.g. act.wait_lock or host.cpu_busy")
    baseline_median: float
    peak: float
    z: float


class IncidentRef(BaseModel):
    """Which incident a diagnosis is of, and whether it was still open then (a flow parameter: no secret in it)."""

    target: str = Field(
        description="the target's identity in the store (system identifier/database)"
    )
    started_at: datetime
    while_open: bool = False


class RunIncident(IncidentRef):
    """The incident that started a run: which one (its diagnosis is kept with it) and what it found abnormal."""

    signals: list[IncidentSignal] = Field(
        default_factory=list,
        description="what it found abnormal, strongest first (the diagnosis's team is composed from them)",
    )
