"""Alertmanager's firing and resolved alerts, as diagnosis runs of the pool (the receiver is dbcrew/cli/receiver.py).

Each alert the inventory can tell the target of (dbcrew/models/alertmanager.py) becomes a
review_target run of its interval, on the `incidents` queue as the watcher's diagnoses (never behind a
fleet's reviews on `reviews`: dbcrew/flows/queues.py), so its report,
artifacts and alert (the target's Apprise URLs: the root causes, with the run's link) are those of
any diagnosis. A watched target is diagnosed from the watcher's store, which holds what the crew
itself sampled (statements, waits, tables); another from the Prometheus that fired the alert.

An alert says roughly when (it fires after its rule's `for:`, so the interval starts well before
it); the watcher's incidents say exactly. For a watched target, the incidents that overlap the
alert's interval are the interval diagnosed (from the first one's start to the last one's end): a
window mostly of normal samples would hide a short anomaly from the median-based comparison.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from dbcrew.flows.queues import PoolQueue
from dbcrew.flows.starting import start_run
from dbcrew.inventory import Inventory, TargetEntry
from dbcrew.models.alertmanager import AlertmanagerPayload, SkippedAlert, diagnoses_of
from dbcrew.models.interval import PastInterval
from dbcrew.models.prometheus import PrometheusSource
from dbcrew.models.target_run import TargetRun
from dbcrew.store.samples import open_samples
from dbcrew.targets import parse_target


def narrowed(entry: TargetEntry, interval: PastInterval) -> PastInterval:
    """The watcher's incidents of `entry` within `interval`, as one interval; `interval` when there are none."""
    samples = open_samples()
    identity = samples.identity_of(parse_target(entry.url).display)
    if identity is None:
        return interval
    overlapping = [
        i
        for i in samples.incidents(identity, interval.start)
        if i.started_at < interval.end and i.ended_at > interval.start
    ]
    if not overlapping:
        return interval
    return PastInterval(
        start=min(i.started_at for i in overlapping), end=max(i.ended_at for i in overlapping)
    )


class StartedDiagnosis(BaseModel):
    target: str
    run: str = Field(description="the flow run's name")
    run_id: str
    source: str = Field(
        description="where the interval is read: the watcher's store or a Prometheus"
    )
    interval: PastInterval


class Received(BaseModel):
    """What the receiver answers Alertmanager (and logs)."""

    started: list[StartedDiagnosis]
    skipped: list[SkippedAlert]


def start_diagnoses(payload: AlertmanagerPayload, inventory: Inventory) -> Received:
    """One diagnosis run per alert whose target the inventory knows; the others skipped, each with why."""
    diagnoses, skipped = diagnoses_of(payload, inventory)
    started = []
    for diagnosis in diagnoses:
        entry = inventory.get(diagnosis.target)
        interval = (
            diagnosis.interval if entry.watch is None else narrowed(entry, diagnosis.interval)
        )
        prometheus = (
            PrometheusSource.model_validate({"url": diagnosis.prometheus})
            if entry.watch is None and diagnosis.prometheus
            else None
        )
        request = TargetRun(
            target=entry.name, interval=interval, alert=diagnosis.alert, prometheus=prometheus
        )
        run = start_run(request, ["dbcrew", "alertmanager"], queue=PoolQueue.INCIDENTS)
        started.append(
            StartedDiagnosis(
                target=entry.name,
                run=run.name,
                run_id=str(run.id),
                source=prometheus.address if prometheus is not None else "the watcher's store",
                interval=interval,
            )
        )
    return Received(started=started, skipped=skipped)
