"""Where a worker writes (its reports, its built indexes) and how much of it stays, from the environment."""

from __future__ import annotations

import os
from pathlib import Path

from dbcrew.settings.environment import environment, variable

RETENTION_ENV = variable("reports_retention_days")


def reports_root() -> Path:
    """Where a run writes its report when no directory is given: $DBCREW_REPORTS_DIR, else ./reports."""
    return environment().reports_dir.expanduser()


def cache_root() -> Path:
    """Where built indexes live between runs (the manual's search index, the question router):
    $DBCREW_CACHE_DIR, else $XDG_CACHE_HOME/dbcrew, else ~/.cache/dbcrew."""
    explicit = environment().cache_dir
    if explicit:
        return explicit.expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache").expanduser() / "dbcrew"


def reports_max_bytes() -> int:
    """How much the run directories under reports_root() may hold together ($DBCREW_REPORTS_MAX_MB, 1024 MiB)."""
    return int(environment().reports_max_mb * 2**20)


def reports_retention_days() -> float:
    """How long reports stay under reports_root() on a worker's disk ($DBCREW_REPORTS_RETENTION_DAYS, 14).

    A worker's disk is not the record: the Prefect artifacts and the history store are.
    """
    return environment().reports_retention_days
