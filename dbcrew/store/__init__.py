"""The shared store (history, baselines, long-term memory): a DuckDB file by default, PostgreSQL by URL.

`open_store()` reads `DBCREW_STORE_URL`: `postgresql://...` (or `postgres://`) names a PostgreSQL
database that workers on several machines share (the store's own database, never a review
target; put its password in PGPASSWORD or ~/.pgpass, or in the URL of the environment variable,
never in a flow parameter); `duckdb:///path` or a plain path names a DuckDB file. Unset, the
store is `$XDG_DATA_HOME/dbcrew/store.duckdb` (`~/.local/share/dbcrew/store.duckdb`), or the file
the older `DBCREW_MEMORY_PATH` names.
"""

from __future__ import annotations

import os
from pathlib import Path

from dbcrew.settings.environment import environment, variable
from dbcrew.store.backends import Backend, DuckDBBackend, PostgresBackend, StoreUnavailable
from dbcrew.store.records import (
    Baseline,
    RunRecord,
    RunStatus,
    Sighting,
    StoredFinding,
    TargetSummary,
    Vitals,
    fingerprint,
)
from dbcrew.store.store import Store
from dbcrew.targets.postgres import redact_url

STORE_ENV = variable("store_url")


def default_store_path() -> Path:
    data_home = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return data_home / "dbcrew" / "store.duckdb"


def store_url() -> str:
    """The store the environment names: DBCREW_STORE_URL, else DBCREW_MEMORY_PATH's file, else the default file."""
    env = environment()
    return env.store_url or env.memory_path or str(default_store_path())


def open_backend(url: str | None = None) -> Backend:
    """The backend of the store at `url` (default: `store_url()`), no table made yet: each group of tables
    (history here, the watcher's samples, the leases) is made by the class that uses it."""
    url = url or store_url()
    if url.startswith(("postgresql://", "postgres://")):
        return PostgresBackend(url, redact_url(url))
    return DuckDBBackend(Path(url.removeprefix("duckdb://")))


def open_store(url: str | None = None) -> Store:
    """The store at `url` (default: `store_url()`), its schema created if missing; StoreUnavailable when it
    cannot be opened (and, from any of its methods, when it cannot be used)."""
    return Store(open_backend(url))


__all__ = [
    "STORE_ENV",
    "Baseline",
    "RunRecord",
    "RunStatus",
    "Sighting",
    "Store",
    "StoreUnavailable",
    "StoredFinding",
    "TargetSummary",
    "Vitals",
    "default_store_path",
    "fingerprint",
    "open_backend",
    "open_store",
    "store_url",
]
