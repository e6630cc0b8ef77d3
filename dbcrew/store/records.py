"""What the store keeps, as typed values: runs, their findings and vital signs, baselines."""

from __future__ import annotations

import hashlib
from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, Field

from dbcrew.models.finding import Severity


class RunStatus(StrEnum):
    COMPLETED = "completed"
    PARTIAL = "partial"  # stopped re-planning with the budget spent: its findings still count
    FAILED = "failed"  # no report: unreachable, authentication, internal error


class RunRecord(BaseModel):
    """One review of one target. `target` is the identity (system identifier/database), never a URL."""

    run_id: str
    target: str
    display: str = Field(description="the password-free URL the run was given")
    scenario: str
    started_at: datetime
    finished_at: datetime | None = None
    status: RunStatus
    report: str = Field("", description="where report.json was written (a worker's disk)")
    link: str = Field("", description="where to see the run: the Prefect UI page when known")
    error: str = Field("", description="why a failed run failed")


def fingerprint(target: str, code: str, obj: str) -> str:
    """A finding's identity across runs: its code and object on one target (finding-codes.md)."""
    return hashlib.sha256("\x1f".join((target, code, obj)).encode()).hexdigest()[:32]


class StoredFinding(BaseModel):
    fingerprint: str
    code: str
    object: str
    severity: Severity
    title: str


class Vitals(BaseModel):
    """A few vital signs per run, for trends; None when the run could not measure one."""

    cache_hit_ratio: float | None = None
    dead_tuples: int | None = None
    oldest_xid_age: int | None = None
    database_bytes: int | None = None
    critical: int = 0
    warning: int = 0
    info: int = 0


class Sighting(BaseModel):
    """When a fingerprint was seen on a target, over its earlier runs."""

    first_seen: datetime
    last_seen: datetime


class Baseline(BaseModel):
    """A sampled window (dbcrew.operators.window.evidence.WindowEvidence as JSON) kept for later diagnoses."""

    target: str
    run_id: str
    taken_at: datetime
    quiet: bool
    reason: str = Field("", description="why the window was or was not quiet")
    window_json: str


class TargetSummary(BaseModel):
    target: str
    display: str
    runs: int
    last_started_at: datetime
