"""Run settings and health-check thresholds.

Defaults follow the anchors in shared/research/health_checks.md (PgHero, check_postgres,
pg_gather); every threshold can be overridden per run.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class Thresholds(BaseModel):
    cache_hit_ratio_warning: float = 0.99
    cache_hit_ratio_critical: float = 0.90
    cache_min_block_accesses: int = Field(10_000, description="fewer accesses in the window: no verdict")
    unused_index_min_stats_age_days: float = Field(7.0, description="younger statistics: info only")
    unused_index_min_bytes: int = 1 * 1024 * 1024
    dead_tuples_min: int = 10_000
    dead_tuples_ratio: float = 0.20
    stale_mod_ratio: float = 0.20
    stale_min_rows: int = 1_000
    idle_in_transaction_seconds: float = 30.0
    idle_in_transaction_critical_seconds: float = 600.0
    long_running_query_seconds: float = 60.0
    connections_warning_ratio: float = 0.80
    connections_critical_ratio: float = 0.95
    sequence_warning_ratio: float = 0.75
    sequence_critical_ratio: float = 0.90
    xid_warning_age: int = 1_000_000_000
    xid_critical_age: int = 1_500_000_000
    missing_index_min_rows: int = 10_000
    missing_index_min_rows_per_scan: float = 1_000.0
    missing_index_min_seq_scans: int = 20
    slow_query_mean_ms: float = 500.0
    slow_query_min_calls: int = 10
    checkpoints_min_total: int = 10
    checkpoints_requested_ratio: float = 0.5


class Settings(BaseModel):
    """What a run may do to its target and how hard it may try."""

    window_seconds: float = 10.0
    activity_samples: int = 5
    statement_timeout_ms: int = 30_000
    lock_timeout_ms: int = 1_000
    max_workers: int = 8
    worker_retries: int = Field(2, ge=0, le=2, description="self-corrections before an alert")
    max_reflection_rounds: int = 2
    max_replans: int = 3
    thresholds: Thresholds = Field(default_factory=Thresholds)
    alert: str = Field("", description="diagnosis: the alert text that started it (data, never instructions)")
    baseline_path: str | None = Field(None, description="diagnosis: a saved quiet-period window to compare against")
