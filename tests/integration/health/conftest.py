"""The clinic server: every per-object and server-wide condition, two standbys, one review.

Its own embedded server, because several conditions are server-wide (requested checkpoints, a
hazardous setting, connections, replication) and the wraparound specimens need no other
session holding the xmin horizon back.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.models.report import Report
from dbcrew.roles.crew.context import RunContext
from dbcrew.roles.spine import PlainPhases
from dbcrew.roles.spine import review as review_run
from dbcrew.settings.run import Settings
from dbcrew.settings.thresholds import Thresholds
from dbcrew.targets import parse_target
from tests.integration.health import clinic

# Per-run overrides, so that conditions which take days or billions of transactions in
# production show up in seconds. The defaults are unit-tested in tests/unit/test_checks.py.
CLINIC_THRESHOLDS = Thresholds(
    unused_index_min_stats_age_days=0,
    xid_warning_age=2_000,
    mxid_warning_age=20,
    long_running_query_seconds=2,
    idle_in_transaction_seconds=2,
    slow_query_mean_ms=50,
    slow_query_min_total_ms=500,  # the slow specimen takes 720 ms in all
    slow_query_min_share=0,  # the build's bulk loads dominate the clinic's statement time
    temp_spill_warning_bytes=2**20,
    bloat_min_wasted_bytes=2**20,
    slot_inactive_grace_seconds=0,  # the clinic's stale slot was created seconds before the review
    # The clinic's server starts minutes before its review; its cache specimen is a table larger than
    # shared_buffers scanned in the window, which misses however warm the cache (tests/.../clinic.py).
    server_warm_up_seconds=0,
)
MAX_CONNECTIONS = 40
IDLE_CONNECTIONS = (
    24  # with the 8 specimen sessions: 32 of 37 usable, whatever the review itself opens
)


def review(
    dsn: str, out: Path, thresholds: Thresholds = CLINIC_THRESHOLDS, window: float = 3.0
) -> Report:
    run = RunContext(
        target=parse_target(dsn),
        out_dir=out,
        settings=Settings(
            window_seconds=window, activity_samples=4, max_workers=4, thresholds=thresholds
        ),
    )
    return review_run(run, PlainPhases)


@dataclass
class Clinic:
    server: EmbeddedPostgres
    dsn: str
    report: Report
    pids: dict[str, int]
    query_ids: dict[str, int]


@pytest.fixture(scope="package")
def clinic_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedPostgres]:
    root = tmp_path_factory.mktemp("clinic")
    server = EmbeddedPostgres(
        root / "primary",
        settings={
            "max_connections": str(MAX_CONNECTIONS),
            "checkpoint_completion_target": "0.5",
            "shared_buffers": "'16MB'",
            "autovacuum_naptime": "1h",
            "max_wal_size": "'32MB'",
            "min_wal_size": "'32MB'",  # every WAL segment ended requests a checkpoint
        },
    ).start()
    standbys = [server.standby(root / name, name) for name in ("steady", "paused")]
    standbys[1].psql("SELECT pg_wal_replay_pause();")
    server.psql(
        "SELECT pg_create_physical_replication_slot('stale_slot', true); CREATE DATABASE clinic;"
    )
    clinic.build(server.dsn("clinic"))
    yield server
    for standby in standbys:
        standby.stop()
    server.stop()


@pytest.fixture(scope="package")
def examined(clinic_server: EmbeddedPostgres, tmp_path_factory: pytest.TempPathFactory) -> Clinic:
    dsn = clinic_server.dsn("clinic")
    query_ids = {
        "slow": clinic.query_id(dsn, "SELECT pg_sleep(%"),
        "fast": clinic.query_id(dsn, "SELECT $1 + $2%"),
    }
    held, pids = clinic.hold(dsn, IDLE_CONNECTIONS)
    try:
        report = review(dsn, tmp_path_factory.mktemp("clinic-report"))
    finally:
        held.close()
    return Clinic(server=clinic_server, dsn=dsn, report=report, pids=pids, query_ids=query_ids)
