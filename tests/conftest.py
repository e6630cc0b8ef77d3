"""Shared fixtures: one embedded PostgreSQL, one planted shop, one Prefect test server per session."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

_HOME = tempfile.mkdtemp(prefix="dbcrew-prefect-")
atexit.register(
    shutil.rmtree, _HOME, ignore_errors=True
)  # the session's Prefect home, never left in /tmp
os.environ.setdefault("PREFECT_HOME", _HOME)
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
for key in ("OPENAI_API_KEY", "DBCREW_LLM_BASE_URL"):
    os.environ.pop(key, None)

from dbcrew.lab.embedded import EmbeddedPostgres  # noqa: E402
from dbcrew.lab.shop import QUICK_IDLE_SECONDS, DemoShop  # noqa: E402


@pytest.fixture(scope="session")
def pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedPostgres]:
    """A real PostgreSQL 18 that logs every statement (the read-only proof reads that log)."""
    server = EmbeddedPostgres(
        tmp_path_factory.mktemp("pg") / "data", settings={"log_statement": "'all'"}
    ).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def shop(pg: EmbeddedPostgres) -> Iterator[DemoShop]:
    """The planted shop after a fixed number of rounds of its workload (the same statistics on any host),
    handed over once its idle session is QUICK_IDLE_SECONDS old: waiting until it
    passed the check's default 30 s (as the demo does) cost the session's first shop test 25 s. A test
    that must see that session gives the check QUICK_IDLE_SECONDS as idle_in_transaction_seconds."""
    pg.psql("CREATE DATABASE shop;")
    demo = DemoShop(pg.dsn("shop")).build()
    demo.run_rounds()
    demo.wait_until_idle_long_enough(QUICK_IDLE_SECONDS)
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
def private_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A shared store (history, memory, baselines) per test: one test's lessons must not change the next one's plan."""
    path = tmp_path / "store" / "store.duckdb"
    monkeypatch.setenv("DBCREW_STORE_URL", str(path))
    monkeypatch.delenv("DBCREW_MEMORY_PATH", raising=False)
    return path


@pytest.fixture(autouse=True)
def large_context(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scripted endpoints stand for a hosted API's context (128k tokens): a prompt reaches them
    whole, as the tests that read it expect. Cutting to a small context has its own tests
    (tests/llm/test_context_fit.py), and the real model's tests declare its 4,096 tokens."""
    monkeypatch.setenv("DBCREW_LLM_CONTEXT", "131072")
