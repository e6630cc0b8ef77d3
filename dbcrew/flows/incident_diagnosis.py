"""A server's incident diagnosis, kept with its incident and shown in the UI.

`dbcrew watch` in the foreground diagnoses its incidents itself (dbcrew/roles/incident_diagnosis.py);
`dbcrew server`'s watching starts a review_target run per incident instead. That run keeps what it
found with the incident when it finishes and posts the incident (its causes, its picture) as an
artifact (`keep_with_incident`), beside the alert it sends from the same report; the watching run's
health artifact reads the kept diagnoses back (`DiagnosisBoard`).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from prefect import get_run_logger
from prefect.artifacts import create_markdown_artifact

from dbcrew.flows.artifacts import artifact_key
from dbcrew.models import Report
from dbcrew.models.incident import IncidentRef
from dbcrew.operators.diagnose.incident_chart import CHART as INCIDENT_CHART
from dbcrew.roles.crew.context import RunContext
from dbcrew.roles.incident_diagnosis import LONG_INCIDENT
from dbcrew.roles.report.markdown import md_cell, md_text
from dbcrew.roles.report.reporter import inline_charts, report_path
from dbcrew.store import StoreUnavailable
from dbcrew.store.incident_diagnoses import IncidentDiagnosis
from dbcrew.store.samples import Incident, SampleStore, open_samples


def keep_with_incident(run: RunContext, report: Report, incident: IncidentRef) -> None:
    """A server's diagnosis run, finished: its causes, its report's path and its link kept with the incident it
    diagnosed, and the incident posted as an artifact of the run (when, its causes, its picture). A store that
    cannot be used costs the incident its kept diagnosis, not the run: logged, the artifact and the alert stand."""
    diagnosis = IncidentDiagnosis.of_report(
        report, report_path(run.out_dir).resolve(), while_open=incident.while_open
    )
    try:
        open_samples().record_diagnosis(incident, diagnosis)
    except StoreUnavailable as exc:
        get_run_logger().error("the diagnosis was not kept with its incident: %s", exc)
    post_incident(run, report, incident, diagnosis)


def post_incident(
    run: RunContext, report: Report, incident: IncidentRef, diagnosis: IncidentDiagnosis
) -> None:
    """The incident as the UI shows it: its interval, its root causes (a table: objects are the database's
    names, data), and its picture inline when the run drew one."""
    lines = [
        f"# Incident on {md_text(report.target.display)}",
        "",
        f"From {incident.started_at:%Y-%m-%d %H:%M:%S} to {diagnosis.interval_end:%H:%M:%S} UTC"
        + (" (diagnosed as it stood: the incident was still open)" if incident.while_open else "")
        + ".",
        "",
    ]
    if diagnosis.causes:
        lines += [
            "| root cause | on | confidence | share of the active time |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {c.code} | {md_cell(c.object or 'database')} | {c.confidence:.2f} |"
            f" {'' if c.share is None else f'{c.share:.0%}'} |"
            for c in diagnosis.causes
        ]
    else:
        lines.append("No root cause rose above the reporting confidence.")
    if INCIDENT_CHART in report.charts:
        caption = md_text(report.captions.get(INCIDENT_CHART, ""))
        picture = inline_charts(report.model_copy(update={"charts": [INCIDENT_CHART]}), run.out_dir)
        lines += ["", f"![the incident's signals]({picture[INCIDENT_CHART]})", "", f"*{caption}*"]
    create_markdown_artifact(
        "\n".join(lines),
        key=artifact_key(run, "incident"),
        description="the watcher's incident: its causes and its picture",
    )


class DiagnosisBoard:
    """The diagnosis of each target's last incident, as the watching run's health artifact shows it.

    The diagnosis runs keep their findings in the store, not in the watching run: the board reads them
    there while an incident's diagnosis is awaited (a closed one's, or a long one's as it stands; for
    at most AWAITED after its end), at most every `every` seconds: the artifact shows the causes
    soon after the run finishes, without a store query every round.
    """

    AWAITED = timedelta(minutes=30)

    def __init__(self, diagnosing: Iterable[str], every: float):
        self.diagnosing = set(diagnosing)  # entry names whose incidents are diagnosed
        self.every = every
        self._store: SampleStore | None = None
        self._known: dict[str, Incident] = {}  # entry name -> its last incident, as stored
        self._read_at = 0.0

    def refresh(self, incidents: dict[str, Incident], now: datetime) -> bool:
        """Read the awaited diagnoses when due; whether one arrived."""
        awaited = {
            name: incident
            for name, incident in incidents.items()
            if name in self.diagnosing
            and (incident.closed or now - incident.started_at >= LONG_INCIDENT)
            and now - incident.ended_at < self.AWAITED
            and not self._settled(name, incident)
        }
        if not awaited or now.timestamp() - self._read_at < self.every:
            return False
        return self.read(awaited, now)

    def read(self, incidents: dict[str, Incident], now: datetime) -> bool:
        """The stored diagnoses of `incidents` (by entry name); whether any was new."""
        self._read_at = now.timestamp()
        if self._store is None:
            self._store = open_samples()
        changed = False
        for name, incident in incidents.items():
            stored = next(
                (
                    i
                    for i in self._store.incidents(
                        incident.target, incident.ended_at - timedelta(seconds=1)
                    )
                    if i.started_at == incident.started_at
                ),
                None,
            )
            if stored is not None and stored.diagnosis != self.diagnosis(name, incident):
                self._known[name] = stored
                changed = True
        return changed

    def _settled(self, name: str, incident: Incident) -> bool:
        """The diagnosis its state calls for is known: one as it stood while open, the close's once closed."""
        known = self.diagnosis(name, incident)
        return known is not None and (not incident.closed or not known.while_open)

    def diagnosis(self, name: str, incident: Incident) -> IncidentDiagnosis | None:
        known = self._known.get(name)
        return (
            known.diagnosis
            if known is not None and known.started_at == incident.started_at
            else None
        )

    def columns(self, name: str, incident: Incident | None) -> dict[str, str]:
        """The artifact's columns for an entry's last incident: its root causes and where its report is."""
        if incident is None:
            return {"root causes": "", "report": ""}
        diagnosis = self.diagnosis(name, incident)
        if diagnosis is None:
            state = "diagnosing" if name in self.diagnosing and incident.closed else ""
            return {"root causes": state, "report": ""}
        return {"root causes": diagnosis.describe(), "report": diagnosis.where()}
