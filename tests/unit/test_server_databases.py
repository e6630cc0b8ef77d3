"""`dbcrew server`'s databases: what the Prefect server and the worker are given, and the one line a wrong URL gets."""

from __future__ import annotations

import re

import pytest

from dbcrew.cli.server_databases import ServerDatabases, postgres_url
from dbcrew.errors import UsageError
from tests.cli_here import dbcrew_here


def test_the_prefect_server_gets_its_database_in_sqlalchemys_asyncpg_form():
    for given in (
        "postgresql://prefect:s3cret@db.example:5432/prefect",
        "postgres://prefect:s3cret@db.example:5432/prefect",
        "postgresql+asyncpg://prefect:s3cret@db.example:5432/prefect",
    ):
        databases = ServerDatabases(prefect=given)
        assert databases.server_environment() == {
            "PREFECT_API_DATABASE_CONNECTION_URL": "postgresql+asyncpg://prefect:s3cret@db.example:5432/prefect"
        }
    assert ServerDatabases().server_environment() == {}, "no URL: Prefect's own default"


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
