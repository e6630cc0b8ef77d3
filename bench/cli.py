"""Bench section `cli`: one `dbcrew review`'s wall time beyond its window, with a running server vs. an ephemeral one.

Goal: under 5 s beyond the window with a running server (the ephemeral server's start is what
the running server saves: 17-21 s cold on 2 cores).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dbcrew.cli.server import DEFAULT_PORT, api_url, healthy
from dbcrew.lab.crew_server import prefect_database, running_crew_server
from dbcrew.lab.embedded import EmbeddedPostgres

WINDOW = 2.0
RUNS = 5


def review_seconds(dsn: str, out: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "dbcrew.cli",
            "review",
            dsn,
            "--window",
            str(WINDOW),
            "--out",
            str(out),
        ],
        env=env,
        check=True,
        capture_output=True,
        timeout=600,
    )
    return time.perf_counter() - started - WINDOW


def spread(seconds: list[float]) -> str:
    ordered = sorted(seconds)
    return f"{ordered[len(ordered) // 2]:6.1f} s ({ordered[0]:.1f}-{ordered[-1]:.1f})"


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="dbcrew-bench-cli-"))
    pg = EmbeddedPostgres(work / "pgdata").start()
    try:
        pg.psql("CREATE DATABASE shop;")
        pg.psql(
            "CREATE TABLE items (id bigint PRIMARY KEY); INSERT INTO items SELECT generate_series(1, 1000);",
            dbname="shop",
        )
        inventory = work / "targets.yaml"
        inventory.write_text(f"targets:\n  - name: shop\n    url: {pg.dsn('shop')}\n")
        base = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
        if healthy(api_url(DEFAULT_PORT)):
            print(
                f"  note: a Prefect server answers at {api_url(DEFAULT_PORT)}: the 'ephemeral' runs below go through it"
            )
        # The running server first: each ephemeral run leaves its server's shutdown and the load it raised behind it.
        with running_crew_server(inventory, work, env=prefect_database(pg)) as server:
            running = [
                review_seconds(
                    pg.dsn("shop"), work / f"running{i}", {**base, "PREFECT_API_URL": server.api}
                )
                for i in range(RUNS)
            ]
        ephemeral = [
            review_seconds(pg.dsn("shop"), work / f"ephemeral{i}", base) for i in range(RUNS)
        ]
        print(
            f"one review, window {WINDOW:g} s: wall time beyond the window, median (min-max) of {RUNS}"
        )
        print(f"  ephemeral Prefect server (started per run): {spread(ephemeral)}")
        print(f"  running server (dbcrew server):             {spread(running)}   goal < 5 s")
        print(
            f"  load average at the end: {os.getloadavg()[0]:.1f} (1 min) on {os.cpu_count()} cores"
        )
    finally:
        pg.stop()
        shutil.rmtree(work, ignore_errors=True)  # a cluster of up to a few GB: never left in /tmp
