"""A run's levels: the health checks' (`Thresholds`, one field each), the diagnosis experts' nested in it.

Threshold defaults follow the anchors in shared/research/health_checks.md (PgHero, check_postgres,
pg_gather); every threshold can be overridden per run (dbcrew.settings.overrides). Why a level is
where it is: docs/review.md, "Why these levels".
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, model_validator

from dbcrew.settings.bounds import Bounds
from dbcrew.settings.diagnosis import DiagnosisThresholds


class Thresholds(Bounds):
    """A run's levels: the health checks' (one field each) and the diagnosis experts' (`diagnosis`)."""

    # cache_hit_ratio_low
    cache_hit_ratio_warning: float = 0.99
    cache_hit_ratio_critical: float = 0.90
    cache_min_block_accesses: int = Field(
        10_000, description="fewer accesses in the window: no verdict"
    )
    # every check that judges by cumulative counters (dbcrew/operators/statistics_age.py)
    counters_min_age_seconds: float = Field(
        3600.0,
        ge=0,
        description="counters younger than this (reset, discarded, restarted during the run):"
        " the checks judging by them are partial and their earlier findings are not resolved",
    )
    # cache_hit_ratio_low, and the cache as a symptom for setting_suboptimal (dbcrew/operators/statistics_age.py)
    server_warm_up_seconds: float = Field(
        300.0,
        ge=0,
        description="a server started this recently before the review (or during it) has a cold"
        " cache: the checks judged on what a start empties are partial, never a finding",
    )
    # index_unused
    unused_index_min_stats_age_days: float = Field(7.0, description="younger statistics: info only")
    unused_index_min_bytes: int = 1 * 1024 * 1024
    # dead_tuples_high, statistics_stale
    dead_tuples_min: int = 10_000
    dead_tuples_ratio: float = 0.20
    stale_mod_ratio: float = 0.20
    stale_min_rows: int = 1_000
    # Counts committed before an ANALYZE may land after it (docs/review.md, why these levels).
    stale_flush_grace_seconds: float = Field(
        15.0, ge=0, description="younger analyzes: changes since are judged only by growth"
    )
    # sessions: idle_in_transaction, long_running_query, connections_saturation
    idle_in_transaction_seconds: float = 30.0
    idle_in_transaction_critical_seconds: float = 600.0
    long_running_query_seconds: float = 60.0
    connections_warning_ratio: float = 0.80
    connections_critical_ratio: float = 0.95
    # sequence_exhaustion
    sequence_warning_ratio: float = 0.75
    sequence_critical_ratio: float = 0.90
    # xid_wraparound_risk, and who holds the xmin horizon back: a warning from xid_warning_age, or from
    # this share of the freeze limit (autovacuum_freeze_max_age, its multixact twin for
    # mxid_wraparound_risk) where autovacuum is off and only the server's forced vacuums will freeze
    xid_warning_age: int = 1_000_000_000
    xid_critical_age: int = 1_500_000_000
    freeze_max_age_near_ratio: float = Field(
        0.9,
        ge=0,
        le=1,
        description="share of autovacuum_freeze_max_age (or its multixact twin) from which an age"
        " with autovacuum off for it is xid_wraparound_risk (mxid_): a warning",
    )
    horizon_holder_min_age: int = Field(
        1_000_000,
        description="an xmin this many transactions old is named as holding"
        " back vacuum and freezing",
    )
    horizon_holder_min_seconds: float = Field(
        300.0, description="so is a transaction held open this long, whatever its age"
    )
    # index_missing
    missing_index_min_rows: int = 10_000
    missing_index_min_rows_per_scan: float = 1_000.0
    missing_index_min_seq_scans: int = 20
    hypo_min_cost_saving: float = Field(
        0.5, description="plan-cost drop a hypothetical index must bring (dexter: 50 %)"
    )
    # slow_query, checkpoints_too_frequent, temp_files_spill
    slow_query_mean_ms: float = 500.0
    slow_query_min_calls: int = 10
    slow_query_min_share: float = Field(
        0.02,
        ge=0,
        le=1,
        description="share of the workload's statement time a statement must take to be reported",
    )
    slow_query_min_total_ms: float = Field(
        1_000.0, ge=0, description="and this much time in all (an idle database's shares are large)"
    )
    checkpoints_min_total: int = 10
    checkpoints_requested_ratio: float = 0.5
    temp_spill_warning_bytes: int = Field(
        100 * 2**20, description="less spilled in the window: info"
    )
    # mxid_wraparound_risk
    mxid_warning_age: int = 400_000_000
    mxid_critical_age: int = 1_000_000_000
    # replication_lag
    replication_lag_warning_bytes: int = 16 * 2**20
    replication_lag_critical_bytes: int = 2**30
    replication_lag_warning_seconds: float = 60.0
    replication_lag_critical_seconds: float = 600.0
    slot_retained_critical_bytes: int = Field(
        2**30, description="an inactive slot retaining more WAL: critical"
    )
    slot_inactive_grace_seconds: float = Field(
        300.0,
        ge=0,
        description="a slot inactive for less (PostgreSQL 17+): its replica is"
        " restarting or failing over; named in the coverage, not a finding yet",
    )
    bloat_warning_ratio: float = Field(
        0.40, description="estimated wasted share of a relation (postgres-checkup)"
    )
    bloat_critical_ratio: float = 0.80
    bloat_min_wasted_bytes: int = Field(8 * 2**20, description="less waste is not worth a rebuild")
    indexes_too_many: int = Field(
        10,
        description="indexes on one table (PMM's advisor flags more than 10), for the"
        " health check and the diagnosis's index expert alike",
    )
    indexes_too_many_write_share: float = Field(
        0.5, description="share of row writes among reads and writes"
    )

    diagnosis: DiagnosisThresholds = Field(
        default_factory=DiagnosisThresholds,
        description="the diagnosis experts' levels (`diagnosis.NAME` in overrides)",
    )

    @model_validator(mode="before")
    @classmethod
    def _dotted_names(cls, data: Any) -> Any:
        """`diagnosis.NAME` keys into the nested model: overrides travel as one flat dict of numbers
        (--threshold, a flow's `thresholds` parameter), the diagnosis's among them."""
        if not isinstance(data, dict) or not any("." in str(key) for key in data):
            return data
        nested = {key: value for key, value in data.items() if "." not in str(key)}
        for key, value in data.items():
            group, dot, name = str(key).partition(".")
            if dot:
                base = nested.get(group) or {}
                nested[group] = {
                    **(base.model_dump() if isinstance(base, BaseModel) else base),
                    name: value,
                }
        return nested
