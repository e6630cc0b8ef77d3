"""The pure parts of the new health rules: bloat arithmetic, settings advice, coverage reasons, machine locality."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import dbcrew.operators  # noqa: F401
from dbcrew.operators.checks.bloat import estimate_btree, estimate_table
from dbcrew.operators.checks.configuration import check_settings
from dbcrew.operators.checks.database import wal_checkpoint_share
from dbcrew.operators.collect.catalog import SettingRow
from dbcrew.operators.collect.machine import MachineRow, target_is_local
from dbcrew.operators.registry import OperatorContext
from dbcrew.operators.stat_views import CheckpointerRow
from dbcrew.settings.run import Machine, Settings
from dbcrew.targets import parse_target
from dbcrew.workspace import Workspace
from tests.rows import land_rows

GB = 2**30


def test_a_packed_table_has_no_estimated_waste_and_a_two_thirds_deleted_one_has_two_thirds():
    # 150,000 rows of (int, md5 text): 24-byte header + 40 bytes of data + 4-byte item pointer = 68 bytes.
    packed = estimate_table(
        relpages=1250, reltuples=150_000, data_width=37, columns=2, has_nulls=False, fillfactor=100
    )
    assert packed.ratio(1250) < 0.01
    thinned = estimate_table(
        relpages=1250, reltuples=50_000, data_width=37, columns=2, has_nulls=False, fillfactor=100
    )
    assert 0.6 < thinned.ratio(1250) < 0.7


def test_fillfactor_is_not_waste():
    half_full = estimate_table(
        relpages=2500, reltuples=150_000, data_width=37, columns=2, has_nulls=False, fillfactor=50
    )
    assert half_full.ratio(2500) < 0.05


def test_btree_estimate_counts_the_metapage_and_default_fillfactor():
    # An int4 primary key over 150,000 rows measures 412 pages on PostgreSQL 18.
    fresh = estimate_btree(relpages=412, reltuples=150_000, data_width=4, fillfactor=90)
    assert fresh.ratio(412) < 0.01
    assert (
        estimate_btree(relpages=1400, reltuples=150_000, data_width=4, fillfactor=90).ratio(1400)
        > 0.6
    )


DEFAULTS = [
    ("shared_buffers", "16384", "8kB"),
    ("effective_cache_size", "524288", "8kB"),
    ("work_mem", "4096", "kB"),
    ("maintenance_work_mem", "65536", "kB"),
    ("max_connections", "100", None),
    ("checkpoint_completion_target", "0.9", None),
    ("random_page_cost", "4", None),
    ("max_wal_size", "1024", "MB"),
    ("autovacuum_vacuum_scale_factor", "0.2", None),
]


def advise(tmp_path: Path, settings: list[tuple], memory: int | None) -> dict[str, str]:
    ws = Workspace(tmp_path / "w.duckdb")
    land_rows(
        ws,
        "settings",
        SettingRow,
        [
            SettingRow(name, setting, unit, "default", setting, setting, "user", "string")
            for name, setting, unit in settings
        ],
    )
    land_rows(
        ws,
        "machine",
        MachineRow,
        [MachineRow(memory, 2 if memory else None, "declared" if memory else "unknown")],
    )
    ctx = OperatorContext(
        target=parse_target("postgresql://u@db.example:5432/x"),
        workspace=ws,
        settings=Settings(),
        brief=None,
        run_dir=tmp_path,
    )
    return {f.object: f.severity.value for f in check_settings(ctx).findings}


def test_defaults_on_a_big_machine_are_sizing_advice_not_problems(tmp_path):
    advice = advise(tmp_path, DEFAULTS, 64 * GB)
    assert advice["shared_buffers"] == "info" and advice["effective_cache_size"] == "info"
    assert set(advice.values()) == {"info"}


def test_hazards_are_warnings_whatever_the_machine(tmp_path):
    hazardous = [
        row for row in DEFAULTS if row[0] not in ("checkpoint_completion_target", "work_mem")
    ]
    hazardous += [
        ("checkpoint_completion_target", "0.5", None),
        ("work_mem", "1048576", "kB"),
    ]  # 1 GB x 100 connections
    advice = advise(tmp_path, hazardous, 16 * GB)
    assert advice["checkpoint_completion_target"] == "warning" and advice["work_mem"] == "warning"


def test_without_the_machine_size_no_sizing_advice_is_given(tmp_path):
    advice = advise(tmp_path, DEFAULTS, None)
    assert "shared_buffers" not in advice and "effective_cache_size" not in advice
    assert advice == {"random_page_cost": "info"}


def test_declared_machine_wins_and_loopback_targets_are_local():
    assert Settings(machine=Machine(memory_bytes=GB, cpus=2)).machine.memory_bytes == GB
    assert target_is_local("postgresql://u@127.0.0.1:5432/x") and target_is_local(
        "postgresql://u@localhost/x"
    )
    assert target_is_local("postgresql://u@%2Ftmp%2Fsock/x") and not target_is_local(
        "postgresql://u@db.example.com/x"
    )


def test_threshold_overrides_are_checked_by_name_type_and_sign():
    from dbcrew.settings.overrides import parse_overrides
    from dbcrew.settings.thresholds import Thresholds

    assert parse_overrides(["long_running_query_seconds=300", "dead_tuples_ratio=0.3"]) == {
        "long_running_query_seconds": 300.0,
        "dead_tuples_ratio": 0.3,
    }
    assert Thresholds(**parse_overrides(["dead_tuples_min=500"])).dead_tuples_min == 500
    for bad, said in (
        ("nope=1", "NAME=VALUE"),
        ("dead_tuples_min", "NAME=VALUE"),
        ("dead_tuples_min=x", "not a number"),
        ("dead_tuples_min=-1", "negative"),
    ):
        with pytest.raises(ValueError, match=said) as raised:
            parse_overrides([bad])
        assert "\n" not in str(raised.value)


def test_only_checkpoints_the_wal_written_could_request_count_against_max_wal_size():
    t = Settings().thresholds
    # Twenty restarts or CHECKPOINT commands on a database that wrote two checkpoints' worth of WAL.
    restarts = CheckpointerRow(
        source="checkpointer", timed=4, requested=20, buffers_written=0, wal_checkpoints_max=2
    )
    assert wal_checkpoint_share(restarts, t) is None
    # The same counters where the WAL could have requested every one of them.
    driven = replace(restarts, wal_checkpoints_max=500)
    assert wal_checkpoint_share(driven, t) == pytest.approx(20 / 24)
    # Too few checkpoints to judge, however they were requested.
    assert wal_checkpoint_share(replace(driven, timed=1, requested=5), t) is None
