"""Alertmanager's webhook payload, and the diagnoses a firing or resolved alert asks for.

A team whose Prometheus alerts through Alertmanager points a webhook receiver at `dbcrew server`;
each POST carries the payload modelled here (version "4", documented at
https://prometheus.io/docs/alerting/latest/configuration/#webhook_config). `diagnoses_of` maps it
and the targets inventory to the diagnoses to run, one per alert whose target it can tell:

- the target: the inventory entry named by the alert's `dbcrew_target` label; else the entry whose
  URL's host:port is the alert's `server` label (postgres_exporter 0.11 labels a server's series
  with it) or its `instance` label (a scrape target on the database's own host:port); when several
  entries share that host:port, the one whose database is the alert's `datname`. An alert matching
  no entry, or several, is skipped with the reason (the receiver logs it).
- the interval: from LEAD before `startsAt` (the anomaly began before the rule's `for:` let it fire)
  to `endsAt` for a resolved alert, to now for a firing one (Alertmanager sends a firing alert's
  `endsAt` as 0001-01-01 or a time to come); never in the future.
- the alert text: the alert's name and its summary (else description) annotation, one line. It is
  data for the diagnosis, never markup or instructions: a rule's annotations are templated from
  labels the monitored system controls.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Literal
from urllib.parse import urlsplit

from pydantic import AwareDatetime, BaseModel, Field

from dbcrew.inventory import Inventory, TargetEntry
from dbcrew.models.interval import PastInterval
from dbcrew.models.request import ReviewRequest
from dbcrew.models.target_run import TargetRun
from dbcrew.targets import parse_target
from dbcrew.vocabulary import Scenario

LEAD = timedelta(
    minutes=5
)  # before startsAt: the rule's `for:` and evaluation delay hide the anomaly's start
MIN_SPAN = timedelta(minutes=1)  # an interval shorter than this has too few samples to judge
ALERT_CHARS = 500
TARGET_LABEL = "dbcrew_target"


class AlertmanagerAlert(BaseModel):
    """One alert of a webhook payload."""

    status: Literal["firing", "resolved"]
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    startsAt: AwareDatetime  # noqa: N815 (Alertmanager's field names)
    endsAt: AwareDatetime | None = None  # noqa: N815
    generatorURL: str = ""  # noqa: N815
    fingerprint: str = ""

    def text(self) -> str:
        """The alert as one line of data: its name and summary (else description), whitespace collapsed, bounded."""
        about = self.annotations.get("summary") or self.annotations.get("description") or ""
        name = self.labels.get("alertname", "alert")
        line = re.sub(r"\s+", " ", f"{name}: {about}" if about else name).strip()
        return line[:ALERT_CHARS]


class AlertmanagerPayload(BaseModel):
    """The JSON Alertmanager POSTs to a webhook receiver (payload version 4)."""

    version: Literal["4"]
    status: Literal["firing", "resolved"]
    receiver: str = ""
    groupKey: str = ""  # noqa: N815
    truncatedAlerts: int = 0  # noqa: N815
    groupLabels: dict[str, str] = Field(default_factory=dict)  # noqa: N815
    commonLabels: dict[str, str] = Field(default_factory=dict)  # noqa: N815
    commonAnnotations: dict[str, str] = Field(default_factory=dict)  # noqa: N815
    externalURL: str = ""  # noqa: N815
    alerts: list[AlertmanagerAlert]


class AlertDiagnosis(BaseModel):
    """A diagnosis one alert asks for: the inventory entry, the interval, the alert's text, and the request to run."""

    target: str = Field(description="the inventory entry's name")
    interval: PastInterval
    alert: str
    request: ReviewRequest
    prometheus: str = Field(
        "", description="the Prometheus that fired it (its generatorURL's origin), if any"
    )


class SkippedAlert(BaseModel):
    alert: str
    reason: str


def _host_port(entry: TargetEntry) -> str:
    return parse_target(entry.url).address


def target_of(alert: AlertmanagerAlert, inventory: Inventory) -> TargetEntry | str:
    """The entry `alert` is about, or why none can be told (see the module's rules)."""
    labels = alert.labels
    if TARGET_LABEL in labels:
        named = [e for e in inventory.targets if e.name == labels[TARGET_LABEL]]
        return named[0] if named else f"no inventory target named {labels[TARGET_LABEL]!r}"
    for label in ("server", "instance"):
        if label not in labels:
            continue
        matches = [e for e in inventory.targets if _host_port(e) == labels[label]]
        if len(matches) > 1 and "datname" in labels:
            matches = [e for e in matches if parse_target(e.url).dbname == labels["datname"]]
        if len(matches) == 1:
            return matches[0]
        if matches:
            return f"{len(matches)} inventory targets are on {labels[label]}: label the rule with {TARGET_LABEL}"
    return f"no {TARGET_LABEL}, server or instance label matches an inventory target"


def interval_of(alert: AlertmanagerAlert, now: datetime) -> PastInterval:
    """LEAD before the alert started, to its end (resolved) or now (firing), at least MIN_SPAN long, never ahead of now."""
    end = alert.endsAt if alert.status == "resolved" and alert.endsAt is not None else now
    end = min(end, now)
    start = min(alert.startsAt - LEAD, end - MIN_SPAN)
    return PastInterval(start=start, end=end)


def diagnoses_of(
    payload: AlertmanagerPayload, inventory: Inventory, now: datetime | None = None
) -> tuple[list[AlertDiagnosis], list[SkippedAlert]]:
    """The diagnoses the payload's alerts ask for, and the alerts no inventory target could be told for."""
    moment = now or datetime.now(UTC)
    runs: list[AlertDiagnosis] = []
    skipped: list[SkippedAlert] = []
    for alert in payload.alerts:
        entry = target_of(alert, inventory)
        if isinstance(entry, str):
            skipped.append(SkippedAlert(alert=alert.text(), reason=entry))
            continue
        interval = interval_of(alert, moment)
        request = entry.request(
            TargetRun(
                target=entry.name, scenario=Scenario.DIAGNOSE, alert=alert.text(), interval=interval
            )
        )
        origin = urlsplit(alert.generatorURL)
        runs.append(
            AlertDiagnosis(
                target=entry.name,
                interval=interval,
                alert=alert.text(),
                request=request,
                prometheus=f"{origin.scheme}://{origin.netloc}"
                if origin.scheme in ("http", "https") and origin.netloc
                else "",
            )
        )
    return runs, skipped
