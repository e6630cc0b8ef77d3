"""No secret leaves the process that holds it: a whole CLI run is searched for every secret it met.

The run gets a password in the URL (`?password=`), an API key in the environment, and a target
whose statistics carry other people's passwords (`CREATE ROLE ... PASSWORD`, `primary_conninfo`).
Its own Prefect server (ephemeral, started by the CLI) must not inherit the key; its command line
must not show the password while it runs; nothing it writes (report, workspace.duckdb, Prefect's
database and logs, long-term memory, stdout/stderr) may contain any of them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import psutil
import psycopg
import pytest

from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.store import StoreUnavailable, open_store
from dbcrew.targets import parse_target
from dbcrew.vocabulary import Scenario

URL_PASSWORD = "urlSecret-4711"
API_KEY = "sk-apiSecret-0815"
ROLE_PASSWORD = "roleSecret-1234"
CONNINFO_PASSWORD = "connSecret-9876"
SECRETS = (URL_PASSWORD, API_KEY, ROLE_PASSWORD, CONNINFO_PASSWORD)


@pytest.fixture(scope="module")
def leaky(pg: EmbeddedPostgres) -> str:
    pg.psql("CREATE DATABASE leaky;")
    pg.psql(
        "CREATE EXTENSION IF NOT EXISTS pg_stat_statements; CREATE TABLE t (id int PRIMARY KEY);",
        "leaky",
    )
    pg.psql(
        f"ALTER SYSTEM SET primary_conninfo = 'host=nowhere user=rep password={CONNINFO_PASSWORD}'; SELECT pg_reload_conf();"
    )
    dsn = pg.dsn("leaky")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            f"CREATE ROLE leaky_app LOGIN PASSWORD '{ROLE_PASSWORD}'"
        )  # pg_stat_statements keeps utility texts
    yield dsn
    pg.psql(
        "ALTER SYSTEM RESET primary_conninfo; SELECT pg_reload_conf(); DROP ROLE IF EXISTS leaky_app;"
    )


def test_parse_errors_never_echo_a_password() -> None:
    for url in (
        f"host=db password={URL_PASSWORD}",
        f"postgresql://u:{URL_PASSWORD}%zz@h/db",
        f"postgresql://u@h/db?password={URL_PASSWORD}%zz",
    ):
        with pytest.raises(Exception) as raised:
            parse_target(url)
        assert URL_PASSWORD not in str(raised.value)
    assert (
        URL_PASSWORD
        not in parse_target(f"postgresql://u@h/db?password={URL_PASSWORD}").model_dump_json()
    )


def test_a_store_url_never_echoes_its_password(pg: EmbeddedPostgres) -> None:
    """libpq quotes a token it cannot parse back in its error; the store's URL is read apart first, as a target's."""
    for url, told in (
        (f"postgresql://u:{URL_PASSWORD}%zz@127.0.0.1:1/store", "percent-encoded"),
        (f"postgresql://u@127.0.0.1:1/store?password={URL_PASSWORD}%zz", "percent-encoded"),
        ("postgresql://u:urlSecret@4711@127.0.0.1:1/store", "unencoded @"),
    ):
        with pytest.raises(StoreUnavailable) as raised:
            open_store(url)
        assert told in str(raised.value)
        assert "urlSecret" not in str(raised.value) and "4711" not in str(raised.value)
    # a well-formed password goes to libpq apart from the URL: the store opens and works
    store = open_store(pg.dsn().replace("postgres@", f"postgres:{URL_PASSWORD}@"))
    assert store.previous_runs("nowhere", Scenario.HEALTH, datetime.now(UTC), 1) == []


def _scan_children(cli: psutil.Process, leaks: list[str]) -> None:
    for proc in [cli, *cli.children(recursive=True)]:
        try:
            cmdline, environ = " ".join(proc.cmdline()), proc.environ()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        if proc.pid != cli.pid and any(API_KEY in value for value in environ.values()):
            leaks.append(f"{proc.pid} {cmdline[:80]}: inherits the API key")
        if URL_PASSWORD in cmdline and proc.create_time() < time.time() - 5:
            leaks.append(f"{proc.pid}: password in its command line 5 s after it started")


def test_a_whole_run_keeps_every_secret(leaky: str, tmp_path: Path) -> None:
    # Another session's last statement, visible in pg_stat_activity while the review samples.
    idle = psycopg.connect(leaky, autocommit=True)
    idle.execute(f"ALTER ROLE leaky_app PASSWORD '{ROLE_PASSWORD}'")
    home, out, memory = (
        tmp_path / "prefect",
        tmp_path / "report",
        tmp_path / "memory" / "memory.duckdb",
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_HOME")}
    env.update(
        PREFECT_HOME=str(home),
        OPENAI_API_KEY=API_KEY,
        DBCREW_MEMORY_PATH=str(memory),
        PREFECT_LOGGING_LEVEL="DEBUG",
    )
    url = f"{leaky}?password={URL_PASSWORD}"
    command = [
        sys.executable,
        "-m",
        "dbcrew.cli",
        "review",
        url,
        "--brain",
        "rules",
        "--window",
        "2",
        "--out",
        str(out),
    ]
    leaks: list[str] = []
    # Files, not pipes: nobody reads a pipe while the run goes on, and DEBUG logging fills one.
    stdout_path, stderr_path = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with (
        stdout_path.open("w") as out_file,
        stderr_path.open("w") as err_file,
        subprocess.Popen(command, env=env, stdout=out_file, stderr=err_file, text=True) as cli_proc,
    ):
        cli = psutil.Process(cli_proc.pid)
        deadline = time.monotonic() + 420
        while cli_proc.poll() is None and time.monotonic() < deadline:
            _scan_children(cli, leaks)
            time.sleep(0.5)
        cli_proc.wait(timeout=60)
    stdout, stderr = stdout_path.read_text(), stderr_path.read_text()
    idle.close()
    assert cli_proc.returncode == 0, stderr[-3000:]
    assert not leaks, leaks
    assert "password on the command line" in stderr  # the warning that says how to avoid it
    outputs = {"stdout": stdout, "stderr": stderr}
    files = [p for root in (out, home, memory.parent) for p in root.rglob("*") if p.is_file()]
    assert any(p.name == "workspace.duckdb" for p in files) and any(
        p.suffix == ".db" for p in files
    ), files
    for path in files:
        outputs[str(path)] = path.read_bytes().decode("latin-1")
    found = [
        (where, secret) for where, text in outputs.items() for secret in SECRETS if secret in text
    ]
    assert found == []
    # The secrets the target held were seen (and masked), not merely missed.
    workspace = (out / "workspace.duckdb").read_bytes().decode("latin-1")
    assert "leaky_app" in workspace and "PASSWORD ********" in workspace


def test_dbcrew_server_gives_no_secret_to_the_prefect_server_and_the_held_ones_to_its_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dbcrew import secrets
    from dbcrew.cli import server

    monkeypatch.setattr(secrets, "_HELD", {})
    for name, value in (
        ("OPENAI_API_KEY", API_KEY),
        ("PGPASSWORD", URL_PASSWORD),
        ("SHOP_PASSWORD", ROLE_PASSWORD),
    ):
        monkeypatch.setenv(name, value)
    secrets.hold_environment_secrets()  # what `dbcrew` does first
    api = server.api_url(4200)
    server_env = server.server_environment(api, withheld={"SHOP_PASSWORD"})
    assert not set(SECRETS) & set(server_env.values()), "the Prefect server inherited a secret"
    worker_env = server.worker_environment(api, 5.0)
    assert (
        worker_env["OPENAI_API_KEY"],
        worker_env["PGPASSWORD"],
        worker_env["SHOP_PASSWORD"],
    ) == (API_KEY, URL_PASSWORD, ROLE_PASSWORD)
