"""Each incident's diagnosis in the store: its root causes, where its report is, when it was diagnosed.

An incident the watcher detected is diagnosed once it closes (and a long one also as it stands,
while still open): by the foreground watcher in a background thread (dbcrew/roles/incident_diagnosis.py),
or by `dbcrew server`'s review run of its interval (dbcrew/flows/targets.py). What the diagnosis found is
kept with the incident, so `dbcrew incidents` answers "what happened at 03:12?" with causes, not
z-scores.

A table of its own beside `watch_incidents`, keyed by the incident (target, start) and whether it
was diagnosed while open: the watcher rewrites an open incident's row every round it grows, which
would drop a diagnosis kept in it, and a store written before diagnoses existed gains the table
when it is next opened (`CREATE TABLE IF NOT EXISTS`, on either backend) with its incidents listed
as not diagnosed. The diagnosis itself is a JSON body the store does not interpret, so what it
holds can grow without another change of schema.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, Field

from dbcrew.models.report import Report

SCHEMA = """CREATE TABLE IF NOT EXISTS watch_diagnoses (
        target TEXT NOT NULL, started_at TIMESTAMPTZ NOT NULL, while_open BOOLEAN NOT NULL,
        diagnosed_at TIMESTAMPTZ NOT NULL, body TEXT NOT NULL, PRIMARY KEY (target, started_at, while_open))"""

# The cross review writes one finding per root cause, with the objects the cause was found on.
CAUSE_FINDINGS_SOURCE = "cross_review_causes"


class IncidentCause(BaseModel):
    """One root cause of an incident, as its diagnosis's report ranks them."""

    code: str
    object: str = Field(
        "", description="what it was found on (tables, statements); empty: the database"
    )
    confidence: float
    share: float | None = Field(
        None,
        description="share of the interval's active session time it explains; None where not measured so",
    )

    def describe(self) -> str:
        share = "" if self.share is None else f", {self.share:.0%} of the active time"
        where = f" on {self.object}" if self.object and self.object != "database" else ""
        return f"{self.code}{where} (confidence {self.confidence:.2f}{share})"


class IncidentDiagnosis(BaseModel):
    """What one diagnosis of an incident's interval found, and where to read it."""

    diagnosed_at: datetime = Field(description="when the diagnosis finished")
    while_open: bool = Field(
        description="the incident was still open: diagnosed as it stood up to `interval_end`"
    )
    interval_end: datetime = Field(
        description="the end of the interval diagnosed (from the incident's start)"
    )
    causes: list[IncidentCause] = Field(
        default_factory=list,
        description="ranked as the report ranks them; empty: none rose above the reporting confidence",
    )
    run_id: str = ""
    report: str = Field(
        "", description="the report.json's path on the machine that ran the diagnosis"
    )
    link: str = Field("", description="the run's page in the Prefect UI, when a server ran it")
    partial: str = Field("", description="why the diagnosis stopped short; empty when it did not")

    @classmethod
    def of_report(
        cls, report: Report, report_path: Path | None, while_open: bool
    ) -> IncidentDiagnosis:
        """The diagnosis a finished report holds: its root causes with the objects the cross review named."""
        objects = {f.code: f.object for f in report.findings if f.source == CAUSE_FINDINGS_SOURCE}
        assert report.interval is not None, "an incident's diagnosis is of a past interval"
        return cls(
            diagnosed_at=report.finished_at,
            while_open=while_open,
            interval_end=report.interval.end,
            causes=[
                IncidentCause(
                    code=str(rc.code),
                    object=objects.get(rc.code, ""),
                    confidence=rc.confidence,
                    share=rc.time_share,
                )
                for rc in report.root_causes
            ],
            run_id=report.run_id,
            report=str(report_path) if report_path is not None else "",
            link=report.link,
            partial=report.partial,
        )

    def where(self) -> str:
        """Where to read it: the run's link, else the report's path."""
        return self.link or self.report

    def describe(self) -> str:
        """One line for `dbcrew incidents`, the watch artifact and the log; a diagnosis cut short says so, and
        without causes never reads as one that found nothing."""
        found = "; ".join(c.describe() for c in self.causes)
        if self.partial:
            causes = f"{found or 'no root cause found'} before it was cut short: {self.partial}"
        else:
            causes = found or "no root cause rose above the reporting confidence"
        stood = f" (as it stood at {self.interval_end:%H:%M:%S})" if self.while_open else ""
        return f"{causes}{stood}"


def current(diagnoses: list[IncidentDiagnosis]) -> IncidentDiagnosis | None:
    """The incident's diagnosis: the one of its close when there is one (it saw the whole incident), else the latest."""
    closed = [d for d in diagnoses if not d.while_open]
    chosen = closed or diagnoses
    return max(chosen, key=lambda d: d.diagnosed_at) if chosen else None
