"""Prometheus's answers as the watcher's passes, on answers recorded from a real Prometheus 2.42.

tests/unit/prometheus/ holds what Debian's prometheus answered while scraping postgres_exporter
0.11.1 (default metrics, and dbcrew's queries file as a second job) and node_exporter 1.5 of an
embedded PostgreSQL 18 under lock contention and an insert storm, then a pg_stat_reset():
`reset.json` (the database counters, sessions by state and by wait event, at 2 s steps; range.json
holds the query's start, end and step), `node_cpu.json` (CPU seconds summed by mode),
`raw_samples.json` (an instant query of a range selector: the raw scrapes) and `error.json` (a
query Prometheus refused).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from dbcrew.models.prometheus import PrometheusSource, matchers
from dbcrew.operators.window.prometheus.api import PrometheusError, PromSeries, parse_series
from dbcrew.operators.window.prometheus.source import quoted
from dbcrew.operators.window.prometheus.steps import COMMITS, WAITS, StepGrid, passes_of

RECORDED = Path(__file__).parent / "prometheus"


def answer(name: str) -> list[PromSeries]:
    return parse_series(json.loads((RECORDED / name).read_text()))


def grid(*names: str, keep: str = "") -> StepGrid:
    span = json.loads((RECORDED / "range.json").read_text())
    series = [s for n in names for s in answer(n) if not keep or not s.name.startswith(keep)]
    return StepGrid.of(series, span["start"], span["end"], span["step"])


def values(series: list[PromSeries], name: str, **labels: str) -> list[float]:
    (found,) = [
        s for s in series if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    ]
    return [v for _t, v in found.points]


def test_a_counter_becomes_its_per_second_rate_over_each_step() -> None:
    commits = values(answer("reset.json"), COMMITS)
    passes = passes_of(grid("reset.json"))
    assert len(passes) == len(commits) - 1 and all(p.seconds == 2 for p in passes)
    first = passes[0].body
    assert first is not None
    assert first.rates["db.xact_commit"] == pytest.approx((commits[1] - commits[0]) / 2, rel=1e-5)
    inserted = values(answer("reset.json"), "pg_stat_database_tup_inserted")
    assert first.rates["db.tup_inserted"] == pytest.approx(
        (inserted[1] - inserted[0]) / 2, rel=1e-5
    )


def test_a_counter_that_went_back_is_a_gap_not_a_negative_rate() -> None:
    commits = values(answer("reset.json"), COMMITS)
    passes = passes_of(grid("reset.json"))
    (reset,) = [i for i in range(1, len(commits)) if commits[i] < commits[i - 1]]
    assert passes[reset - 1].body is None and "went back" in passes[reset - 1].gap
    after = passes[reset].body
    assert after is not None and after.rates["db.xact_commit"] == pytest.approx(
        (commits[reset + 1] - commits[reset]) / 2, rel=1e-5
    )
    assert all(
        p.body is None or all(v >= 0 for k, v in p.body.rates.items() if k.startswith("db."))
        for p in passes
    )


def test_each_step_is_one_session_sample_tallied_by_wait_event() -> None:
    recorded = answer("reset.json")
    passes = passes_of(grid("reset.json"))
    first = passes[0].body
    assert first is not None and first.session_samples == 1
    second = json.loads((RECORDED / "range.json").read_text())["start"] + 2  # the first pass's end
    locks = {
        f"Lock:{s.labels['wait_event']}": dict(s.points).get(second, 0.0)
        for s in recorded
        if s.name == WAITS and s.labels.get("wait_event_type") == "Lock"
    }
    assert {k: n for k, n in first.waits.items() if k.startswith("Lock:")} == {
        k: int(v) for k, v in locks.items() if v
    }
    assert first.rates["act.wait_lock"] == sum(locks.values())
    assert first.rates["act.active"] == sum(first.waits.values())


def test_without_the_queries_file_sessions_come_by_state_and_no_sample_is_claimed() -> None:
    passes = passes_of(grid("reset.json", keep=WAITS))
    first = passes[0].body
    assert first is not None and first.session_samples == 0 and not first.waits
    active = values(answer("reset.json"), "pg_stat_activity_count", state="active")
    assert first.rates["act.active"] == active[1]
    assert "act.wait_lock" not in first.rates


def test_host_cpu_is_the_busy_share_of_all_modes_over_the_step() -> None:
    cpu = {s.labels["mode"]: [v for _t, v in s.points] for s in answer("node_cpu.json")}
    passes = passes_of(grid("reset.json", "node_cpu.json"))
    body = passes[0].body
    assert body is not None
    deltas = {mode: v[1] - v[0] for mode, v in cpu.items()}
    total = sum(deltas.values())
    busy = 100 * (total - deltas["idle"] - deltas["iowait"]) / total
    assert body.rates["host.cpu_busy"] == pytest.approx(busy, rel=1e-5)
    assert body.rates.get("host.iowait", 0.0) == pytest.approx(
        100 * deltas["iowait"] / total, rel=1e-5
    )


def test_a_range_selector_answers_the_raw_scrapes() -> None:
    (series,) = answer("raw_samples.json")
    times = [t for t, _v in series.points]
    assert series.labels["datname"] == "diag" and series.labels["server"].startswith("127.0.0.1:")
    assert all(0.9 < b - a < 1.1 for a, b in itertools.pairwise(times)), "scraped every second"


def test_a_refused_query_is_one_line_with_prometheus_reason() -> None:
    with pytest.raises(PrometheusError) as caught:
        answer("error.json")
    assert str(caught.value) == (
        "Prometheus refused the query: bad_data: 1:6: parse error: unclosed left parenthesis"
    )
    with pytest.raises(PrometheusError, match="not a Prometheus API answer"):
        parse_series({"hello": "world"})


@pytest.mark.parametrize(
    ("selector", "inner"),
    [
        ('{job="postgres"}', 'job="postgres"'),
        ('job="pg", instance=~"db1:.*"', 'job="pg", instance=~"db1:.*"'),
        ('{a!="x\\"y",}', 'a!="x\\"y"'),
        ("", ""),
    ],
)
def test_label_matchers_are_accepted_and_joined(selector: str, inner: str) -> None:
    source = PrometheusSource(url="http://prometheus:9090", selector=selector)  # type: ignore[arg-type]
    assert matchers(source.selector) == inner


@pytest.mark.parametrize(
    ("url", "selector", "message"),
    [
        ("http://prometheus:9090", "job=postgres", "is not a list of label matchers"),
        ("http://prometheus:9090", '{job="a"} or vector(1)', "is not a list of label matchers"),
        ("prometheus:9090", "", "URL scheme should be"),
        ("http://admin:secret@prometheus:9090", "", "may not carry credentials"),
    ],
)
def test_a_bad_source_is_refused(url: str, selector: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PrometheusSource(url=url, selector=selector)  # type: ignore[arg-type]


def test_a_label_value_is_quoted_as_promql_reads_it() -> None:
    assert quoted('a"b\\c') == '"a\\"b\\\\c"'
