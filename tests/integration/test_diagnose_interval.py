"""Diagnosis of a past interval on a real PostgreSQL: watched, an anomaly injected and stopped, then diagnosed after it ended.

The watcher samples the server every second (a short interval keeps the test short) while it is
quiet, then while an injection (bench/injections.py) runs, then after it stopped; the diagnosis
runs once the anomaly is over, from the stored samples alone, on the same review path as a live
one, and names the injected cause. The watcher detected the anomaly as an incident while it ran
(and none while the server was quiet). `dbcrew incidents` listing it is tests/e2e/test_watching.py's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bench import injections
from bench.diagnose import DiagnosisServer
from dbcrew.models import Report
from dbcrew.models.interval import PastInterval
from dbcrew.operators.window.incidents import CLOSE_AFTER
from dbcrew.roles.crew.context import RunContext
from dbcrew.roles.spine import PlainPhases, review
from dbcrew.roles.watching import RoundReport, Watcher
from dbcrew.settings.run import Settings
from dbcrew.store.samples import open_samples
from dbcrew.targets import parse_target

EVERY = 1.0
QUIET_ROUNDS = 8  # passes before the anomaly: the baseline
ANOMALY_SECONDS = 10.0
# Passes after the anomaly ended: twice the calm ones that close an incident. Counted, not slept
# for: a round on a loaded host takes longer than EVERY and skips the ticks it missed.
ROUNDS_AFTER = 2 * CLOSE_AFTER


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DiagnosisServer]:
    started = DiagnosisServer.start(tmp_path_factory.mktemp("interval"), baseline_seconds=1.0)
    yield started
    started.stop()


def watch_an_anomaly(
    server: DiagnosisServer, cause: str
) -> tuple[PastInterval, str, list[datetime]]:
    """Watch the server quiet, then under `cause`, then quiet again; the interval the anomaly ran in
    full, the target's identity, and when each pass was taken."""
    rounds: list[RoundReport] = []
    quiet, after, stop = threading.Event(), threading.Event(), threading.Event()
    ended: list[datetime] = []

    def counted(report: RoundReport) -> None:
        rounds.append(report)
        if len(rounds) >= QUIET_ROUNDS:
            quiet.set()
        if ended and sum(r.at > ended[0] for r in rounds) >= ROUNDS_AFTER:
            after.set()

    watcher = Watcher([parse_target(server.dsn)], open_samples(), every=EVERY)
    thread = threading.Thread(
        target=watcher.run, kwargs={"on_round": counted, "pause": stop.wait}, daemon=True
    )
    thread.start()
    try:
        assert quiet.wait(timeout=120)
        with injections.injected(server.dsn, [cause], warmup=1.0):
            start = datetime.now(UTC)
            time.sleep(ANOMALY_SECONDS)
            end = datetime.now(UTC)
        ended.append(end)
        assert after.wait(timeout=120), "the watch goes on after the anomaly ended"
    finally:
        stop.set()
        thread.join(timeout=60)
    assert all(o.stored and not o.gap for r in rounds[1:] for o in r.outcomes)
    return (
        PastInterval(start=start, end=end),
        rounds[-1].outcomes[0].identity,
        [r.at for r in rounds],
    )


def diagnose(server: DiagnosisServer, interval: PastInterval, out: Path) -> Report:
    run = RunContext(
        target=parse_target(server.dsn),
        scenario="diagnose",
        interval=interval,
        out_dir=out,
        settings=Settings(alert="queries were slow last night"),
    )
    return review(run, PlainPhases)


# The statement each injection runs (bench/injections.py), as pg_stat_statements normalises it: the one that changed most.
# Lock contention after the fact is tests/e2e/test_watching.py's (an incident of the deployed watcher,
# diagnosed by its own run) and tests/integration/test_prometheus.py's: one injection less here (CI time).
# Many small inserts are not here: on a loaded 2-core machine their commits wait on WAL flushes and
# the cross review names sync_commit_pressure instead (the boundary issue 23 redraws by time
# explained); `python -m bench diagnose` measures them, live and past.
INJECTED = {
    "index_missing": "SELECT * FROM inj_fetch WHERE k = $1",
}


@pytest.mark.parametrize("cause", list(INJECTED))
def test_a_past_anomaly_is_diagnosed_from_the_stored_samples(
    server: DiagnosisServer, cause: str, tmp_path: Path
) -> None:
    interval, identity, passes = watch_an_anomaly(server, cause)
    (incident,) = open_samples().incidents(identity, interval.start - timedelta(hours=1))
    assert incident.closed and incident.signals, (
        "detected as it happened, over once it ended; none while quiet"
    )
    # Within two passes of the anomaly's start and end (2 s at EVERY on a quiet host): counted in
    # passes, as the detector counts, so a host whose rounds overrun EVERY is held to the same.
    during = [at for at in passes if interval.start < at < interval.end]
    assert len(during) >= 2, passes
    assert incident.started_at <= during[1] and incident.ended_at >= during[-2], (incident, passes)
    report = diagnose(server, interval, tmp_path / "report")
    found = [rc.code for rc in report.root_causes]
    assert cause in found, (
        f"{cause} not among {found}: {report.diagnosis.process if report.diagnosis else ''}"
    )
    assert report.interval == interval and report.schema_version == 1
    assert (
        report.diagnosis is not None and "the past interval" in report.diagnosis.anomaly_description
    )
    assert "the watcher's samples of the" in report.diagnosis.anomaly_description, (
        "the baseline is the target's own samples before"
    )
    unseen = {c.check: c.reason for c in report.coverage}
    assert (
        "plans are EXPLAINed now" in unseen["statement_plans"]
        and "between two samples" in unseen["ended_sessions"]
    )
    saved = Report.model_validate_json((tmp_path / "report" / "report.json").read_text())
    assert saved.interval == interval
    changed = report.diagnosis.changed_statements
    assert changed and INJECTED[cause] in changed[0].query, (
        f"the injected statement changed most: {[c.query for c in changed]}"
    )
    top = changed[0]
    assert top.time_ms_per_s_during > top.time_ms_per_s_before and top.calls_per_s_during > 0
    assert saved.diagnosis is not None and saved.diagnosis.changed_statements == changed
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert (
        "### Statements that changed most" in markdown
        and "inj_" in markdown.split("### Statements that changed most")[1].split("###")[0]
    ), "report.md lists them in its diagnosis section"
