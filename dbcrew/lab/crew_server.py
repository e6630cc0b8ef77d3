"""`dbcrew server` run as a user runs it, for the e2e tests and the benchmarks: a free port, its own Prefect home.

Started as a child process, ready once it prints its "press Ctrl-C" line, stopped with SIGTERM
(what Ctrl-C would do) or the signal given; `stop()` returns what it printed after being told to
stop, the same on every call (a test may stop it before its fixture does).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from dbcrew.lab.embedded import EmbeddedPostgres, _free_port

READY = "press Ctrl-C"


@dataclass
class CrewServer:
    api: str
    process: subprocess.Popen[str]
    logs: Path
    banner: str
    receiver: str  # the Alertmanager receiver's URL
    said: str | None = None  # what it printed once told to stop

    @property
    def ui(self) -> str:
        return self.api.removesuffix("/api")

    def stop(self, signum: signal.Signals = signal.SIGTERM) -> str:
        if self.said is None:
            self.process.send_signal(signum)
            self.said = self.process.communicate(timeout=120)[0]
        return self.said


def prefect_database(pg: EmbeddedPostgres, name: str = "prefect") -> dict[str, str]:
    """The environment that puts the Prefect server's own database on `pg` (a new database `name`).

    On SQLite the server serializes every write: under a fleet its services and the API wait on
    each other and log `database is locked`. Prefect's server needs asyncpg, which it installs.
    """
    pg.psql(f"CREATE DATABASE {name};")
    return {
        "PREFECT_API_DATABASE_CONNECTION_URL": pg.dsn(name).replace(
            "postgresql://", "postgresql+asyncpg://", 1
        )
    }


@contextmanager
def running_crew_server(
    inventory: Path,
    work: Path,
    max_reviews: int = 2,
    env: dict[str, str] | None = None,
    options: tuple[str, ...] = (),
) -> Iterator[CrewServer]:
    """`options`: more of `dbcrew server`'s options (`--local-postgres DIR`)."""
    port, receiver_port = _free_port(), _free_port()
    environment = {
        **os.environ,
        "PREFECT_HOME": str(work / "prefect-home"),
        "DBCREW_REPORTS_DIR": str(work / "reports"),
        "DBCREW_MEMORY_PATH": str(work / "memory.duckdb"),
        **(env or {}),
    }
    environment.pop("PREFECT_API_URL", None)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dbcrew.cli",
            "server",
            "--inventory",
            str(inventory),
            "--port",
            str(port),
            "--max-reviews",
            str(max_reviews),
            "--poll-seconds",
            "1",
            "--logs",
            str(work / "logs"),
            "--receiver-port",
            str(receiver_port),
            *options,
        ],
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=work,
    )
    assert process.stdout is not None
    seen = []
    for out in process.stdout:
        seen.append(out)
        if out.startswith(READY):
            break
    else:
        raise RuntimeError("dbcrew server did not start:\n" + "".join(seen))
    server = CrewServer(
        api=f"http://127.0.0.1:{port}/api",
        process=process,
        logs=work / "logs",
        banner="".join(seen),
        receiver=f"http://127.0.0.1:{receiver_port}/alertmanager",
    )
    try:
        yield server
    finally:
        if process.poll() is None:
            server.stop()
