"""The one typed run of a named target (dbcrew/models/target_run.py): what the on-demand form, the fleet, the
watcher and the Alertmanager receiver all start, and the review request the inventory entry makes of it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from dbcrew.inventory import TargetEntry, parse_inventory
from dbcrew.models.incident import IncidentSignal, RunIncident
from dbcrew.models.interval import PastInterval
from dbcrew.models.prometheus import PrometheusSource
from dbcrew.models.request import ReviewRequest
from dbcrew.models.target_run import TargetRun
from dbcrew.store.samples import Incident
from dbcrew.vocabulary import Scenario

NOW = datetime.now(UTC)
INTERVAL = PastInterval(start=NOW - timedelta(minutes=20), end=NOW - timedelta(minutes=5))
LOCKS = IncidentSignal(name="act.wait_lock", baseline_median=0.0, peak=9.0, z=40.0)
CPU = IncidentSignal(name="host.cpu_busy", baseline_median=0.2, peak=0.97, z=12.0)


def entry() -> TargetEntry:
    (only,) = parse_inventory(
        {
            "targets": [
                {
                    "name": "orders",
                    "url": "postgresql://dbcrew@db.internal:5432/orders",
                    "scenario": "health",
                    "window": 30,
                }
            ]
        }
    ).targets
    return only


def incident(closed: bool = True) -> Incident:
    return Incident(
        target="7322222222222222222/orders",
        started_at=INTERVAL.start,
        ended_at=INTERVAL.end,
        closed=closed,
        signals=[LOCKS, CPU],
    )


def test_an_empty_override_keeps_the_entrys_own():
    request = entry().request(TargetRun(target="orders"))
    assert request.scenario is Scenario.HEALTH and request.settings.window_seconds == 30
    assert request.target is not None and request.target.dbname == "orders"
    assert request.signals == [] and request.interval is None
    asked = entry().request(TargetRun(target="orders", scenario=Scenario.DIAGNOSE, window=5))
    assert asked.scenario is Scenario.DIAGNOSE and asked.settings.window_seconds == 5


def test_an_incidents_diagnosis_carries_its_interval_alert_and_signals_typed():
    run = TargetRun(
        target="orders",
        interval=INTERVAL,
        alert="watcher incident ...",
        incident=incident().for_run(),
    )
    request = entry().request(run)
    assert request.scenario is Scenario.DIAGNOSE, "a past interval is diagnosed"
    assert request.interval == INTERVAL and request.settings.alert == "watcher incident ..."
    assert request.signals == [LOCKS, CPU]
    assert run.incident is not None and not run.incident.while_open
    assert incident(closed=False).for_run().while_open, "an open incident is diagnosed as it stands"


def test_the_run_travels_as_its_parameters_and_back_unchanged():
    """start_run sends the run as JSON without its defaults; the flow validates it back to the same value."""
    run = TargetRun(
        target="orders",
        interval=INTERVAL,
        prometheus=PrometheusSource.model_validate({"url": "http://prometheus.internal:9090"}),
        incident=incident().for_run(),
    )
    sent = run.model_dump(mode="json", exclude_defaults=True)
    assert set(sent) == {"target", "interval", "prometheus", "incident"}
    assert TargetRun.model_validate(sent) == run
    assert TargetRun.model_validate({"target": "orders"}) == TargetRun(target="orders")


def test_what_needs_an_interval_is_refused_without_one():
    ref = RunIncident(target="7322222222222222222/orders", started_at=INTERVAL.start)
    with pytest.raises(ValidationError, match="an incident's diagnosis needs its interval"):
        TargetRun(target="orders", incident=ref)
    source = PrometheusSource.model_validate({"url": "http://prometheus.internal:9090"})
    with pytest.raises(ValidationError, match="Prometheus is read for a past interval"):
        TargetRun(target="orders", prometheus=source)
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        TargetRun(target="orders", window=0.5)


def test_signals_are_for_a_diagnosis():
    with pytest.raises(ValidationError, match="they need the diagnose scenario"):
        ReviewRequest(
            target="postgresql://dbcrew@db.internal:5432/orders",
            scenario=Scenario.HEALTH,
            signals=[LOCKS],
        )
