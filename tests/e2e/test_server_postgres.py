"""`dbcrew server --local-postgres DIR`: the Prefect server's database and the store on a PostgreSQL it manages.

One command, as a fleet user runs it: the Prefect server keeps its state in the database `prefect`
(read here by SQL: a review's flow run is a row there), the worker's review writes its history to
the database `dbcrew_store` (read here through the store), and the PostgreSQL stops with the
command. The target is a database of the session's cluster (tests/conftest.py).
"""

from __future__ import annotations

import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from dbcrew.store import open_store
from lab.crew_server import running_crew_server
from lab.embedded import EmbeddedPostgres

pytestmark = pytest.mark.timeout(900)

INVENTORY = """
targets:
  - name: solo
    url: {url}
    window: 1
"""


@pytest.fixture()
def work() -> Iterator[Path]:
    """Outside pytest's base temp (another pytest run resets it to 0700, which the cluster's system user cannot
    traverse), as tests/e2e/conftest.py's fleet cluster."""
    path = Path(tempfile.mkdtemp(prefix="dbcrew-local-pg-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_one_command_runs_prefect_and_the_store_on_a_local_postgresql(
    pg: EmbeddedPostgres, work: Path
) -> None:
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    pg.psql("CREATE DATABASE solo;")
    inventory = work / "targets.yaml"
    inventory.write_text(INVENTORY.format(url=pg.dsn("solo")))
    local = work / "pg"
    with running_crew_server(inventory, work, options=("--local-postgres", str(local))) as server:
        prefect_url = re.search(r"Prefect database: (\S+)", server.banner)
        store_url = re.search(r"store: (\S+)", server.banner)
        assert prefect_url and store_url, server.banner
        assert prefect_url[1].startswith("postgresql://postgres@127.0.0.1:")
        assert prefect_url[1].endswith("/prefect") and store_url[1].endswith("/dbcrew_store")
        with (
            temporary_settings(updates={PREFECT_API_URL: server.api}),
            get_client(sync_client=True) as client,
        ):
            on_demand = client.read_deployment_by_name("review_target/on-demand")
            run = client.create_flow_run_from_deployment(
                on_demand.id, parameters={"target": "solo"}
            )
            for _ in range(600):
                state = client.read_flow_run(run.id).state
                if state is not None and state.is_final():
                    break
                time.sleep(1.0)
        assert state is not None and state.is_completed(), state
        with psycopg.connect(prefect_url[1]) as conn:
            (stored,) = conn.execute(
                "SELECT state_type FROM flow_run WHERE id = %s", (run.id,)
            ).fetchone() or ("none",)
        assert stored == "COMPLETED", "the Prefect server's state is in the local PostgreSQL"
        (target,) = open_store(store_url[1]).targets()
        assert "solo" in target.display and target.runs == 1, target
        rest = server.stop()
    assert server.process.returncode == 0 and "stopped" in rest, rest
    assert not (local / "data" / "postmaster.pid").exists(), "the local PostgreSQL stopped with it"
    assert (local / "port").read_text() == prefect_url[1].split(":")[2].split("/")[0]
