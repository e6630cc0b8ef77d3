"""`dbcrew server`'s databases: what the Prefect server and the worker are given, and the one line a wrong URL gets."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from dbcrew.cli.server_databases import (
    PREFECT_POOL_SETTINGS,
    PREFECT_POOL_SIZE,
    ServerDatabases,
    postgres_url,
)
from dbcrew.errors import UsageError
from tests.cli_here import dbcrew_here


def test_the_prefect_server_gets_its_database_in_sqlalchemys_asyncpg_form(monkeypatch):
    for name in PREFECT_POOL_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    for given in (
        "postgresql://prefect:s3cret@db.example:5432/prefect",
        "postgres://prefect:s3cret@db.example:5432/prefect",
        "postgresql+asyncpg://prefect:s3cret@db.example:5432/prefect",
    ):
        databases = ServerDatabases(prefect=given)
        assert databases.server_environment() == {
            "PREFECT_API_DATABASE_CONNECTION_URL": "postgresql+asyncpg://prefect:s3cret@db.example:5432/prefect",
            PREFECT_POOL_SETTINGS[0]: str(PREFECT_POOL_SIZE),
        }
    assert ServerDatabases().server_environment() == {}, "no URL: Prefect's own default"


def test_the_prefect_servers_pool_keeps_its_connections_unless_the_user_sized_it(monkeypatch):
    from prefect.settings.models.server.database import SQLAlchemySettings

    for name in PREFECT_POOL_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    databases = ServerDatabases(prefect="postgresql://prefect@db.example/prefect")
    for name, value in databases.server_environment().items():
        monkeypatch.setenv(name, value)
    assert SQLAlchemySettings().pool_size == PREFECT_POOL_SIZE, (
        "Prefect reads the pool size it is given"
    )
    for name in PREFECT_POOL_SETTINGS:
        monkeypatch.delenv(PREFECT_POOL_SETTINGS[0], raising=False)
        monkeypatch.setenv(name, "7")
        assert not set(PREFECT_POOL_SETTINGS) & set(databases.server_environment()), name
        assert SQLAlchemySettings().pool_size == 7, f"the user's {name} stands"
        monkeypatch.delenv(name)


def test_the_start_line_names_the_databases_without_their_passwords():
    databases = ServerDatabases(
        prefect="postgresql://prefect:s3cret@db.example/prefect",
        store="postgresql://dbcrew:hunter2@db.example/dbcrew",
    )
    said = "\n".join(databases.describe())
    assert "db.example/prefect" in said and "db.example/dbcrew" in said
    assert "s3cret" not in said and "hunter2" not in said
    assert ServerDatabases().describe() == []


@pytest.mark.parametrize(
    ("option", "url", "message"),
    [
        (
            "--prefect-database",
            "sqlite:///prefect.db",
            "--prefect-database: expected a postgresql:// URL, got 'sqlite'",
        ),
        (
            "--store",
            "duckdb:///store.duckdb",
            "--store: expected a postgresql:// URL, got 'duckdb'",
        ),
        (
            "--store",
            "postgresql+asyncpg://u@h/d",
            "--store: expected a postgresql:// URL, got 'postgresql+asyncpg'",
        ),
    ],
)
def test_a_url_that_is_not_postgresql_is_one_line_and_exit_2(option: str, url: str, message: str):
    with pytest.raises(UsageError, match=re.escape(message)):
        postgres_url(
            url, option, ("postgresql+asyncpg://",) if option == "--prefect-database" else ()
        )
    result = dbcrew_here("server", option, url)
    assert result.returncode == 2, result
    assert result.stderr.strip() == f"dbcrew: error: {message}", result.stderr


def test_a_queue_the_pool_does_not_have_is_one_line_and_exit_2():
    """`--work-queue` names the queues the server's own worker serves: a misspelt one would leave that worker
    polling a queue no deployment uses, so it is refused before anything starts."""
    result = dbcrew_here("server", "--work-queue", "reviews", "--work-queue", "review")
    assert result.returncode == 2, result
    assert result.stderr.strip() == (
        "dbcrew: error: --work-queue 'review' is not one of the pool's queues: reviews, fleet,"
        " incidents, watch"
    ), result.stderr


def test_checking_the_queues_leaves_prefect_unread():
    """`dbcrew server --work-queue` is checked before the server points Prefect at the API it starts: prefect
    imported earlier kept its default API, and the inventory was deployed to an ephemeral server of its own
    while the worker polled the real one (bench scale --split, found before it ever ran in earnest)."""
    probe = (
        "import sys\n"
        "from dbcrew.cli.server import pool_queues\n"
        "assert pool_queues(['watch', 'reviews', 'watch']) == ('watch', 'reviews')\n"
        "print(sorted(m for m in sys.modules if m == 'prefect' or m.startswith('prefect.')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert result.stdout.strip() == "[]", result.stdout
