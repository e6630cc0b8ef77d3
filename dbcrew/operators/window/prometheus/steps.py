"""Prometheus's series of a target as the watcher's passes: one `PassBody` per range-query step.

A diagnosis from Prometheus (dbcrew/operators/window/prometheus/source.py) reads the interval as range queries
and hands the values here on the query's step grid (`StepGrid`); each step becomes the body a
watcher pass of the same span would have stored, so `window_of_parts` and the experts read them
unchanged. What maps to what (postgres_exporter 0.11, node_exporter 1.5, as Debian bookworm ships
them; docs/watch.md):

- counters become per-second rates over the step, `(v[i] - v[i-1]) / step`: the database counters
  `pg_stat_database_<column>` as `db.<column>` (the columns of DATABASE_STATS, the watcher's), the
  host's CPU seconds by mode and swap pages. A counter lower than at the step before was reset (a
  restart, pg_stat_reset): no rate spans it and the step is a gap, as a restart is the watcher's.
  A step without the database counters at both ends (the exporter or the server did not answer)
  is a gap too.
- gauges take their value at the step: sessions by state (`pg_stat_activity_count`), the
  host's load and memory.
- sessions by wait event come only from dbcrew's custom queries file
  (deployments/postgres_exporter/dbcrew-queries.yaml, `dbcrew_activity_sessions`): each step is one
  sample of the active sessions, tallied like one pg_stat_activity read of a pass. Without it a
  step has no session sample, and the coverage says the waits were not seen.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dbcrew.operators.window.metrics import (
    ACTIVE,
    ACTIVITY_SERIES,
    DATABASE_SERIES,
    HOST_CPU_BUSY,
    HOST_IOWAIT,
    HOST_SWAP_IO,
    HOST_SWAP_USED,
    IDLE_IN_XACT,
    WAITS_SERIES,
    PromRead,
    read_by_prometheus,
)
from dbcrew.operators.window.passes import PassBody, rounded
from dbcrew.operators.window.prometheus.api import PromSeries
from dbcrew.operators.window.readers import wait_gauge

# The counters read as rates and the gauges read at the step: the metric catalogue's (dbcrew/operators/window/metrics.py).
DATABASE_COUNTERS = {
    m.prometheus.series: m.name for m in read_by_prometheus(PromRead.RATE) if m.prometheus
}
NODE_GAUGES = {
    m.prometheus.series: (m.name, m.prometheus.scale)
    for m in read_by_prometheus(PromRead.GAUGE)
    if m.prometheus
}
COMMITS = f"{DATABASE_SERIES}xact_commit"  # present at every scrape of a live server: a step without it is a gap
ACTIVITY = ACTIVITY_SERIES  # {state}: sessions of the database by state
WAITS = WAITS_SERIES  # {wait_event_type, wait_event}: dbcrew's queries file
CPU = "cpu:"  # node_cpu_seconds_total summed by mode: "cpu:idle", "cpu:iowait", ...
SWAP_PAGES = ("node_vmstat_pswpin", "node_vmstat_pswpout")
SWAP_BYTES = ("node_memory_SwapTotal_bytes", "node_memory_SwapFree_bytes")
PAGE_BYTES = 4096  # node_exporter reports swap in pages; x86-64 and arm64 Linux pages are 4 KiB
IDLE_IN_TRANSACTION = ("idle in transaction", "idle in transaction (aborted)")


def series_key(series: PromSeries) -> str:
    """The column a series fills: its metric name, with the label that splits it when it is one of many."""
    labels = series.labels
    if series.name == ACTIVITY:
        return f"{ACTIVITY}:{labels.get('state', '')}"
    if series.name == WAITS:
        kind = labels.get("wait_event_type", "")
        return f"{WAITS}:" + (
            "CPU" if kind in ("", "CPU") else f"{kind}:{labels.get('wait_event', '')}"
        )
    if "mode" in labels and not series.name:
        return f"{CPU}{labels['mode']}"  # sum by (mode) (node_cpu_seconds_total)
    return series.name


@dataclass
class StepGrid:
    """Series values on a range query's steps: a column per key, None where the series had no sample."""

    times: list[float]
    step: float
    columns: dict[str, list[float | None]] = field(default_factory=dict)

    @classmethod
    def of(cls, series: list[PromSeries], start: float, end: float, step: float) -> StepGrid:
        """The grid of `series` from a range query (start, end, step); series of one key are summed (they partition it)."""
        count = round((end - start) / step) + 1
        grid = cls(times=[start + i * step for i in range(count)], step=step)
        for s in series:
            column = grid.columns.setdefault(series_key(s), [None] * count)
            for t, v in s.points:
                i = round((t - start) / step)
                if 0 <= i < count:
                    column[i] = (column[i] or 0.0) + v
        return grid

    def at(self, key: str, i: int) -> float | None:
        column = self.columns.get(key)
        return column[i] if column is not None else None

    def keys(self, prefix: str) -> list[str]:
        return [k for k in self.columns if k.startswith(prefix)]


@dataclass(frozen=True)
class StepPass:
    """One step of the grid as a pass: its end (unix seconds), its span, and its body, or why it has none."""

    at: float
    seconds: float
    body: PassBody | None
    gap: str = ""


def passes_of(grid: StepGrid) -> list[StepPass]:
    """Each step after the first as a pass (the first only gives the readings the second subtracts)."""
    return [_step(grid, i) for i in range(1, len(grid.times))]


def _step(grid: StepGrid, i: int) -> StepPass:
    at, seconds = grid.times[i], grid.step
    if grid.at(COMMITS, i) is None or grid.at(COMMITS, i - 1) is None:
        return StepPass(
            at, seconds, None, "no database counters: the exporter or the server did not answer"
        )
    counters = [*DATABASE_COUNTERS, *grid.keys(CPU), *SWAP_PAGES]
    deltas: dict[str, float] = {}
    for key in counters:
        now, before = grid.at(key, i), grid.at(key, i - 1)
        if now is None or before is None:
            continue
        if now < before:
            return StepPass(
                at,
                seconds,
                None,
                f"{key} went back: the server restarted or its statistics were reset",
            )
        deltas[key] = now - before
    rates = {DATABASE_COUNTERS[k]: d / seconds for k, d in deltas.items() if k in DATABASE_COUNTERS}
    rates.update(_host(grid, i, deltas, seconds))
    waits = {
        k.removeprefix(f"{WAITS}:"): round(v)
        for k in grid.keys(f"{WAITS}:")
        if (v := grid.at(k, i)) is not None
    }
    sampled = any(grid.at(k, i) is not None for k in grid.keys(f"{WAITS}:"))
    if sampled:
        for key, n in waits.items():
            rates[ACTIVE.name] = rates.get(ACTIVE.name, 0.0) + n
            gauge = wait_gauge(key)
            if gauge:
                rates[gauge] = rates.get(gauge, 0.0) + n
    else:
        rates[ACTIVE.name] = grid.at(f"{ACTIVITY}:active", i) or 0.0
    rates[IDLE_IN_XACT.name] = sum(
        grid.at(f"{ACTIVITY}:{s}", i) or 0.0 for s in IDLE_IN_TRANSACTION
    )
    body = PassBody(
        rates={k: rounded(v) for k, v in rates.items() if v},
        waits={k: n for k, n in waits.items() if n},
        session_samples=1 if sampled else 0,
    )
    return StepPass(at, seconds, body)


def _host(grid: StepGrid, i: int, deltas: dict[str, float], seconds: float) -> dict[str, float]:
    """The host's series of a pass (HostProbe's names) from node_exporter's; absent ones stay absent."""
    values: dict[str, float] = {}
    modes = {k.removeprefix(CPU): d for k, d in deltas.items() if k.startswith(CPU)}
    total = sum(modes.values())
    if total > 0:
        idle, iowait = modes.get("idle", 0.0), modes.get("iowait", 0.0)
        values[HOST_CPU_BUSY.name] = 100.0 * max(total - idle - iowait, 0.0) / total
        values[HOST_IOWAIT.name] = 100.0 * iowait / total
    for name, (key, scale) in NODE_GAUGES.items():
        value = grid.at(name, i)
        if value is not None:
            values[key] = value * scale
    swap_total, swap_free = (grid.at(series, i) for series in SWAP_BYTES)
    if swap_total is not None and swap_free is not None:
        values[HOST_SWAP_USED.name] = (swap_total - swap_free) / 2**30
    if all(k in deltas for k in SWAP_PAGES):
        values[HOST_SWAP_IO.name] = (
            sum(deltas[k] for k in SWAP_PAGES) * PAGE_BYTES / 2**20 / seconds
        )
    return values
