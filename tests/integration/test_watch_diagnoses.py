"""`dbcrew watch` in the foreground diagnoses its incidents, and `dbcrew incidents` then shows each with its causes.

As a user without a server runs it: `dbcrew watch` (a process of its own) samples a real embedded
PostgreSQL every second while it is quiet, then while an injection (bench/injections.py) runs, then
quiet again; the incident closes and the watcher diagnoses it in the background (the crew on the
stored samples, as `dbcrew diagnose --from --to` runs it) and keeps the diagnosis with the incident.
Ctrl-C ends the watch with 130, and `dbcrew incidents --json` lists the incident with its root causes
and its report, whose file is the diagnosis of the incident's interval with the incident's picture
(its signals against the usual band: dbcrew/operators/diagnose/incident_chart.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bench import injections
from bench.diagnose import DiagnosisServer
from dbcrew.lab.waiting import wait_for
from dbcrew.models import Report
from dbcrew.store.samples import Incident, open_samples
from dbcrew.targets import parse_target
from tests.cli_here import dbcrew_here

QUIET_PASSES = 8  # before the anomaly: the detector's baseline
ANOMALY_SECONDS = 10.0
CAUSE = "index_missing"  # the injection tests/integration/test_diagnose_interval.py names from history too


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DiagnosisServer]:
    started = DiagnosisServer.start(tmp_path_factory.mktemp("watched"), baseline_seconds=1.0)
    yield started
    started.stop()


def test_the_foreground_watcher_diagnoses_its_incident_and_incidents_lists_the_causes(
    server: DiagnosisServer, private_store: Path, tmp_path: Path
) -> None:
    began = datetime.now(UTC)
    watcher = subprocess.Popen(
        [sys.executable, "-m", "dbcrew.cli", "watch", server.dsn, "--every", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "DBCREW_REPORTS_DIR": str(tmp_path / "reports")},
    )
    try:
        assert watcher.stdout is not None
        for _ in range(
            QUIET_PASSES + 1
        ):  # the first line says what it watches, then a line per pass
            assert watcher.stdout.readline(), "the watcher printed its passes"
        store = open_samples(str(private_store))
        identity = store.identity_of(parse_target(server.dsn).display)
        assert identity is not None
        with injections.injected(server.dsn, [CAUSE], warmup=1.0):
            time.sleep(ANOMALY_SECONDS)

        def diagnosed() -> list[Incident]:
            return [i for i in store.incidents(identity, began) if i.closed and i.diagnosis]

        (incident,) = wait_for(diagnosed, "the incident to close and its diagnosis to be kept")
    finally:
        watcher.send_signal(signal.SIGINT)
        _out, err = watcher.communicate(timeout=60)
    assert watcher.returncode == 130, err[-2000:]
    assert "not diagnosed" not in err, "nothing was left undiagnosed"

    listed = dbcrew_here("incidents", server.dsn, "--json", "--since", "-30m")
    assert listed.returncode == 0, listed.stderr
    (shown,) = json.loads(listed.stdout)
    assert shown["started_at"][:19] == f"{incident.started_at:%Y-%m-%dT%H:%M:%S}"
    diagnosis = shown["diagnosis"]
    assert diagnosis is not None and diagnosis["while_open"] is False
    codes = [c["code"] for c in diagnosis["causes"]]
    assert CAUSE in codes, f"{CAUSE} not among {codes}"
    named = next(c for c in diagnosis["causes"] if c["code"] == CAUSE)
    assert "inj_fetch" in named["object"], named
    assert shown["diagnoses"] == [diagnosis]
    assert Path(diagnosis["report"]).is_relative_to(tmp_path / "reports")
    report = Report.model_validate_json(Path(diagnosis["report"]).read_text())
    assert report.run_id == diagnosis["run_id"] and report.interval is not None
    assert report.interval.start == incident.started_at, "the report is of the incident's interval"
    assert [rc.code for rc in report.root_causes] == codes
    assert "charts/incident.png" in report.charts, report.charts
    assert Path(diagnosis["report"]).with_name("charts").joinpath("incident.png").is_file()
    caption = report.captions["charts/incident.png"]
    assert "usual band" in caption and "normal passes of the hour before it" in caption, caption
    assert "charts/incident.png" in Path(diagnosis["report"]).with_name("report.md").read_text()

    text = dbcrew_here("incidents", server.dsn, "--since", "-30m")
    assert text.returncode == 0, text.stderr
    assert f"causes: {CAUSE}" in text.stdout or f"; {CAUSE}" in text.stdout, text.stdout
    assert f"report: {diagnosis['report']}" in text.stdout, text.stdout
    assert began - timedelta(seconds=1) <= incident.started_at
