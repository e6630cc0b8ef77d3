"""Diagnosis of a past interval read from a real Prometheus, scraping real exporters of a real PostgreSQL.

Debian's prometheus (scraping every second, its own storage in tmp), two postgres_exporters of the
embedded server (one with its default metrics, as a team runs it; one exporting only dbcrew's
queries file, the waits) and node_exporter, each on a free port, started by the module's fixture
and stopped after it. The server is quiet, then under lock contention and an insert storm, then
quiet again; the diagnosis of that interval from Prometheus names both causes, and from the default
metrics alone names the insert storm and says, in the coverage, that it could not see the waits.
Bad input to `dbcrew diagnose --prometheus` is one line and exit 2.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from bench import injections
from bench.diagnose import DiagnosisServer
from dbcrew.lab.embedded import _free_port
from dbcrew.models import Report
from dbcrew.models.interval import PastInterval
from dbcrew.models.prometheus import PrometheusSource
from dbcrew.roles.crew.context import RunContext
from dbcrew.roles.spine import PlainPhases, review
from dbcrew.settings.run import Settings
from dbcrew.targets import parse_target
from tests.cli_here import dbcrew_here

ROOT = Path(__file__).resolve().parents[2]
QUERIES = ROOT / "deployments" / "postgres_exporter" / "dbcrew-queries.yaml"
BINARIES = ("prometheus", "prometheus-postgres-exporter", "prometheus-node-exporter")
QUIET_SECONDS = 24.0  # the baseline: 12 steps of 2 s before the anomaly
ANOMALY_SECONDS = 16.0
CAUSES = ["lock_contention", "workload_many_inserts"]

pytestmark = pytest.mark.skipif(
    any(shutil.which(b) is None for b in BINARIES),
    reason="Debian's prometheus, prometheus-postgres-exporter and prometheus-node-exporter (make debian)",
)


@dataclass
class Observed:
    """The server, Prometheus's URL and the interval the anomaly ran in."""

    server: DiagnosisServer
    url: str
    interval: PastInterval


def _exporter(dsn: str, port: int, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    address = dsn.removeprefix("postgresql://")
    env = {**os.environ, "DATA_SOURCE_NAME": f"postgresql://{address}?sslmode=disable"}
    return subprocess.Popen(
        ["prometheus-postgres-exporter", f"--web.listen-address=127.0.0.1:{port}", *extra],
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )


def _scraping(url: str, jobs: int, deadline: float) -> None:
    """Wait until Prometheus has scraped every job up at least once."""
    while time.monotonic() < deadline:
        try:
            result = httpx.get(f"{url}/api/v1/query", params={"query": "up == 1"}).json()
            if len(result["data"]["result"]) >= jobs:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"Prometheus at {url} did not scrape its {jobs} jobs")


def _scraped_since(url: str, jobs: int, moment: datetime, deadline: float) -> None:
    """Wait until Prometheus has scraped every job after `moment`: the interval's last samples are in,
    however long a loaded host's scrapes take (a fixed pause was a guess at that)."""
    query = f"timestamp(up) > {moment.timestamp()}"
    while time.monotonic() < deadline:
        try:
            result = httpx.get(f"{url}/api/v1/query", params={"query": query}).json()
            if len(result["data"]["result"]) >= jobs:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"Prometheus at {url} did not scrape its {jobs} jobs after {moment}")


@pytest.fixture(scope="module")
def observed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Observed]:
    work = tmp_path_factory.mktemp("prometheus")
    server = DiagnosisServer.start(work / "pg", baseline_seconds=1.0)
    ports = {name: _free_port() for name in ("postgres", "postgres_waits", "node", "prometheus")}
    processes = [
        _exporter(server.dsn, ports["postgres"], work / "postgres.log"),
        _exporter(
            server.dsn,
            ports["postgres_waits"],
            work / "waits.log",
            "--disable-default-metrics",
            "--disable-settings-metrics",
            "--no-collector.database",
            "--no-collector.bgwriter",
            f"--extend.query-path={QUERIES}",
        ),
        subprocess.Popen(
            [
                "prometheus-node-exporter",
                f"--web.listen-address=127.0.0.1:{ports['node']}",
                "--collector.disable-defaults",
                *(f"--collector.{c}" for c in ("cpu", "loadavg", "meminfo", "vmstat")),
            ],
            stdout=(work / "node.log").open("wb"),
            stderr=subprocess.STDOUT,
        ),
    ]
    jobs = {name: port for name, port in ports.items() if name != "prometheus"}
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [
            {"job_name": name, "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}
            for name, port in jobs.items()
        ],
    }
    (work / "prometheus.yml").write_text(json.dumps(config))  # JSON is YAML
    processes.append(
        subprocess.Popen(
            [
                "prometheus",
                f"--config.file={work / 'prometheus.yml'}",
                f"--storage.tsdb.path={work / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{ports['prometheus']}",
            ],
            stdout=(work / "prometheus.log").open("wb"),
            stderr=subprocess.STDOUT,
        )
    )
    url = f"http://127.0.0.1:{ports['prometheus']}"
    try:
        _scraping(url, len(jobs), time.monotonic() + 60)
        time.sleep(QUIET_SECONDS)
        with injections.injected(server.dsn, CAUSES, warmup=1.0):
            start = datetime.now(UTC)
            time.sleep(ANOMALY_SECONDS)
            end = datetime.now(UTC)
        _scraped_since(url, len(jobs), end, time.monotonic() + 60)
        yield Observed(server=server, url=url, interval=PastInterval(start=start, end=end))
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=30)
        server.stop()


def diagnose(observed: Observed, out: Path, selector: str = "") -> Report:
    run = RunContext(
        target=parse_target(observed.server.dsn),
        scenario="diagnose",
        interval=observed.interval,
        prometheus=PrometheusSource(url=observed.url, selector=selector),  # type: ignore[arg-type]
        out_dir=out,
        settings=Settings(alert="queries were slow an hour ago"),
    )
    return review(run, PlainPhases)


def test_a_past_anomaly_is_diagnosed_from_prometheus(observed: Observed, tmp_path: Path) -> None:
    report = diagnose(observed, tmp_path / "waits")
    found = [rc.code for rc in report.root_causes]
    assert set(CAUSES) <= set(found), (
        f"{CAUSES} not all among {found}: {report.diagnosis.process if report.diagnosis else ''}"
    )
    assert report.interval == observed.interval and report.schema_version == 1
    assert report.diagnosis is not None
    assert f"from Prometheus at {observed.url}" in report.diagnosis.anomaly_description
    assert "Prometheus's samples at" in report.diagnosis.anomaly_description, (
        "the baseline is the target's own series before the interval"
    )
    seen = {c.check: c for c in report.coverage}
    assert "statements" in seen and "pg_stat_statements" in seen["statements"].reason
    assert "wait_events" not in seen, "the queries file exported the waits"
    assert 'job="node"' in seen["prometheus_series"].reason, "the host's node_exporter was found"

    # The default metrics alone (the postgres job): the insert storm still shows in the database counters,
    # the lock waits cannot, and the coverage says so instead of an all-clear.
    alone = diagnose(observed, tmp_path / "default", selector='{job="postgres"}')
    found = [rc.code for rc in alone.root_causes]
    assert "workload_many_inserts" in found and "lock_contention" not in found, found
    unseen = {c.check: c.reason for c in alone.coverage}
    assert "lock, I/O, LWLock and WAL-flush waits were not seen" in unseen["wait_events"]
    assert "dbcrew-queries.yaml" in unseen["wait_events"]
    saved = Report.model_validate_json((tmp_path / "default" / "report.json").read_text())
    assert saved.interval == observed.interval


def _dbcrew(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dbcrew.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )


def test_bad_prometheus_input_is_one_line_and_exit_2(observed: Observed, tmp_path: Path) -> None:
    dsn = observed.server.dsn
    interval = (
        "--from",
        observed.interval.start.isoformat(),
        "--to",
        observed.interval.end.isoformat(),
    )
    out = ("--out", str(tmp_path / "never"))
    cases = {
        "does not answer": (*interval, "--prometheus", f"http://127.0.0.1:{_free_port()}"),
        "no postgres_exporter series": (
            *interval,
            "--prometheus",
            observed.url,
            "--prometheus-selector",
            '{job="elsewhere"}',
        ),
        "URL": (*interval, "--prometheus", "prometheus:9090"),
        "needs --from": ("--prometheus", observed.url),
        "not a list of label matchers": (
            *interval,
            "--prometheus",
            observed.url,
            "--prometheus-selector",
            "job=postgres",
        ),
    }
    for number, (expected, args) in enumerate(cases.items()):
        # The first as a user runs it (a process: its status, all its start writes to stderr), the
        # others through the same entry point in this process (tests/cli_here.py: no interpreter each).
        result = (_dbcrew if number == 0 else dbcrew_here)("diagnose", dsn, *args, *out)
        assert result.returncode == 2, (expected, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and expected in lines[0], (expected, result.stderr)
        assert "Traceback" not in result.stderr
    before = datetime.now(UTC) - timedelta(days=1)
    old = ("--from", before.isoformat(), "--to", (before + timedelta(minutes=5)).isoformat())
    result = dbcrew_here("diagnose", dsn, *old, "--prometheus", observed.url, *out)
    assert result.returncode == 2 and "no postgres_exporter series" in result.stderr
    assert not (tmp_path / "never" / "report.json").exists()
