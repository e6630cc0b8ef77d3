"""A team's Prometheus as a source of a past interval: the same window and baseline as the watcher's store gives.

Teams that run Prometheus with postgres_exporter and node_exporter already keep the target's
history; `dbcrew diagnose --from --to --prometheus URL` reads it as range queries, turns each step
into the pass a watcher would have stored (dbcrew/operators/window/prometheus/steps.py) and builds the window and
the baseline with the store's rules (dbcrew/operators/window/store.py: the baseline is the span just
before the interval, as long as the interval within 10 minutes and an hour), so the experts and the
cross review are the store's diagnosis unchanged.

Which series are the target's (postgres_exporter 0.11.1 labels every series of a server with
`server="host:port"` of its DATA_SOURCE_NAME, and a database's with `datname`): by default the
series with the target's host:port as `server` and its database as `datname`; when none has that
`server` (the exporter reaches the server by another name), those with the `datname` alone, if they
come from one scrape target; otherwise the user's label matchers (`--prometheus-selector`). The
host's node_exporter is the one whose `instance` is on the target's host (else on the
postgres_exporter's host), or `--node-selector`'s.

The step is twice the scrape interval (so each step holds a new sample whatever the scrapes'
jitter), or coarser for a long interval (at most STEPS steps in it). What Prometheus does not hold
is said in the coverage, never taken for an all-clear (`lacks`).
"""

from __future__ import annotations

import itertools
import json
import math
import re
import statistics
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from dbcrew.errors import DbcrewError
from dbcrew.models.interval import PastInterval
from dbcrew.models.prometheus import PrometheusSource, matchers
from dbcrew.models.report import CoverageEntry, CoverageStatus, SkipCause, SkipKind
from dbcrew.operators.window.passes import PassBody, TargetFacts, rate_names, window_of_parts
from dbcrew.operators.window.prometheus.api import Prometheus, PromSeries
from dbcrew.operators.window.prometheus.steps import (
    ACTIVITY,
    COMMITS,
    DATABASE_COUNTERS,
    NODE_GAUGES,
    SWAP_PAGES,
    WAITS,
    StepGrid,
    StepPass,
    passes_of,
)
from dbcrew.operators.window.store import (
    MIN_PASSES,
    NoSamples,
    Recorded,
    baseline_span,
    gap_entries,
)
from dbcrew.store.samples import Gap
from dbcrew.targets import PostgresTarget

STEPS = 120  # at most about this many steps in the interval: a day at a 15 s scrape is 720 s steps
QUERIES_FILE = "deployments/postgres_exporter/dbcrew-queries.yaml"
NODE_SERIES = (
    *NODE_GAUGES,
    "node_memory_SwapTotal_bytes",
    "node_memory_SwapFree_bytes",
    *SWAP_PAGES,
)


class AmbiguousSeries(DbcrewError, LookupError):
    """The default selection found the target's database in several scrape targets: only label matchers can tell."""


def quoted(value: str) -> str:
    """A PromQL string literal (double-quoted, backslashes and quotes escaped as Go reads them)."""
    return json.dumps(value)


@dataclass(frozen=True)
class Selection:
    """Which series are the target's: label matchers for its database's and its host's series, the scrape interval, the step."""

    database: str
    node: str
    scrape_seconds: float
    step: float
    described: str  # how the series were found, for the coverage


def _scrape_targets(series: list[PromSeries]) -> list[str]:
    return sorted(
        {
            ", ".join(f"{k}={s.labels[k]}" for k in ("job", "instance", "server") if k in s.labels)
            for s in series
        }
    )


def select(
    prometheus: Prometheus, source: PrometheusSource, target: PostgresTarget, interval: PastInterval
) -> Selection:
    """The target's series in the interval (NoSamples when there are none, AmbiguousSeries when several servers' match)."""
    database = f"datname={quoted(target.dbname)}"
    tries = (
        [f"{matchers(source.selector)},{database}".lstrip(",")]
        if source.selector
        else [f"server={quoted(target.address)},{database}", database]
    )
    seconds = max(math.ceil(interval.seconds), 1)
    for chosen in tries:
        found = [
            s
            for s in prometheus.instant(f"{COMMITS}{{{chosen}}}[{seconds}s]", interval.end)
            if len(s.points) >= 2
        ]
        if not found:
            continue
        origins = _scrape_targets(found)
        if len(found) > 1:
            raise AmbiguousSeries(
                f"{len(found)} postgres_exporter series match {{{chosen}}} in {prometheus.url} ({'; '.join(origins)}):"
                " pick the target's with --prometheus-selector"
            )
        (series,) = found
        if (
            chosen == database
        ):  # found by the database alone: from here on, only that scrape target's series
            chosen = ",".join(
                f"{k}={quoted(series.labels[k])}" for k in ("job", "instance") if k in series.labels
            )
            chosen = f"{chosen},{database}".lstrip(",")
        times = [t for t, _v in series.points]
        scrape = statistics.median(b - a for a, b in itertools.pairwise(times))
        step = round(max(2 * scrape, interval.seconds / STEPS), 3)
        node = _node(prometheus, source, target, series, interval.end)
        return Selection(
            database=chosen,
            node=node,
            scrape_seconds=scrape,
            step=step,
            described=f"{{{chosen}}} ({origins[0]}), scraped every {scrape:g} s",
        )
    raise NoSamples(
        f"no postgres_exporter series of {target.display} in {prometheus.url} from {interval.describe()}"
        f" (looked for {' then '.join(f'{COMMITS}{{{t}}}' for t in tries)}): give --prometheus-selector"
    )


def _node(
    prometheus: Prometheus,
    source: PrometheusSource,
    target: PostgresTarget,
    exporter: PromSeries,
    at: datetime,
) -> str:
    """The label matchers of the target host's node_exporter series, '' when none is found (the coverage says so)."""
    if source.node_selector:
        return matchers(source.node_selector)
    hosts = [
        target.address.rsplit(":", 1)[0],
        exporter.labels.get("instance", "").rsplit(":", 1)[0],
    ]
    for host in dict.fromkeys(h for h in hosts if h and not h.startswith("/")):
        chosen = f"instance=~{quoted(re.escape(host) + '(:[0-9]+)?')}"
        found = prometheus.instant(
            f'count by (job, instance) (node_cpu_seconds_total{{mode="idle",{chosen}}})', at
        )
        if len(found) == 1:
            labels = found[0].labels
            return ",".join(f"{k}={quoted(labels[k])}" for k in ("job", "instance") if k in labels)
    return ""


def read_prometheus(
    source: PrometheusSource,
    target: PostgresTarget,
    identity: str,
    interval: PastInterval,
    known: TargetFacts,
) -> tuple[Recorded, Selection]:
    """The interval's window and the baseline before it from Prometheus, with its gaps; `known` are the target's facts
    Prometheus does not hold (settings, version), to which the host's (CPUs, memory) are added."""
    prometheus = Prometheus(source.address)
    chosen = select(prometheus, source, target, interval)
    span = baseline_span(interval)
    steps_before = math.ceil(span.total_seconds() / chosen.step)
    start = interval.start - timedelta(seconds=steps_before * chosen.step)
    names = "|".join(re.escape(n) for n in [*DATABASE_COUNTERS, ACTIVITY, WAITS])
    series = prometheus.query_range(
        f'{{__name__=~"{names}",{chosen.database}}}', start, interval.end, chosen.step
    )
    facts = known
    if chosen.node:
        nodes = "|".join(re.escape(n) for n in NODE_SERIES)
        series += prometheus.query_range(
            f"sum by (mode) (node_cpu_seconds_total{{{chosen.node}}})",
            start,
            interval.end,
            chosen.step,
        )
        series += prometheus.query_range(
            f'{{__name__=~"{nodes}",{chosen.node}}}', start, interval.end, chosen.step
        )
        facts = _host_facts(prometheus, chosen.node, interval.end, known)
    grid = StepGrid.of(series, start.timestamp(), interval.end.timestamp(), chosen.step)
    passes = passes_of(grid)
    began = interval.start.timestamp()
    window = [p for p in passes if p.at > began + 1e-6]
    before = [p for p in passes if p.at <= began + 1e-6]
    if not any(p.body for p in window):
        raise NoSamples(
            f"Prometheus at {prometheus.url} holds no complete step of {target.display} from {interval.describe()}"
        )
    recorded = Recorded(
        window=window_of_parts(_parts(window), {}, facts, interval.start),
        baseline=window_of_parts(
            _parts(before), {}, facts, interval.start - span, also=rate_names(_parts(window))
        )
        if len(_parts(before)) >= MIN_PASSES
        else None,
        resolution=0,
        gaps=_gaps(identity, window),
    )
    return recorded, chosen


def _parts(passes: list[StepPass]) -> list[tuple[float, PassBody]]:
    return [(p.seconds, p.body) for p in passes if p.body is not None]


def _host_facts(prometheus: Prometheus, node: str, at: datetime, known: TargetFacts) -> TargetFacts:
    """`known` with the host's CPUs (node_cpu_seconds_total's idle series) and memory, as node_exporter saw them at `at`."""
    cores = prometheus.instant(f'count(node_cpu_seconds_total{{mode="idle",{node}}})', at)
    memory = prometheus.instant(f"node_memory_MemTotal_bytes{{{node}}}", at)
    return known.model_copy(
        update={
            "cpu_count": int(cores[0].points[-1][1]) if cores and cores[0].points else None,
            "memory_total_bytes": int(memory[0].points[-1][1])
            if memory and memory[0].points
            else None,
        }
    )


def _gaps(identity: str, passes: list[StepPass]) -> list[Gap]:
    """The window's steps without a body, adjacent ones with the same reason as one gap."""
    gaps: list[Gap] = []
    for p in passes:
        if p.body is not None:
            continue
        began = datetime.fromtimestamp(p.at - p.seconds, UTC)
        ended = datetime.fromtimestamp(p.at, UTC)
        if gaps and gaps[-1].ended_at == began and gaps[-1].reason == p.gap:
            gaps[-1] = gaps[-1].model_copy(update={"ended_at": ended})
        else:
            gaps.append(Gap(target=identity, started_at=began, ended_at=ended, reason=p.gap))
    return gaps


def lacks(recorded: Recorded, chosen: Selection) -> list[CoverageEntry]:
    """What a diagnosis from postgres_exporter's and node_exporter's series cannot see, as coverage entries."""

    def missing(check: str, detail: str) -> CoverageEntry:
        return CoverageEntry.of(
            check, CoverageStatus.SKIPPED, SkipCause(kind=SkipKind.NO_SOURCE, detail=detail)
        )

    window = recorded.window
    entries = [
        CoverageEntry(
            check="prometheus_series",
            status=CoverageStatus.RAN,
            reason=f"read {chosen.described}, at {chosen.step:g} s steps"
            + (f"; host from {{{chosen.node}}}" if chosen.node else ""),
        ),
        missing(
            "statements",
            "postgres_exporter 0.11 exports no per-statement statistics (pg_stat_statements): the interval's"
            " statements, their plans and the query experts' evidence are unknown",
        ),
        missing(
            "tables",
            "postgres_exporter's default metrics have no per-table scan and tuple counters (pg_stat_user_tables)",
        ),
        missing(
            "wal_io_checkpoints",
            "postgres_exporter 0.11 exports no WAL (pg_stat_wal), I/O (pg_stat_io) or vacuum progress counters, and its"
            " checkpointer (bgwriter) collector fails on PostgreSQL 17 and later",
        ),
        missing(
            "server_processes",
            "node_exporter has no per-process figures: the server's own CPU and memory (pg.cpu_cores,"
            " pg.private_mem_gb) are unknown",
        ),
    ]
    if window.session_samples:
        entries.append(
            CoverageEntry(
                check="ended_sessions",
                status=CoverageStatus.RAN,
                reason=f"partial: sessions are known only by wait event at each scrape (every {chosen.scrape_seconds:g} s,"
                f" read at {window.interval:g} s steps): who blocked whom, and running statements, are unknown",
            )
        )
    else:
        entries.append(
            missing(
                "wait_events",
                "postgres_exporter's default metrics count sessions by state only: lock, I/O, LWLock and WAL-flush"
                f" waits were not seen (load {QUERIES_FILE} with --extend.query-path to export them)",
            )
        )
    if not chosen.node:
        entries.append(
            missing(
                "host",
                "no node_exporter series of the target's host were found (give --node-selector):"
                " host CPU, iowait, load and memory are unknown",
            )
        )
    return entries + gap_entries(recorded.gaps)
