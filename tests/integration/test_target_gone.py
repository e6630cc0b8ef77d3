"""A target that goes away mid-run: the workers wait for it with growing pauses for a bounded time,
then the summary says the review is incomplete instead of reporting "0 problems" as if all were well."""

from __future__ import annotations

import re
from pathlib import Path

from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.models import Report
from dbcrew.roles.crew.context import RunContext
from dbcrew.roles.crew.run import Initialized, initialize
from dbcrew.roles.report.deadline import RUN_DEADLINE
from dbcrew.roles.spine import PlainPhases, review
from dbcrew.settings.run import Settings
from dbcrew.settings.thresholds import Thresholds
from dbcrew.targets import parse_target

WAIT = 2.0


def review_while(action: str, tmp_path: Path, settings: Settings) -> Report:
    """A review of a server of its own (1 s window) that `action`s ("stop", "restart") between the
    plan and the window."""
    server = EmbeddedPostgres(tmp_path / "data").start()

    class ServerActsAfterPlanning(PlainPhases):
        @staticmethod
        def initialize(run: RunContext) -> Initialized:
            planned = initialize(run)
            getattr(server, action)()
            return planned

    try:
        run = RunContext(
            target=parse_target(server.dsn()),
            out_dir=tmp_path / "report",
            settings=settings.model_copy(update={"window_seconds": 1, "activity_samples": 2}),
        )
        return review(run, ServerActsAfterPlanning)
    finally:
        server.stop()


def test_a_target_that_goes_away_makes_an_incomplete_review_that_says_so(tmp_path: Path) -> None:
    report = review_while(
        "stop", tmp_path, Settings(target_wait_seconds=WAIT, outage_wait_seconds=WAIT)
    )
    assert report.summary.startswith(f"incomplete: target unreachable for {WAIT:.0f} s. "), (
        report.summary
    )
    assert report.partial.startswith("incomplete: target unreachable")
    assert not [
        c for c in report.coverage if c.status.value == "ran" and c.check != RUN_DEADLINE
    ], "no check can have run without its target"
    waits = [
        float(w) for d in report.decisions for w in re.findall(r"waits up to (\d+) s", d.remedy)
    ]
    assert sum(waits) <= WAIT, (
        f"the retries' waits for a gone target stay within outage_wait_seconds: {waits}"
    )
    assert f"target unreachable for {WAIT:.0f} s" in (tmp_path / "report" / "report.md").read_text()


def test_a_restart_during_the_review_is_reported_and_its_cold_cache_not_judged(
    tmp_path: Path,
) -> None:
    """The server restarts between the probe and the window: the review goes on (it waits for the
    server), but the report says it restarted, the run is partial, and the window after the restart
    (a cold cache) is not judged, even where a warm one would have been."""
    report = review_while(
        "restart",
        tmp_path,
        # Judge the ratio on any traffic: the review's own reads of a cold cache are some.
        Settings(target_wait_seconds=30, thresholds=Thresholds(cache_min_block_accesses=1)),
    )
    assert not [f for f in report.findings if f.code == "cache_hit_ratio_low"], report.findings
    assert report.summary.startswith("incomplete: the target restarted during the review"), (
        report.summary
    )
    assert "the target restarted during the review" in report.partial
    cache = next(c for c in report.coverage if c.check == "check_cache_hit_ratio")
    assert cache.status.value == "ran" and cache.unjudged == ["cache_hit_ratio_low"]
    assert "the server restarted at" in cache.reason and "not judged" in cache.reason
    vacuum = next(c for c in report.coverage if c.check == "check_vacuum_health")
    assert "dead_tuples_high" in vacuum.unjudged
    assert (
        "the target restarted during the review" in (tmp_path / "report" / "report.md").read_text()
    )
