"""The window's metric catalogue (dbcrew/operators/window/metrics.py) is what the readers, the Prometheus steps and
the detector use: a metric that claims a Prometheus source gets its value from it, in its unit."""

from __future__ import annotations

import pglast
import pytest

from dbcrew.operators.stat_views import DATABASE_STATS, checkpointer
from dbcrew.operators.window.incidents import SIGNALS
from dbcrew.operators.window.metrics import (
    ACTIVITY_SERIES,
    CHECKPOINT_RATES,
    DATABASE_COUNTERS,
    GIB,
    IO_OBJECTS,
    METRICS,
    SESSION_GAUGES,
    WAITS_SERIES,
    WAL_RATES,
    PromRead,
    io_metric,
    read_by_prometheus,
)
from dbcrew.operators.window.prometheus.api import PromSeries
from dbcrew.operators.window.prometheus.steps import COMMITS, StepGrid, passes_of
from dbcrew.operators.window.readers import IO_SQL, WAL_SQL, ActivityTally

STEP = 10.0


def grid(series: dict[tuple[tuple[str, str], ...], tuple[float, float]]) -> StepGrid:
    """Two steps; each series (its labels) with its value at each; the commits counter always (no gap)."""
    found = [
        PromSeries(labels=dict(labels), points=[(0.0, first), (STEP, second)])
        for labels, (first, second) in series.items()
    ]
    if not any(s.name == COMMITS for s in found):
        found.append(PromSeries(labels={"__name__": COMMITS}, points=[(0.0, 0.0), (STEP, 0.0)]))
    return StepGrid.of(found, 0.0, STEP, STEP)


def one_pass(series: dict[tuple[tuple[str, str], ...], tuple[float, float]]) -> dict[str, float]:
    (step,) = passes_of(grid(series))
    assert step.body is not None, step.gap
    return step.body.rates


def test_names_are_unique_and_the_detector_watches_the_floored_ones_in_their_order():
    names = [m.name for m in METRICS]
    assert len(names) == len(set(names))
    assert SIGNALS == {m.name: m.floor for m in METRICS if m.floor is not None}
    assert all(floor > 0 for floor in SIGNALS.values())


@pytest.mark.parametrize("metric", read_by_prometheus(PromRead.RATE), ids=lambda m: m.name)
def test_a_rate_metric_is_its_series_increase_per_second(metric):
    assert metric.prometheus is not None
    rates = one_pass({(("__name__", metric.prometheus.series),): (100.0, 100.0 + 7 * STEP)})
    assert rates[metric.name] == pytest.approx(7.0)


@pytest.mark.parametrize("metric", read_by_prometheus(PromRead.GAUGE), ids=lambda m: m.name)
def test_a_gauge_metric_is_its_series_value_in_its_unit(metric):
    assert metric.prometheus is not None
    raw = (
        3.0 / metric.prometheus.scale
    )  # 3 of the metric's unit (3 GiB of available memory: 3 * 2**30 bytes)
    rates = one_pass({(("__name__", metric.prometheus.series),): (raw, raw)})
    assert rates[metric.name] == pytest.approx(3.0)


def test_every_derived_metric_is_made_from_its_series():
    """One step of every series a derived metric names (and those it is read with): each gets a value."""
    rates = one_pass(
        {
            (("mode", "user"),): (0.0, 6.0),  # sum by (mode) (node_cpu_seconds_total): no name
            (("mode", "idle"),): (0.0, 3.0),
            (("mode", "iowait"),): (0.0, 1.0),
            (("__name__", WAITS_SERIES), ("wait_event_type", ""), ("wait_event", "")): (1, 2),
            (("__name__", WAITS_SERIES), ("wait_event_type", "Lock"), ("wait_event", "tuple")): (
                1,
                3,
            ),
            (
                ("__name__", WAITS_SERIES),
                ("wait_event_type", "IO"),
                ("wait_event", "DataFileRead"),
            ): (1, 1),
            (("__name__", WAITS_SERIES), ("wait_event_type", "IO"), ("wait_event", "WalSync")): (
                1,
                1,
            ),
            (
                ("__name__", WAITS_SERIES),
                ("wait_event_type", "LWLock"),
                ("wait_event", "BufferContent"),
            ): (1, 1),
            (("__name__", ACTIVITY_SERIES), ("state", "idle in transaction")): (2, 2),
            (("__name__", "node_memory_SwapTotal_bytes"),): (4 * GIB, 4 * GIB),
            (("__name__", "node_memory_SwapFree_bytes"),): (3 * GIB, 3 * GIB),
            (("__name__", "node_vmstat_pswpin"),): (0, 256 * STEP),
            (("__name__", "node_vmstat_pswpout"),): (0, 0),
        }
    )
    derived = read_by_prometheus(PromRead.DERIVED)
    assert derived and {m.name for m in derived} <= rates.keys(), sorted(rates)
    assert rates["host.cpu_busy"] == pytest.approx(60.0) and rates["host.iowait"] == pytest.approx(
        10.0
    )
    assert rates["host.swap_used_gb"] == pytest.approx(1.0) and rates[
        "host.swap_io_mb"
    ] == pytest.approx(1.0)
    assert (rates["act.active"], rates["act.on_cpu"], rates["act.wait_lock"]) == (8, 2, 3)


def test_a_live_session_sample_gives_every_session_gauge():
    assert list(ActivityTally().add([])) == [m.name for m in SESSION_GAUGES]


def selected(sql: str) -> list[str]:
    """The names of a SELECT's columns (their alias, else the column's), as PostgreSQL's parser reads them."""
    (raw,) = pglast.parse_sql(sql)
    return [t.name or t.val.fields[-1].sval for t in raw.stmt.targetList]


def test_every_counter_the_readers_select_is_a_catalogue_metric():
    """read_counters names what it reads through the catalogue: a column added to a reader's SQL without its
    metric would fail there (a KeyError) or, for pg_stat_io, never be read; here it fails first."""
    assert set(DATABASE_STATS.changes) == set(DATABASE_COUNTERS)
    assert set(selected(WAL_SQL)) == set(WAL_RATES)
    for version in (160000, 170000):
        assert set(checkpointer(version).counters) == set(CHECKPOINT_RATES)
    # pg_stat_io: each column summed is some object's metric (one object's may be all it takes).
    columns = [c for c in selected(IO_SQL) if c != "object"]
    assert columns and all(any(io_metric(obj, c) for obj in IO_OBJECTS) for c in columns)
    assert io_metric("relation", "reeds") is None  # what is not declared is not read
