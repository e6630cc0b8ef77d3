"""When a database's counters began: a reset, a discard at the server's start, or never (complete)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dbcrew.models import Brief
from dbcrew.operators.statistics_age import counters_began, young_counters

NOW = datetime(2026, 11, 26, 1, 0, 0, tzinfo=UTC)


def brief(
    *, initdb: datetime | None, started: datetime, shared: datetime, reset: datetime | None = None
) -> Brief:
    return Brief(
        server_version="18.0",
        server_version_num=180000,
        database="shop",
        current_user="watcher",
        system_identifier=None if initdb is None else str(int(initdb.timestamp()) << 32 | 1234),
        probed_at=NOW,
        server_started_at=started,
        shared_stats_reset_at=shared,
        stats_reset_at=reset,
    )


def test_a_fresh_cluster_counts_from_its_beginning_and_is_judged_normally():
    started = NOW - timedelta(seconds=20)
    fresh = brief(initdb=started - timedelta(seconds=1), started=started, shared=started)
    assert counters_began(fresh) is None and young_counters(fresh, 3600) is None


def test_a_clean_restart_keeps_the_counters():
    old = NOW - timedelta(days=30)
    restarted = brief(initdb=old, started=NOW - timedelta(seconds=20), shared=old)
    assert young_counters(restarted, 3600) is None


def test_a_start_without_statistics_of_an_old_cluster_is_a_discard():
    started = NOW - timedelta(seconds=20)
    crashed = brief(initdb=NOW - timedelta(days=30), started=started, shared=started)
    began = counters_began(crashed)
    assert began is not None and began.at == started and began.seconds == 20
    assert young_counters(crashed, 3600) == (
        "statistics discarded when the server started 20 s ago at 2026-11-26 00:59:40 UTC:"
        " counters younger than 3600 s cannot show what is there, and a finding missing now is not resolved"
    )
    assert young_counters(crashed, 10) is None  # old enough by the threshold
    # A role that may not read the system identifier cannot tell a first start: it says so.
    assert young_counters(brief(initdb=None, started=started, shared=started), 3600) is not None


def test_a_reset_counts_from_the_reset_whatever_the_server_did():
    old = NOW - timedelta(days=30)
    reset = brief(initdb=old, started=old, shared=old, reset=NOW - timedelta(seconds=12))
    assert (young_counters(reset, 3600) or "").startswith(
        "statistics reset 12 s ago at 2026-11-26 00:59:48 UTC"
    )
