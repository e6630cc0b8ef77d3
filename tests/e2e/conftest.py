"""One `dbcrew server` (Prefect server + process worker + deployed inventory) shared by the e2e tests that operate it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from lab.embedded import EmbeddedPostgres, _free_port

INVENTORY = """
targets:
  - name: alpha
    url: {alpha}
    schedule: "0 3 * * *"
    window: 1
    tags: [fleet-test]
  - name: beta
    url: {beta}
    password: {{env: BETA_PASSWORD}}
    schedule: "30 4 * * 1"
    window: 1
    tags: [fleet-test]
  - name: gone
    url: postgresql://postgres@127.0.0.1:{dead_port}/gone
    schedule: "0 5 1 * *"
    window: 1
    tags: [fleet-test]
"""


@dataclass
class CrewServer:
    api: str
    process: subprocess.Popen[str]
    inventory: Path
    logs: Path
    pg: EmbeddedPostgres

    @property
    def ui(self) -> str:
        return self.api.removesuffix("/api")


@pytest.fixture(scope="session")
def fleet_pg() -> Iterator[EmbeddedPostgres]:
    """The fleet's own cluster, outside pytest's base temp: another pytest run on the machine resets that
    folder to mode 0700, after which the server's system user can no longer open its files by path."""
    work = Path(tempfile.mkdtemp(prefix="dbcrew-fleet-pg-"))
    server = EmbeddedPostgres(work / "data").start()
    yield server
    server.stop()
    shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="session")
def crew_server(fleet_pg: EmbeddedPostgres, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CrewServer]:
    """`dbcrew server` as a user starts it, on a free port, with three targets (one unreachable)."""
    pg = fleet_pg
    work = tmp_path_factory.mktemp("crew-server")
    for name in ("alpha", "beta"):
        pg.psql(f"CREATE DATABASE {name};")
        pg.psql("CREATE EXTENSION IF NOT EXISTS pg_stat_statements; CREATE TABLE items (id int);", dbname=name)
    inventory = work / "targets.yaml"
    inventory.write_text(INVENTORY.format(alpha=pg.dsn("alpha"), beta=pg.dsn("beta"), dead_port=_free_port()))
    port = _free_port()
    env = {**os.environ, "PREFECT_HOME": str(work / "prefect-home"), "BETA_PASSWORD": "not-needed-with-trust",
           "DBCREW_REPORTS_DIR": str(work / "reports"), "DBCREW_MEMORY_PATH": str(work / "memory.duckdb")}
    env.pop("PREFECT_API_URL", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "cli", "server", "--inventory", str(inventory), "--port", str(port), "--max-reviews", "2",
         "--poll-seconds", "1", "--logs", str(work / "logs")],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=work)
    assert process.stdout is not None
    seen = []
    for out in process.stdout:  # the command says when it is ready (or fails with one line)
        seen.append(out)
        if out.startswith("Prefect UI: ") or out.startswith("press Ctrl-C"):
            break
    if "press Ctrl-C" not in "".join(seen) and not any(s.startswith("Prefect UI: ") for s in seen):
        process.kill()
        pytest.fail("dbcrew server did not start:\n" + "".join(seen))
    server = CrewServer(api=f"http://127.0.0.1:{port}/api", process=process, inventory=inventory, logs=work / "logs", pg=pg)
    assert f"Prefect UI: {server.ui}" in "".join(seen), seen
    family = psutil.Process(process.pid).children(recursive=True)
    yield server
    family += [c for c in psutil.Process(process.pid).children(recursive=True) if c not in family]
    process.send_signal(signal.SIGTERM)
    rest = process.communicate(timeout=120)[0]
    assert process.returncode == 0, rest
    assert "stopped" in rest
    _, alive = psutil.wait_procs(family, timeout=5)
    assert not alive, f"dbcrew server left processes behind: {[p.pid for p in alive]}"
