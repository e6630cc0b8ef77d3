"""Diagnosis from history against live diagnosis, on the same injections (`python -m bench watch --suite accuracy`).

For each injected cause (bench/injections.py), on one embedded PostgreSQL: the watcher samples the
server every `--every` seconds from before the injection to after it; while the injection runs,
a live diagnosis samples its own window (against the quiet baseline recorded at the start); the
injection runs on for at least ANOMALY_PASSES of the watcher's passes (a minute at 15 s), and once
it has ended, the interval it ran in is diagnosed from the watcher's samples alone. Both are
scored with D-Bot's accuracy (bench/diagnose.py) and printed side by side, with whether the
watcher recorded the anomaly as an incident and whether the report from history has its time
attribution (the watcher's session samples: dbcrew/operators/window/session_time.py).
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psutil

from bench import injections
from bench.diagnose import WINDOW_SECONDS, DiagnosisServer, accuracy
from dbcrew.models import Report
from dbcrew.models.interval import PastInterval
from dbcrew.roles.crew.context import RunContext
from dbcrew.roles.spine import PlainPhases, review
from dbcrew.roles.watching import RoundReport, Watcher
from dbcrew.settings.run import Settings
from dbcrew.store.samples import open_samples
from dbcrew.targets import parse_target

QUIET_ROUNDS = 10
AFTER_SECONDS = 6.0
ANOMALY_PASSES = 4  # passes of the anomaly in the interval diagnosed from history, at least


def main(argv: Sequence[str] = ()) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench watch --suite accuracy")
    parser.add_argument(
        "--causes",
        default=",".join(injections.SINGLE),
        help="comma-separated causes of bench/injections.py",
    )
    parser.add_argument("--every", type=float, default=1.0)
    args = parser.parse_args(list(argv))
    causes = [c for c in args.causes.split(",") if c]
    unknown = [c for c in causes if c not in injections.RECIPES]
    if unknown:
        parser.error(f"unknown cause(s) {', '.join(unknown)}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="dbcrew-bench-history-") as tmp:
        workdir = Path(tmp)
        server = DiagnosisServer.start(workdir)
        try:
            for i, cause in enumerate(causes):
                live_report, history_report, incident = case(
                    server, cause, workdir / f"case{i}", args.every
                )
                live = [rc.code for rc in live_report.root_causes]
                history = [rc.code for rc in history_report.root_causes]
                attributed = bool(
                    history_report.diagnosis and history_report.diagnosis.time_attribution
                )
                rows.append(
                    (
                        cause,
                        accuracy([cause], live),
                        accuracy([cause], history),
                        incident,
                        attributed,
                    )
                )
                print(
                    f"{cause:28} live {rows[-1][1]:.2f} ({', '.join(live) or '-'})  history {rows[-1][2]:.2f}"
                    f" ({', '.join(history) or '-'})  incident: {'yes' if incident else 'no'}"
                    f"  history's time attribution: {'yes' if attributed else 'no'}",
                    flush=True,
                )
        finally:
            server.stop()
    n = len(rows)
    print(
        f"accuracy over {n} causes: live {sum(r[1] for r in rows) / n:.3f}, from history {sum(r[2] for r in rows) / n:.3f};"
        f" incidents recorded for {sum(r[3] for r in rows)} of {n}; time attribution from history in"
        f" {sum(r[4] for r in rows)} of {n}; load average {psutil.getloadavg()[0]:.1f} on {psutil.cpu_count()} cores"
    )
    print(
        f"reproduce: python -m bench watch --suite accuracy --causes {','.join(causes)} --every {args.every:g}"
    )


def case(
    server: DiagnosisServer, cause: str, out: Path, every: float
) -> tuple[Report, Report, bool]:
    """One injection, diagnosed live while it runs and from the stored samples once it ended; and whether it became an incident."""
    store = open_samples(str(out / "store.duckdb"))
    rounds: list[RoundReport] = []
    quiet, stop = threading.Event(), threading.Event()

    def counted(report: RoundReport) -> None:
        rounds.append(report)
        if len(rounds) >= QUIET_ROUNDS:
            quiet.set()

    watcher = threading.Thread(
        target=Watcher([parse_target(server.dsn)], store, every=every).run,
        kwargs={"on_round": counted, "pause": stop.wait},
        daemon=True,
    )
    watcher.start()
    try:
        quiet.wait(timeout=300)
        with injections.injected(server.dsn, [cause], catalogue=server.catalogue):
            start = datetime.now(UTC)
            live = server.diagnose(
                out / "live", WINDOW_SECONDS, alert="queries are slower than usual"
            )
            # At a long interval the anomaly runs on until the watcher stored ANOMALY_PASSES passes of it.
            time.sleep(
                max(ANOMALY_PASSES * every - (datetime.now(UTC) - start).total_seconds(), 0.0)
            )
            end = datetime.now(UTC)
        time.sleep(max(AFTER_SECONDS, 2 * every))
    finally:
        stop.set()
        watcher.join(timeout=60)
    interval = PastInterval(start=start, end=end)
    run = RunContext(
        target=parse_target(server.dsn),
        scenario="diagnose",
        interval=interval,
        out_dir=out / "history",
        settings=Settings(
            alert="queries are slower than usual", store_url=str(out / "store.duckdb")
        ),
    )
    history = review(run, PlainPhases)
    identity = rounds[-1].outcomes[0].identity
    incident = any(
        i.started_at <= end and i.ended_at >= start
        for i in store.incidents(identity, start - timedelta(hours=1))
    )
    return live, history, incident
