"""Diagnosis on a real PostgreSQL: every root cause injected and found; a normal load finds none.

One diagnosis server for the module (fsync and synchronous_commit on, so WAL flushes cost what
they cost), one shared baseline, short windows. The injections run in a child process over their
own read-write connection; the diagnosis only ever reads.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import injections
from bench.diagnose import DiagnosisServer
from lab.embedded import POSTGRES_BIN_PATH
from dbcrew.models import Report

WINDOW = 5.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DiagnosisServer]:
    started = DiagnosisServer.start(tmp_path_factory.mktemp("diagnose"), baseline_seconds=WINDOW)
    yield started
    started.stop()


@pytest.mark.parametrize("cause", injections.SINGLE)
def test_injected_root_cause_is_found(server: DiagnosisServer, cause: str, tmp_path: Path) -> None:
    report, _seconds = server.diagnose_injected([cause], tmp_path / "report", window=WINDOW)
    found = [rc.code for rc in report.root_causes]
    assert cause in found, f"{cause} not among {found}: {report.diagnosis.process if report.diagnosis else ''}"
    cause_entry = next(rc for rc in report.root_causes if rc.code == cause)
    assert cause_entry.solution and cause_entry.evidence, "a root cause carries its evidence and a solution"
    assert any("PostgreSQL manual" in s for s in cause_entry.evidence["knowledge"])


def test_two_causes_at_once_are_both_found(server: DiagnosisServer, tmp_path: Path) -> None:
    causes = ["workload_large_fetch", "query_correlated_subquery"]
    report, _seconds = server.diagnose_injected(causes, tmp_path / "report", window=WINDOW)
    assert set(causes) <= {rc.code for rc in report.root_causes}


def test_report_has_dbot_sections(server: DiagnosisServer, tmp_path: Path) -> None:
    report, _seconds = server.diagnose_injected(["lock_contention"], tmp_path / "report", window=WINDOW)
    assert report.scenario == "diagnose" and report.diagnosis is not None
    assert "lock_contention" in report.summary and report.coverage == []  # no health checks to account for
    assert "locks" in report.diagnosis.experts
    assert report.diagnosis.abnormal_metrics, "the lock waits left the baseline"
    markdown = (tmp_path / "report" / "report.md").read_text()
    for section in ("Anomaly description", "Root causes", "Solutions", "Diagnosis process", "Abnormal metrics"):
        assert section in markdown
    assert report.charts and (tmp_path / "report" / report.charts[0]).is_file()
    assert all(report.captions.get(c) for c in report.charts), "every chart says what it shows"
    lock = Report.model_validate_json((tmp_path / "report" / "report.json").read_text()).root_causes[0]
    assert lock.code == "lock_contention" and lock.evidence["blockers"], "the blocker is named"


def _pgbench(*args: str) -> list[str]:
    return [str(POSTGRES_BIN_PATH / "pgbench"), *args]


def test_normal_pgbench_load_yields_no_root_cause(server: DiagnosisServer, tmp_path: Path) -> None:
    url = server.dsn
    subprocess.run(_pgbench("-i", "-s", "2", "-q", url), check=True, capture_output=True, timeout=120)
    # A steady, rate-limited TPC-B-like load: what a healthy OLTP database does all day.
    load = subprocess.Popen(_pgbench("-c", "4", "-j", "2", "-R", "40", "-T", str(int(WINDOW) + 20), url),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        report = server.diagnose(tmp_path / "report", window=WINDOW, alert="routine check")
    finally:
        load.terminate()
        load.wait(timeout=30)
    assert report.diagnosis is not None and report.diagnosis.abnormal_metrics, "the load itself is visible against the quiet baseline"
    assert report.root_causes == []
    assert [f for f in report.findings if f.is_problem] == []
