"""A review right after a clean restart (fast shutdown): the cache is cold, and a cold cache is no
finding; the coverage says why and the summary says how long the server had been up.

Its own server: restarting the session's shared one would end every other test's sessions.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.models.report import Report
from dbcrew.settings.thresholds import Thresholds
from tests.integration.health.conftest import review

# A table four times shared_buffers: every scan of it reads from outside the buffers, so the window's
# hit ratio is low whenever a scan runs in it, and the check judging it would find it (the control).
SHARED_BUFFERS_MB = 16
JUDGES_ANY_TRAFFIC = Thresholds(cache_min_block_accesses=100)


@pytest.fixture(scope="module")
def restarted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedPostgres]:
    server = EmbeddedPostgres(
        tmp_path_factory.mktemp("restart") / "data",
        settings={"shared_buffers": f"'{SHARED_BUFFERS_MB}MB'"},
    ).start()
    server.psql("CREATE DATABASE warming;")
    with psycopg.connect(server.dsn("warming"), autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE wide (id int, pad text);"
            " INSERT INTO wide SELECT g, repeat('x', 200) FROM generate_series(1, 250000) g; ANALYZE wide"
        )
    server.restart()  # -m fast, as a DBA restarting to change a setting
    yield server
    server.stop()


def scanned_review(server: EmbeddedPostgres, out: Path, thresholds: Thresholds) -> Report:
    """A review while a client scans the wide table over and over (its blocks miss the buffers)."""
    done = threading.Event()

    def scan() -> None:
        with psycopg.connect(server.dsn("warming"), autocommit=True) as conn:
            while not done.is_set():
                conn.execute("SELECT count(*) FROM wide")
                done.wait(0.2)

    scanner = threading.Thread(target=scan)
    scanner.start()
    try:
        return review(server.dsn("warming"), out, thresholds=thresholds, window=2.0)
    finally:
        done.set()
        scanner.join()


def test_a_review_right_after_a_restart_has_no_cache_finding_and_says_why(
    restarted: EmbeddedPostgres, tmp_path: Path
) -> None:
    report = scanned_review(restarted, tmp_path / "cold", JUDGES_ANY_TRAFFIC)
    assert not [f for f in report.findings if f.code == "cache_hit_ratio_low"], report.findings
    cache = next(c for c in report.coverage if c.check == "check_cache_hit_ratio")
    assert cache.status.value == "ran" and cache.unjudged == ["cache_hit_ratio_low"]
    assert "the server started" in cache.reason and "before the review" in cache.reason
    started = report.summary.split("The server started ", 1)[1].split(" s before the review")[0]
    warm_up = JUDGES_ANY_TRAFFIC.server_warm_up_seconds
    assert 0 <= int(started) < warm_up, report.summary
    # The shared_buffers advice takes no symptom from a cold cache either, and says so.
    settings = next(c for c in report.coverage if c.check == "check_settings")
    assert "the cache hit ratio is no symptom" in settings.reason

    # The control: the same window judged as if the server had been up long enough is a finding.
    warm = scanned_review(
        restarted,
        tmp_path / "judged",
        JUDGES_ANY_TRAFFIC.model_copy(update={"server_warm_up_seconds": 0}),
    )
    assert "cache_hit_ratio_low" in {f.code for f in warm.findings}, warm.findings
    assert "The server started" not in warm.summary


def test_checkpointer_counters_reset_before_the_review_are_not_judged(
    restarted: EmbeddedPostgres, tmp_path: Path
) -> None:
    """The restart kept the checkpoint counters (initdb's), judged; a reset of them (a DBA's
    pg_stat_reset_shared) leaves nothing to judge yet, and the coverage says so."""
    before = review(
        restarted.dsn("warming"), tmp_path / "kept", thresholds=Thresholds(), window=0.5
    )
    kept = next(c for c in before.coverage if c.check == "check_checkpoints")
    assert kept.unjudged == [] and "reset" not in kept.reason, kept.reason
    restarted.psql("SELECT pg_stat_reset_shared('checkpointer');")
    after = review(
        restarted.dsn("warming"), tmp_path / "reset", thresholds=Thresholds(), window=0.5
    )
    reset = next(c for c in after.coverage if c.check == "check_checkpoints")
    assert reset.status.value == "ran" and reset.unjudged == ["checkpoints_too_frequent"]
    assert "checkpointer statistics reset" in reset.reason, reset.reason
