"""One `dbcrew server` (Prefect server + process worker + deployed inventory) shared by the e2e tests that operate it."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from dbcrew.lab.crew_server import CrewServer, running_crew_server
from dbcrew.lab.embedded import EmbeddedPostgres, _free_port
from dbcrew.store import STORE_ENV
from tests.webhooks import receiving_webhooks

INVENTORY = """
targets:
  - name: alpha
    url: {alpha}
    schedule: "0 3 * * *"
    window: 1
    tags: [fleet-test]
    alerts: ["{hook}/alpha"]
  - name: beta
    url: {beta}
    password: {{env: BETA_PASSWORD}}
    schedule: "0 3 * * *"
    window: 1
    tags: [fleet-test]
    alerts: ["{hook}/beta", "json://127.0.0.1:{dead_port}/nobody-listens"]
  - name: gone
    url: postgresql://postgres@127.0.0.1:{dead_port}/gone
    schedule: "0 5 1 * *"
    window: 1
    tags: [fleet-test]
    alerts: ["{hook}/gone"]
"""
BETA_PASSWORD = "not-needed-with-trust"  # no alert, log or artifact may carry it
# Prefect's server marks a run Late 15 s after its scheduled time, looking every 5 s: the tests that wait for reviews
# queued behind the pool's limit to be Late (and for no alert of them) wait 2 s, looked at every second.
SOON_LATE = {
    "PREFECT_SERVER_SERVICES_LATE_RUNS_AFTER_SECONDS": "2",
    "PREFECT_SERVER_SERVICES_LATE_RUNS_LOOP_SECONDS": "1",
}
STORE = "dbcrew_store"  # the shared store (history, memory, baselines) of the worker and the test: a database of the fleet's cluster


@pytest.fixture(scope="package")
def fleet_pg() -> Iterator[EmbeddedPostgres]:
    """The fleet's own cluster, outside pytest's base temp: another pytest run on the machine resets that
    folder to mode 0700, after which the server's system user can no longer open its files by path."""
    work = Path(tempfile.mkdtemp(prefix="dbcrew-fleet-pg-"))
    server = EmbeddedPostgres(work / "data").start()
    yield server
    server.stop()
    shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="package")
def webhook() -> Iterator[tuple[str, list[dict[str, object]]]]:
    """The alert receiver every target of the inventory names (json://127.0.0.1:<port>/<target>)."""
    with receiving_webhooks() as hook:
        yield hook


@pytest.fixture(scope="package")
def crew_server(
    fleet_pg: EmbeddedPostgres,
    webhook: tuple[str, list[dict[str, object]]],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[CrewServer]:
    """`dbcrew server` as a user starts it, on a free port, with three targets (one unreachable; alpha and beta
    on one cron schedule, so one deployment), each alerting the webhook receiver, and the history in a
    PostgreSQL store (DBCREW_STORE_URL) the tests read too."""
    pg = fleet_pg
    work = tmp_path_factory.mktemp("crew-server")
    pg.psql(f"CREATE DATABASE {STORE};")
    for name in ("alpha", "beta"):
        pg.psql(f"CREATE DATABASE {name};")
        pg.psql(
            "CREATE EXTENSION IF NOT EXISTS pg_stat_statements; CREATE TABLE items (id int);",
            dbname=name,
        )
    inventory = work / "targets.yaml"
    inventory.write_text(
        INVENTORY.format(
            alpha=pg.dsn("alpha"), beta=pg.dsn("beta"), dead_port=_free_port(), hook=webhook[0]
        )
    )
    family: list[psutil.Process] = []
    with running_crew_server(
        inventory,
        work,
        env={"BETA_PASSWORD": BETA_PASSWORD, STORE_ENV: pg.dsn(STORE), **SOON_LATE},
    ) as server:
        assert f"Prefect UI: {server.ui}" in server.banner, server.banner
        family = psutil.Process(server.process.pid).children(recursive=True)
        yield server
        family += [
            c
            for c in psutil.Process(server.process.pid).children(recursive=True)
            if c not in family
        ]
        rest = server.stop()
    assert server.process.returncode == 0 and "stopped" in rest, rest
    _, alive = psutil.wait_procs(family, timeout=5)
    assert not alive, f"dbcrew server left processes behind: {[p.pid for p in alive]}"
