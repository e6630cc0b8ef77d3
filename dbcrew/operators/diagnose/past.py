"""The facts of a past interval: the window floor's store or Prometheus source, judged as a live window is.

Both sources give the interval's window and, when enough samples precede it, the baseline before it
(dbcrew/operators/window/store.py, dbcrew/operators/window/prometheus/source.py), with what they cannot show as
coverage. A diagnosis judges that window against the samples before it; without them, against the
stored quiet window of an earlier health review or a --baseline file (`fallback`), as a live one.
"""

from __future__ import annotations

from dbcrew.models import Brief
from dbcrew.models.interval import PastInterval
from dbcrew.models.prometheus import PrometheusSource
from dbcrew.models.report import CoverageEntry
from dbcrew.operators.diagnose.facts import FactsRecord, facts_of
from dbcrew.operators.window.evidence import WindowBaseline
from dbcrew.operators.window.passes import TargetFacts
from dbcrew.operators.window.prometheus.source import lacks, read_prometheus
from dbcrew.operators.window.readers import read_settings
from dbcrew.operators.window.store import Recorded, after_the_fact, read_recorded
from dbcrew.store.samples import SampleStore
from dbcrew.targets import PostgresTarget


def recorded_facts(
    target: PostgresTarget,
    brief: Brief,
    interval: PastInterval,
    store: SampleStore,
    fallback: WindowBaseline | None,
    alert: str = "",
) -> FactsRecord:
    """The facts of `interval` on `target` from `store`; NoSamples when it holds none for the interval."""
    recorded = read_recorded(store, brief.identity(target.address), interval)
    return facts_of_recorded(
        target, recorded, fallback, alert, "the watcher's samples", after_the_fact(recorded)
    )


def facts_of_recorded(
    target: PostgresTarget,
    recorded: Recorded,
    fallback: WindowBaseline | None,
    alert: str,
    whose: str,
    coverage: list[CoverageEntry],
) -> FactsRecord:
    """The facts of a recorded window (the store's, Prometheus's): against the samples before it when there are enough
    (`whose` samples, the report says), else against `fallback`."""
    baseline = fallback
    if recorded.baseline is not None:
        span = recorded.baseline.seconds
        length = f"{span / 60:.0f} min" if span >= 120 else f"{span:.0f} s"
        baseline = WindowBaseline(
            window=recorded.baseline, source=f"{whose} of the {length} before the interval"
        )
    return facts_of(target, recorded.window, baseline, alert, coverage=coverage, live=False)


def prometheus_facts(
    target: PostgresTarget,
    brief: Brief,
    interval: PastInterval,
    source: PrometheusSource,
    fallback: WindowBaseline | None,
    alert: str = "",
) -> FactsRecord:
    """The facts of `interval` on `target` from Prometheus; NoSamples when it holds none of the target's series then."""
    with (
        target.session() as conn
    ):  # what the exporters do not export: the settings, as they are now
        known = TargetFacts(
            settings=read_settings(conn), server_version_num=brief.server_version_num
        )
    recorded, chosen = read_prometheus(
        source, target, brief.identity(target.address), interval, known
    )
    return facts_of_recorded(
        target,
        recorded,
        fallback,
        alert,
        f"Prometheus's samples at {source.address}",
        lacks(recorded, chosen),
    )
