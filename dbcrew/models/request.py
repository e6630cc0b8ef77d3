"""The one review request: every way into a review (the CLI, MCP, a deployment's run form, the fleet,
an analysis question to `ask`) builds a `ReviewRequest`, and `health_review` takes it.

Its options are declared here once. How the run samples and judges (window, thresholds, ablations,
the alert and baseline of a diagnosis) is the run's `Settings`, nested whole, so a new option is one
field in one place. The target is a password-free URL in every serialized form (a flow parameter on
the Prefect server, the UI's form); in process it is the parsed `PostgresTarget`, whose password is a
private attribute that no dump carries.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Self

from pydantic import (
    BaseModel,
    BeforeValidator,
    Field,
    PlainSerializer,
    WithJsonSchema,
    model_validator,
)

from dbcrew.models.faults import FaultSpec
from dbcrew.models.incident import IncidentSignal
from dbcrew.models.interval import PastInterval
from dbcrew.models.prometheus import PrometheusSource
from dbcrew.settings.run import Settings
from dbcrew.targets import PostgresTarget, parse_target
from dbcrew.vocabulary import BrainName, Scenario

TARGET_HELP = (
    "postgresql://user@host:port/dbname (or ?host=/socket/dir), without a password: it comes from the"
    " worker's PGPASSWORD or ~/.pgpass, or use target_secret"
)


def _parsed(value: object) -> object:
    """A URL becomes a parsed target (TargetError, one line, on a bad one); a parsed target stays itself."""
    return parse_target(value) if isinstance(value, str) else value


TargetURL = Annotated[
    PostgresTarget,
    BeforeValidator(_parsed),
    PlainSerializer(lambda target: target.url, return_type=str),
    WithJsonSchema({"type": "string", "title": "Target", "description": TARGET_HELP}),
]


class ReviewRequest(BaseModel):
    """One review or diagnosis of one database, whatever started it."""

    target: TargetURL | None = Field(None, description=TARGET_HELP)
    target_secret: str | None = Field(
        None,
        description="instead of target: the name of a Prefect Secret block holding the target's URL, password included",
    )
    scenario: Scenario = Field(
        Scenario.HEALTH,
        description="health: the periodic review; diagnose: root causes of a performance anomaly",
    )
    brain: BrainName = Field(
        "rules",
        description="rules: offline and deterministic; openai: the OpenAI-compatible endpoint the worker is configured for",
    )
    settings: Settings = Field(
        default_factory=Settings,
        description="how the run samples and judges: window, thresholds, recovery switches, a diagnosis's alert and baseline",
    )
    interval: PastInterval | None = Field(
        None,
        description="diagnose only: a past interval, diagnosed from the samples `dbcrew watch` stored instead of a live window",
    )
    prometheus: PrometheusSource | None = Field(
        None,
        description="with interval only: read the past interval from this Prometheus (postgres_exporter, node_exporter)"
        " instead of the watcher's store",
    )
    signals: list[IncidentSignal] = Field(
        default_factory=list,
        description="diagnose only: what the watcher's incident that started it found abnormal, strongest first"
        " (the composed team judges them)",
    )
    faults: list[FaultSpec] = Field(
        default_factory=list, description="lab: faults injected into operators, to test recovery"
    )
    out: Path | None = Field(
        None,
        description="folder for report.json/md/html and charts; empty: DBCREW_REPORTS_DIR/<run id>",
    )

    @model_validator(mode="after")
    def _one_target(self) -> Self:
        if (self.target is None) == (self.target_secret is None):
            raise ValueError("give either target or target_secret")
        if self.interval is not None and self.scenario is not Scenario.DIAGNOSE:
            raise ValueError("a past interval is diagnosed: it needs the diagnose scenario")
        if self.prometheus is not None and self.interval is None:
            raise ValueError("Prometheus is read for a past interval: give the interval too")
        if self.signals and self.scenario is not Scenario.DIAGNOSE:
            raise ValueError("an incident's signals are diagnosed: they need the diagnose scenario")
        return self
