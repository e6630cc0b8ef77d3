"""A target that goes away mid-run: the workers wait for it with growing pauses for a bounded time,
then the summary says the review is incomplete instead of reporting "0 problems" as if all were well."""

from __future__ import annotations

import re
from pathlib import Path

from dbcrew.settings import Settings
from dbcrew.targets import parse_target
from flows.phases import PlainPhases
from flows.review import review
from lab.embedded import EmbeddedPostgres
from roles.crew.run import Initialized, RunContext, initialize

WAIT = 2.0


def test_a_target_that_goes_away_makes_an_incomplete_review_that_says_so(tmp_path: Path) -> None:
    server = EmbeddedPostgres(tmp_path / "data").start()

    class ServerStopsAfterPlanning(PlainPhases):
        @staticmethod
        def initialize(run: RunContext) -> Initialized:
            planned = initialize(run)
            server.stop()
            return planned

    try:
        run = RunContext(
            target=parse_target(server.dsn()),
            out_dir=tmp_path / "report",
            settings=Settings(
                window_seconds=1,
                activity_samples=2,
                target_wait_seconds=WAIT,
                outage_wait_seconds=WAIT,
            ),
        )
        report = review(run, ServerStopsAfterPlanning)
    finally:
        server.stop()
    assert report.summary.startswith(f"incomplete: target unreachable for {WAIT:.0f} s. "), (
        report.summary
    )
    assert report.partial.startswith("incomplete: target unreachable")
    assert not [c for c in report.coverage if c.status.value == "ran"], (
        "no check can have run without its target"
    )
    waits = [
        float(w) for d in report.decisions for w in re.findall(r"waits up to (\d+) s", d.remedy)
    ]
    assert sum(waits) <= WAIT, (
        f"the retries' waits for a gone target stay within outage_wait_seconds: {waits}"
    )
    assert f"target unreachable for {WAIT:.0f} s" in (tmp_path / "report" / "report.md").read_text()
