"""Bench section `fleet`: 50 databases of one embedded cluster reviewed by the fleet flow on the in-process worker.

With 1, 2 and 4 reviews at once (the reviews queue's limit), window 2 s: databases per minute,
Prefect's overhead per review (each review's slot time beyond the time its flow run was running:
scheduling, the worker's pick-up), the CPU per review of `dbcrew server`'s processes (the Prefect
server's share apart) and of the PostgreSQL cluster, and the peak memory of `dbcrew server`'s
process tree (server, worker, flow runs). Goal (issue 31): at least 60 databases per minute at 4
at once on 2 cores. DBCREW_BENCH_FLEET_DATABASES sets fewer databases for a quick look,
DBCREW_BENCH_FLEET_AT_ONCE other numbers of reviews at once ("4": that pass only). The Prefect server's
API requests per review are its access-log lines (uvicorn's, one a request) counted over each pass;
DBCREW_BENCH_FLEET_LOGS=DIR keeps the server's and the worker's logs there.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

import psutil

from dbcrew.lab.crew_server import prefect_database, running_crew_server
from dbcrew.lab.embedded import EmbeddedPostgres

DATABASES = int(
    os.environ.get("DBCREW_BENCH_FLEET_DATABASES", "50")
)  # fewer: a quick look while tuning
WINDOW = 2.0
CONCURRENCY = tuple(
    int(n) for n in os.environ.get("DBCREW_BENCH_FLEET_AT_ONCE", "1,2,4").split(",")
)  # "4": the pass the goal is set at, alone


def family(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def tree_rss(pid: int) -> int:
    """Resident memory of a process and everything it started, in bytes."""
    total = 0
    for member in family(pid):
        try:
            total += member.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


def tree_cpu(pid: int) -> float:
    """CPU seconds of a process and everything it started, ended children it waited for included
    (a process worker's flow runs); less noisy than wall time on a shared machine."""
    total = 0.0
    for member in family(pid):
        try:
            times = member.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total


def make_fleet(pg: EmbeddedPostgres, work: Path) -> Path:
    lines = ["targets:"]
    for i in range(DATABASES):
        name = f"db{i:02d}"
        pg.psql(f"CREATE DATABASE {name};")
        pg.psql(
            "CREATE EXTENSION pg_stat_statements; CREATE TABLE items (id bigint PRIMARY KEY, note text);"
            "INSERT INTO items SELECT g, 'n' || g FROM generate_series(1, 1000) g; ANALYZE items;",
            dbname=name,
        )
        lines += [f"  - name: {name}", f"    url: {pg.dsn(name)}", f"    window: {WINDOW}"]
    inventory = work / "targets.yaml"
    inventory.write_text("\n".join(lines) + "\n")
    return inventory


def prefect_server_pid(server_pid: int) -> int | None:
    """The Prefect server's process among `dbcrew server`'s children (None: a server it reused)."""
    for member in family(server_pid)[1:]:
        try:
            if {"prefect", "server", "start"} <= set(member.cmdline()):
                return member.pid
        except psutil.NoSuchProcess:
            continue
    return None


def api_requests(logs: Path) -> int:
    """The requests the Prefect server has answered so far: its access-log lines in `dbcrew server`'s server.log."""
    access = logs / "server.log"
    return access.read_bytes().count(b'HTTP/1.1"') if access.exists() else 0


def run_fleet(
    api: str, server_pid: int, postmaster_pid: int, max_reviews: int, inventory: Path
) -> tuple[float, float, float, float, float, float, int]:
    """(wall seconds, mean running seconds per review, CPU seconds of `dbcrew server`'s processes, of which the
    Prefect server's, CPU seconds of the PostgreSQL cluster, peak bytes, completed reviews) of one fleet run;
    the bench's own polling of the fleet run (a request each 0.5 s) is among the server's requests."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from dbcrew.flows.deploy import deploy_inventory
    from dbcrew.inventory import load_inventory

    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.wait(0.5):
            peak = max(peak, tree_rss(server_pid))

    with temporary_settings(updates={PREFECT_API_URL: api}), get_client(sync_client=True) as client:
        deploy_inventory(load_inventory(inventory), max_reviews=max_reviews)
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        prefect = prefect_server_pid(server_pid)
        prefect_cpu = tree_cpu(prefect) if prefect else 0.0
        pg_cpu = tree_cpu(postmaster_pid)
        started, cpu = time.perf_counter(), tree_cpu(server_pid)
        run = client.create_flow_run_from_deployment(
            client.read_deployment_by_name("fleet_review/fleet").id
        )
        while not (state := client.read_flow_run(run.id).state) or not state.is_final():
            time.sleep(0.5)
        wall, cpu = time.perf_counter() - started, tree_cpu(server_pid) - cpu
        prefect_cpu = (tree_cpu(prefect) - prefect_cpu) if prefect else 0.0
        pg_cpu = tree_cpu(postmaster_pid) - pg_cpu
        done.set()
        sampler.join()
        children = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(
                parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[run.id])
            )
        )
    completed = [c for c in children if c.state and c.state.is_completed()]
    running = sum(c.total_run_time.total_seconds() for c in completed) / max(len(completed), 1)
    return wall, running, cpu, prefect_cpu, pg_cpu, peak, len(completed)


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="dbcrew-bench-fleet-"))
    pg = EmbeddedPostgres(work / "pgdata", settings={"max_connections": "200"}).start()
    try:
        inventory = make_fleet(pg, work)
        print(
            f"{DATABASES} databases in one embedded cluster, window {WINDOW:g} s, in-process worker, rules brain,"
            " the Prefect server's database on the same cluster"
        )
        print(
            f"  {'reviews at once':>15} {'wall s':>8} {'db/min':>8} {'running s/review':>17} {'overhead s/review':>18}"
            f" {'CPU s/review':>13} {'of it server':>13} {'PostgreSQL':>11} {'API req/review':>15} {'peak MiB':>9}"
            f" {'ok':>4}"
        )
        postmaster = int((pg.datadir / "postmaster.pid").read_text().split()[0])
        # The server's INFO level writes uvicorn's access lines, the count of API requests.
        env = {**prefect_database(pg), "PREFECT_SERVER_LOGGING_LEVEL": "INFO"}
        with running_crew_server(inventory, work, env=env) as server:
            for n in CONCURRENCY:
                requests = api_requests(server.logs)
                wall, running, cpu, prefect_cpu, pg_cpu, peak, ok = run_fleet(
                    server.api, server.process.pid, postmaster, n, inventory
                )
                requests = api_requests(server.logs) - requests
                overhead = wall * n / DATABASES - running
                print(
                    f"  {n:>15} {wall:>8.1f} {DATABASES / wall * 60:>8.1f} {running:>17.1f} {overhead:>18.1f}"
                    f" {cpu / DATABASES:>13.2f} {prefect_cpu / DATABASES:>13.2f} {pg_cpu / DATABASES:>11.2f}"
                    f" {requests / DATABASES:>15.1f} {peak / 2**20:>9.0f} {ok:>4}",
                    flush=True,
                )
        print(
            "  CPU s/review: the Prefect server, the worker and its reviews (not PostgreSQL's own processes);"
            " of it server: the Prefect server's share; PostgreSQL: the cluster's processes (the targets and the"
            " Prefect server's database);"
            " API req/review: the Prefect server's requests (its access lines), the bench's polling included"
        )
        print("  goal: >= 60 databases per minute at 4 at once on 2 cores (issue 31)")
    finally:
        pg.stop()
        if keep := os.environ.get(
            "DBCREW_BENCH_FLEET_LOGS"
        ):  # the server's and worker's logs, to read after
            shutil.copytree(work / "logs", keep, dirs_exist_ok=True)
        shutil.rmtree(work, ignore_errors=True)  # a cluster of up to a few GB: never left in /tmp
