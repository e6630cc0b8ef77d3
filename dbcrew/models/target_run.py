"""A run of one named target of the published inventory: what the on-demand form, the fleet, the
schedules, the watcher and the Alertmanager receiver all ask for, in one typed value.

`review_target` (dbcrew/flows/targets.py) takes it as its one parameter, so Prefect's run form is
built from these fields and every caller starts a run the same way (dbcrew/flows/starting.py); the
inventory entry then turns it into the review request (`TargetEntry.request`), where an empty
override keeps the entry's own. It carries no secret: the target is a name, its URL and password
stay with the entry (the password on the reviewing machine), its alert URLs too.
"""

from __future__ import annotations

from typing import Self

from pydantic import BaseModel, Field, model_validator

from dbcrew.models.incident import RunIncident
from dbcrew.models.interval import PastInterval
from dbcrew.models.prometheus import PrometheusSource
from dbcrew.vocabulary import BrainName, Scenario


class TargetRun(BaseModel):
    """Review (or diagnose) one target of the inventory, by name, with this run's overrides."""

    target: str = Field(description="the target's name in the inventory")
    scenario: Scenario | None = Field(
        None,
        description="health: the periodic review; diagnose: root causes of an anomaly happening now."
        " Empty: the inventory's",
    )
    brain: BrainName = Field(
        "rules",
        description="rules: offline and deterministic; openai: the OpenAI-compatible endpoint the worker"
        " is configured for",
    )
    window: float | None = Field(
        None, ge=1, description="seconds to sample activity and counters. Empty: the inventory's"
    )
    alert: str = Field(
        "",
        description="diagnose: the alert text that started it, e.g. 'checkout 3x slower since 14:00'",
    )
    interval: PastInterval | None = Field(
        None,
        description="diagnose a past interval from the watcher's samples (an incident, an alert) instead"
        " of a live window",
    )
    prometheus: PrometheusSource | None = Field(
        None,
        description="with interval: read the interval from this Prometheus instead of the watcher's store",
    )
    incident: RunIncident | None = Field(
        None,
        description="with interval: the watcher's incident it diagnoses (which keeps the causes and this"
        " run's link) and the signals it found abnormal",
    )

    @model_validator(mode="after")
    def _interval_first(self) -> Self:
        if self.incident is not None and self.interval is None:
            raise ValueError("an incident's diagnosis needs its interval")
        if self.prometheus is not None and self.interval is None:
            raise ValueError("Prometheus is read for a past interval: give the interval too")
        return self
