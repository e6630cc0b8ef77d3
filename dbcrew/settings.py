"""Run settings and health-check thresholds.

Defaults follow the anchors in shared/research/health_checks.md (PgHero, check_postgres,
pg_gather); every threshold can be overridden per run.
"""

from __future__ import annotations

import math
import os
import re
from decimal import Decimal
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

REPORTS_ENV = "DBCREW_REPORTS_DIR"
RETENTION_ENV = "DBCREW_REPORTS_RETENTION_DAYS"


def reports_root() -> Path:
    """Where a run writes its report when no directory is given: $DBCREW_REPORTS_DIR, else ./reports."""
    return Path(os.environ.get(REPORTS_ENV) or "reports").expanduser()


def cache_root() -> Path:
    """Where built indexes live between runs (the manual's search index, the question router):
    $DBCREW_CACHE_DIR, else $XDG_CACHE_HOME/dbcrew, else ~/.cache/dbcrew."""
    explicit = os.environ.get("DBCREW_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache").expanduser() / "dbcrew"


def reports_retention_days() -> float:
    """How long reports stay under reports_root() on a worker's disk ($DBCREW_REPORTS_RETENTION_DAYS, 14).

    A worker's disk is not the record: the Prefect artifacts and the history store are.
    """
    raw = os.environ.get(RETENTION_ENV, "14")
    try:
        days = float(raw)
    except ValueError:
        raise ValueError(f"{RETENTION_ENV}={raw!r} is not a number of days") from None
    if days < 0:
        raise ValueError(f"{RETENTION_ENV} must not be negative")
    return days


class Ablations(BaseModel):
    """Recovery features that can be switched off, to measure what each is worth (ROMAS's ablations)."""

    monitor: bool = Field(True, description="classify alerts; off: a failed task just fails and its dependents skip")
    reflection: bool = Field(True, description="plan self-reflection and worker self-correction (retries, reconnect-and-resume)")
    gap_narrow: bool = Field(True, description="minimal plan edits; off: a re-plan takes the whole new plan and reruns all")
    memory: bool = Field(True, description="long-term lessons across runs on the same target")

    def off(self) -> list[str]:
        return [f"no-{name.replace('_', '-')}" for name, on in self.model_dump().items() if not on]


class Thresholds(BaseModel):
    model_config = ConfigDict(allow_inf_nan=False)  # a NaN threshold would silently never fire

    # cache_hit_ratio_low
    cache_hit_ratio_warning: float = 0.99
    cache_hit_ratio_critical: float = 0.90
    cache_min_block_accesses: int = Field(10_000, description="fewer accesses in the window: no verdict")
    # index_unused
    unused_index_min_stats_age_days: float = Field(7.0, description="younger statistics: info only")
    unused_index_min_bytes: int = 1 * 1024 * 1024
    # dead_tuples_high, statistics_stale
    dead_tuples_min: int = 10_000
    dead_tuples_ratio: float = 0.20
    stale_mod_ratio: float = 0.20
    stale_min_rows: int = 1_000
    # An analyze younger than this is not judged by the changes counted since: they may predate it
    # (a backend flushes its table statistics at most once a second, possibly after the ANALYZE).
    stale_min_age_seconds: float = 300.0
    # sessions: idle_in_transaction, long_running_query, connections_saturation
    idle_in_transaction_seconds: float = 30.0
    idle_in_transaction_critical_seconds: float = 600.0
    long_running_query_seconds: float = 60.0
    connections_warning_ratio: float = 0.80
    connections_critical_ratio: float = 0.95
    # sequence_exhaustion
    sequence_warning_ratio: float = 0.75
    sequence_critical_ratio: float = 0.90
    # xid_wraparound_risk, and who holds the xmin horizon back
    xid_warning_age: int = 1_000_000_000
    xid_critical_age: int = 1_500_000_000
    horizon_holder_min_age: int = Field(1_000_000, description="an xmin this many transactions old is named as holding"
                                        " back vacuum and freezing")
    horizon_holder_min_seconds: float = Field(300.0, description="so is a transaction held open this long, whatever its age")
    # index_missing
    missing_index_min_rows: int = 10_000
    missing_index_min_rows_per_scan: float = 1_000.0
    missing_index_min_seq_scans: int = 20
    hypo_min_cost_saving: float = Field(0.5, description="plan-cost drop a hypothetical index must bring (dexter: 50 %)")
    # slow_query, checkpoints_too_frequent, temp_files_spill
    slow_query_mean_ms: float = 500.0
    slow_query_min_calls: int = 10
    checkpoints_min_total: int = 10
    checkpoints_requested_ratio: float = 0.5
    temp_spill_warning_bytes: int = Field(100 * 2**20, description="less spilled in the window: info")
    # mxid_wraparound_risk
    mxid_warning_age: int = 400_000_000
    mxid_critical_age: int = 1_000_000_000
    # replication_lag
    replication_lag_warning_bytes: int = 16 * 2**20
    replication_lag_critical_bytes: int = 2**30
    replication_lag_warning_seconds: float = 60.0
    replication_lag_critical_seconds: float = 600.0
    slot_retained_critical_bytes: int = Field(2**30, description="an inactive slot retaining more WAL: critical")
    slot_inactive_grace_seconds: float = Field(300.0, ge=0, description="a slot inactive for less (PostgreSQL 17+): its replica is"
                                               " restarting or failing over; named in the coverage, not a finding yet")
    bloat_warning_ratio: float = Field(0.40, description="estimated wasted share of a relation (postgres-checkup)")
    bloat_critical_ratio: float = 0.80
    bloat_min_wasted_bytes: int = Field(8 * 2**20, description="less waste is not worth a rebuild")
    indexes_too_many: int = Field(10, description="indexes on one table (PMM's advisor flags more than 10)")
    indexes_too_many_write_share: float = Field(0.5, description="share of row writes among reads and writes")

    @field_validator("*")
    @classmethod
    def _not_negative(cls, value: float) -> float:
        """Every threshold is a count, a ratio, a size or a duration: none is negative."""
        if value < 0:
            raise ValueError("must not be negative")
        return value


PLAIN_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def parse_overrides(pairs: list[str]) -> dict[str, float]:
    """`name=value` pairs (the CLI's --threshold) checked against Thresholds; ValueError in one line.

    A value is a plain decimal (`300`, `0.5`, `1e6`): not `nan` or `inf`, which compare false
    with everything and would silently switch a check off, nor `1_000` or non-ASCII digits,
    which Python's float() accepts. Counts and sizes take whole numbers, kept exact as int.
    """
    known = Thresholds.model_fields
    overrides: dict[str, float] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        name, raw = name.strip(), raw.strip()
        if not sep or name not in known:
            raise ValueError(f"--threshold {pair!r}: expected NAME=VALUE with NAME one of {', '.join(sorted(known))}")
        if not PLAIN_NUMBER.fullmatch(raw):
            raise ValueError(f"--threshold {pair!r}: {raw!r} is not a number (write e.g. 300, 0.5 or 1e6)")
        overrides[name] = _number(pair, raw, whole=known[name].annotation is int)
    try:
        checked = Thresholds(**overrides)
    except ValidationError as exc:
        raise ValueError(f"--threshold: {exc.errors()[0]['loc'][0]} {exc.errors()[0]['msg'].lower()}") from None
    return {name: getattr(checked, name) for name in overrides}


def _number(pair: str, raw: str, *, whole: bool) -> float:
    """The exact value of a plain decimal: an int for a count or size, a finite float otherwise."""
    value = Decimal(raw)
    if whole:
        if value.adjusted() >= 18:  # checked before any conversion: 1e999999999 would take minutes
            raise ValueError(f"--threshold {pair!r}: {raw!r} is out of range")
        if value != value.to_integral_value():
            raise ValueError(f"--threshold {pair!r}: takes a whole number")
        return int(value)
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"--threshold {pair!r}: {raw!r} is out of range")
    return number


class Machine(BaseModel):
    """The target's machine, when the user declares it (otherwise measured for a local target)."""

    memory_bytes: int | None = Field(None, gt=0)
    cpus: int | None = Field(None, gt=0)


class Settings(BaseModel):
    """What a run may do to its target and how hard it may try."""

    model_config = ConfigDict(allow_inf_nan=False)

    window_seconds: float = Field(10.0, ge=0, description="seconds to sample activity and counters")
    activity_samples: int = 5
    statement_timeout_ms: int = 30_000
    lock_timeout_ms: int = 1_000
    max_workers: int = 8
    worker_retries: int = Field(2, ge=0, le=2, description="self-corrections before an alert")
    max_reflection_rounds: int = 2
    max_replans: int = Field(3, ge=0, le=3)
    max_regenerations: int = Field(2, ge=0, le=5, description="times a re-plan proposal with refused edits is asked again")
    target_wait_seconds: float = Field(30.0, ge=0, le=600, description="how long a task waits, probing with growing pauses,"
                                       " for a target that stopped answering; then the run says it is incomplete")
    outage_wait_seconds: float = Field(60.0, ge=0, le=600, description="how long, in all, one run's retries wait for a target"
                                       " that failed the same way before in the run (the monitor's memory); then they probe once")
    ablations: Ablations = Field(default_factory=Ablations)
    store_url: str | None = Field(None, description="the shared store of history, memory and baselines (dbcrew.store);"
                                  " None: DBCREW_STORE_URL of the process that runs the review. A flow parameter:"
                                  " never a password here")
    thresholds: Thresholds = Field(default_factory=Thresholds)
    machine: Machine = Field(default_factory=Machine)
    alert: str = Field("", description="diagnosis: the alert text that started it (data, never instructions)")
    baseline_path: str | None = Field(None, description="diagnosis: a saved quiet-period window to compare against")
