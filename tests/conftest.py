"""Shared fixtures: one embedded PostgreSQL, one planted shop, one Prefect test server per session."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

_HOME = tempfile.mkdtemp(prefix="dbcrew-prefect-")
os.environ.setdefault("PREFECT_HOME", _HOME)
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
for key in ("OPENAI_API_KEY", "DBCREW_LLM_BASE_URL"):
    os.environ.pop(key, None)

from lab.shop import DemoShop  # noqa: E402
from lab.embedded import EmbeddedPostgres  # noqa: E402


@pytest.fixture(scope="session")
def pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedPostgres]:
    """A real PostgreSQL 18 that logs every statement (the read-only proof reads that log)."""
    server = EmbeddedPostgres(tmp_path_factory.mktemp("pg") / "data", settings={"log_statement": "'all'"}).start()
    yield server
    server.stop()


def analyze_once_the_builder_has_left(dsn: str, readers: tuple[str, ...]) -> None:
    """ANALYZE again once every session that wrote has ended.

    DemoShop.build analyzes right after its writes, in the same session; a backend flushes its
    pending table statistics at most once a second, so those writes can be counted after that
    ANALYZE, as changes since it. A backend flushes at exit before it leaves pg_stat_activity:
    once only the `readers` (application names) remain, every count has landed.
    """
    others = ("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
              " AND backend_type = 'client backend' AND NOT coalesce(application_name, '') = ANY(%s)")
    deadline = time.monotonic() + 60
    with psycopg.connect(dsn, autocommit=True) as conn:
        while conn.execute(others, [list(readers)]).fetchone() != (0,):
            assert time.monotonic() < deadline, "the shop's build session is still there after a minute"
            time.sleep(0.05)
        conn.execute("ANALYZE")


@pytest.fixture(scope="session")
def shop(pg: EmbeddedPostgres) -> Iterator[DemoShop]:
    pg.psql("CREATE DATABASE shop;")
    demo = DemoShop(pg.dsn("shop")).build()
    analyze_once_the_builder_has_left(demo.dsn, readers=("shop-batch",))
    demo.run_workload(6.0)
    demo.wait_until_idle_long_enough()
    yield demo
    demo.close()


@pytest.fixture(scope="session")
def prefect_server() -> Iterator[str]:
    """The one Prefect test server of the session (never nested: its exit would kill the shared one)."""
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        yield str(PREFECT_API_URL.value())


@pytest.fixture()
def out_dir(tmp_path: Path) -> Path:
    return tmp_path / "report"


@pytest.fixture(autouse=True)
def private_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Long-term memory per test: one test's lessons must not change the next one's plan."""
    path = tmp_path / "memory" / "memory.duckdb"
    monkeypatch.setenv("DBCREW_MEMORY_PATH", str(path))
    return path
