"""`dbcrew server`: a local Prefect server with its UI, a work pool, its worker, the inventory deployed.

The server and the worker are child processes of this command; Ctrl-C or SIGTERM stops the
worker, the flow runs it started and (when this command started it) the server, so nothing is
left behind; the runs in flight end Cancelled (a planned stop alerts nobody), never Failed. A
server already answering at the address is reused and left running. The server gets no secret
(no API key, no database password); the worker, whose flow runs review the targets, gets the
ones the CLI holds. Scheduled reviews missed while it was down are settled at its start. The Prefect
server's database and the store are PostgreSQL URLs when given, or both on a local PostgreSQL this
command manages (dbcrew/cli/server_databases.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated
from uuid import uuid4

import httpx
import psutil
import typer

from dbcrew.cli.console import line, show
from dbcrew.cli.interrupts import end_processes
from dbcrew.errors import UsageError
from dbcrew.flows.queues import MAX_DIAGNOSES
from dbcrew.secrets import held_secrets

if TYPE_CHECKING:
    from dbcrew.cli.server_databases import ServerDatabases
    from dbcrew.flows.diagnosis_health import StalledDiagnoses
    from dbcrew.flows.schedule_health import LateSlots
    from dbcrew.flows.supervision import WatchSupervisor

DEFAULT_PORT = 4200
STARTUP_SECONDS = 180.0  # a cold server takes 17-21 s on 2 busy cores; leave room
STOP_SECONDS = 15.0
SUPERVISE_EVERY = 5.0  # seconds between two looks after the worker and the watching runs


def api_url(port: int) -> str:
    return f"http://127.0.0.1:{port}/api"


def healthy(api: str) -> bool:
    """Whether a Prefect server answers at `api` (a quick probe: a CLI run must not wait for it)."""
    try:
        return httpx.get(f"{api}/health", timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


def server_environment(api: str, withheld: Iterable[str] = ()) -> dict[str, str]:
    """The server's own environment: its UI asks PREFECT_API_URL where the API is (blank UI otherwise).

    No secret: the CLI has already moved OPENAI_API_KEY and PGPASSWORD out of os.environ
    (dbcrew.secrets), and the `withheld` variables (the inventory's password variables) are left out.
    """
    return {
        **{name: value for name, value in os.environ.items() if name not in set(withheld)},
        "PREFECT_API_URL": api,
        "PREFECT_UI_API_URL": api,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": str(int(STARTUP_SECONDS)),
        "PREFECT_LOGGING_LEVEL": os.environ.get("PREFECT_LOGGING_LEVEL", "WARNING"),
    }


def stop_tree(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM a child and everything it started (flow runs may sit in their own sessions), then SIGKILL stragglers."""
    try:
        family = [
            psutil.Process(process.pid),
            *psutil.Process(process.pid).children(recursive=True),
        ]
    except psutil.NoSuchProcess:
        family = []
    end_processes(family, STOP_SECONDS)
    process.wait()


def spawn(args: list[str], env: dict[str, str], log: IO[bytes]) -> subprocess.Popen[bytes]:
    """A child in its own session (a Ctrl-C in the terminal reaches this command only, which stops it)."""
    return subprocess.Popen(
        args,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


@contextmanager
def child(
    args: list[str], env: dict[str, str], log: IO[bytes]
) -> Iterator[subprocess.Popen[bytes]]:
    process = spawn(args, env, log)
    try:
        yield process
    finally:
        stop_tree(process)


class Revived:
    """A child started again whenever it exited (the pool's worker: the watching runs live on it)."""

    def __init__(self, args: list[str], env: dict[str, str], log: IO[bytes]):
        self.args, self.env, self.log = args, env, log
        self.process = spawn(args, env, log)

    def revive(self) -> int | None:
        """Start it again if it exited; the exit code it had, or None when it was running."""
        code = self.process.poll()
        if code is not None:
            self.process = spawn(self.args, self.env, self.log)
        return code

    def stop(self) -> None:
        stop_tree(self.process)


def wait_healthy(api: str, process: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while not healthy(api):
        if process.poll() is not None:
            raise UsageError(
                f"the Prefect server exited with code {process.returncode} (see {log_path})"
            )
        if time.monotonic() > deadline:
            raise UsageError(
                f"the Prefect server did not answer within {STARTUP_SECONDS:.0f} s (see {log_path})"
            )
        time.sleep(0.5)


@contextmanager
def running_server(
    port: int,
    logs: Path,
    stack: ExitStack,
    withheld: Iterable[str] = (),
    database: dict[str, str] | None = None,
) -> Iterator[str]:
    """The API address of a server at 127.0.0.1:port: the one already there, or one started now (on `database`:
    its PREFECT_API_DATABASE_CONNECTION_URL, none for Prefect's SQLite)."""
    api = api_url(port)
    if healthy(api):
        show(line(f"reusing the Prefect server at {api}"))
        yield api
        return
    log_path = logs / "server.log"
    log = stack.enter_context(log_path.open("ab"))
    show(line(f"starting a Prefect server on 127.0.0.1:{port} (log: {log_path}) ..."))
    process = stack.enter_context(
        child(
            [
                sys.executable,
                "-m",
                "prefect",
                "server",
                "start",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            {**server_environment(api, withheld), **(database or {})},
            log,
        )
    )
    wait_healthy(api, process, log_path)
    yield api


def issues_csrf_tokens(api: str) -> bool:
    """Whether the Prefect server at `api` issues CSRF tokens (its CSRF protection is on; Prefect's default is off).

    Each new Prefect client asks for a token before its first change request and learns from the refusal
    (422, "CSRF protection is disabled.") that it needs none: a request per client, and a review's flow
    run made three clients (its engine's, two for its target's concurrency slot; one since the slot is taken on
    the engine's: dbcrew/flows/target_slots.py). Asked once here, the
    worker's clients are told up front (a server that cannot be asked is taken to issue them)."""
    try:
        answer = httpx.get(f"{api}/csrf-token", params={"client": str(uuid4())}, timeout=5.0)
    except httpx.HTTPError:
        return True
    return not (answer.status_code == 422 and "CSRF protection is disabled." in answer.text)


def worker_environment(
    api: str, poll_seconds: float, store: str | None = None, csrf_tokens: bool = True
) -> dict[str, str]:
    """The worker's environment: the server's, plus the secrets its flow runs need to reach targets and the model,
    and the store they share when one is named; `csrf_tokens` False: the server issues none
    (`issues_csrf_tokens`), so the worker's clients ask for none."""
    from dbcrew.store import STORE_ENV

    return {
        **server_environment(api),
        **held_secrets(),
        **({STORE_ENV: store} if store else {}),
        **({} if csrf_tokens else {"PREFECT_CLIENT_CSRF_SUPPORT_ENABLED": "false"}),
        "PREFECT_WORKER_QUERY_SECONDS": str(poll_seconds),
    }


def worker_args(pool: str, name: str, queues: Iterable[str] = ()) -> list[str]:
    """The crew's in-process worker (dbcrew/flows/worker.py): every review a flow run of the pool, none a new Python.
    With `queues`, it serves those of the pool's queues alone (one that leaves out `watch` does not watch)."""
    from dbcrew.flows.worker import WORKER_TYPE

    return [
        sys.executable,
        "-m",
        "prefect",
        "worker",
        "start",
        "--pool",
        pool,
        "--type",
        WORKER_TYPE,
        "--name",
        name,
        *(arg for queue in queues for arg in ("--work-queue", queue)),
    ]


def pool_queues(asked: Iterable[str]) -> tuple[str, ...]:
    """The queues the server's worker serves, each one of the pool's (UsageError naming them otherwise); none
    asked: every queue of the pool. Checked before `serve` points Prefect at its server: nothing here imports
    prefect (dbcrew/flows/queues.py)."""
    from dbcrew.flows.queues import QUEUES

    queues = tuple(dict.fromkeys(asked))
    unknown = [q for q in queues if q not in QUEUES]
    if unknown:
        raise UsageError(
            f"--work-queue {unknown[0]!r} is not one of the pool's queues: {', '.join(QUEUES)}"
        )
    return queues


def supervise(
    worker: Revived, watching: WatchSupervisor, late: LateSlots, stalled: StalledDiagnoses
) -> list[str]:
    """One look after the pool: the worker started again if it exited, each watching run kept going, schedule
    slots and diagnoses no worker could start told."""
    said = []
    code = worker.revive()
    if code is not None:
        said.append(f"the worker exited with code {code}: started again")
    try:
        said += watching.check()
        said += late.check()
        said += stalled.check()
    except httpx.HTTPError as exc:
        said.append(
            f"could not check the watching runs (tried again in {SUPERVISE_EVERY:g} s): {exc}"
        )
    return said


def stop_reviews(worker: Revived) -> None:
    """A planned stop: the reviews the worker is running are cancelled (no failure alert), said in one line."""
    from dbcrew.flows.supervision import stop_reviews as cancel

    cancelled = cancel(worker.process.pid)
    if cancelled:
        show(line(f"reviews cancelled: {', '.join(cancelled)}"))


def stop_watching(watching: WatchSupervisor) -> None:
    """A planned stop: the watching runs are cancelled (no failure alert), said in one line."""
    cancelled = watching.stop()
    if cancelled:
        show(line(f"watching runs cancelled: {cancelled}"))


def stop_on_signal() -> threading.Event:
    """An event Ctrl-C or SIGTERM sets, armed before the server says it is ready: a signal that comes right
    after the ready line stops it as planned, not as an interrupted command."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    return stop


def serve(
    inventory_path: Path,
    port: int,
    pool: str,
    max_reviews: int,
    poll_seconds: float,
    logs: Path,
    receiver_port: int,
    databases: ServerDatabases | None = None,
    local_postgres: Path | None = None,
    queues: tuple[str, ...] = (),
    max_diagnoses: int = MAX_DIAGNOSES,
) -> None:
    """`databases`: the Prefect server's and the store's URLs given; `local_postgres`: a folder where this command
    runs both on a PostgreSQL of its own (the URLs given still win); `queues`: those the server's own worker serves
    (none: every queue of the pool); `max_diagnoses`: the incidents queue's limit."""
    from dbcrew.cli.receiver import PATH, receiving_alerts
    from dbcrew.cli.server_databases import ServerDatabases
    from dbcrew.cli.server_databases import local_postgres as start_local_postgres
    from dbcrew.inventory import PasswordFromEnv, load_inventory
    from dbcrew.settings.environment import environment

    started = datetime.now(UTC)  # a scheduled review due before this was missed: nothing ran it
    inventory = load_inventory(inventory_path)  # a bad inventory: exit 2 before anything starts
    password_variables = {
        e.password.env for e in inventory.targets if isinstance(e.password, PasswordFromEnv)
    }
    logs.mkdir(parents=True, exist_ok=True)
    given = databases or ServerDatabases()
    if (local_postgres or given.prefect) and healthy(api_url(port)):
        raise UsageError(
            f"a Prefect server already answers on port {port}: its database is its own; stop it, or choose"
            " another --port, to start one on PostgreSQL"
        )
    # Closed in reverse order: a local PostgreSQL stops after the server and the worker.
    with ExitStack() as stack:
        if local_postgres is not None:
            local = stack.enter_context(start_local_postgres(local_postgres))
            given = ServerDatabases(
                prefect=given.prefect or local.prefect, store=given.store or local.store
            )
        api = stack.enter_context(
            running_server(port, logs, stack, password_variables, given.server_environment())
        )
        os.environ["PREFECT_API_URL"] = api
        from dbcrew.flows.deploy import deploy_inventory
        from dbcrew.flows.diagnosis_health import StalledDiagnoses
        from dbcrew.flows.schedule_health import LateSlots, settle_missed
        from dbcrew.flows.supervision import WatchSupervisor

        names = deploy_inventory(inventory, pool, max_reviews, max_diagnoses)
        missed = settle_missed(inventory, started)  # before the worker would take them all
        for settled in missed:
            show(line(settled.describe()))
        worker_log = stack.enter_context((logs / "worker.log").open("ab"))
        worker = Revived(
            worker_args(pool, f"dbcrew-{os.getpid()}", queues),
            worker_environment(api, poll_seconds, given.store, issues_csrf_tokens(api)),
            worker_log,
        )
        stack.callback(worker.stop)
        watching = WatchSupervisor(inventory)
        late = LateSlots(inventory, known=[m.kept.id for m in missed if m.kept])
        stalled = StalledDiagnoses(inventory)
        stack.callback(stop_watching, watching)  # before the worker stops: the runs end CANCELLED
        stack.callback(stop_reviews, worker)
        token = environment().receiver_token
        if receiver_port:
            listening = stack.enter_context(
                receiving_alerts(
                    receiver_port,
                    inventory,
                    token.get_secret_value() if token else "",
                    lambda said: show(line(said)),
                )
            )
        stop = stop_on_signal()
        schedules = len(inventory.schedule_groups())
        show(
            line(
                f"{len(inventory.targets)} targets on {schedules} schedules, deployments: {', '.join(names)}"
            )
        )
        show(
            line(
                f"work pool {pool}: a worker is running"
                + (f" on the queues {', '.join(queues)}" if queues else "")
                + f" (log: {logs / 'worker.log'}), at most {max_reviews} reviews and {max_diagnoses} diagnoses"
                " at once"
            )
        )
        show(line(("Prefect UI: ", "bold"), api.removesuffix("/api")))
        for said in given.describe():
            show(line(said))
        if receiver_port:
            show(
                line(
                    f"Alertmanager receiver: http://127.0.0.1:{listening}{PATH}"
                    + (" (bearer token required)" if token else "")
                )
            )
        if watching.groups:
            show(
                line(
                    f"watching: {', '.join(watching.groups)} (shared by the workers of the watch queue)"
                )
            )
        show(line("press Ctrl-C to stop"))
        sys.stdout.flush()
        while True:
            for said in supervise(worker, watching, late, stalled):
                show(line(said))
            sys.stdout.flush()
            if stop.wait(SUPERVISE_EVERY):
                break
        show(line("stopping ..."))
    show(line("stopped"))


def server(
    inventory: Annotated[
        Path, typer.Option(help="the targets inventory (see docs/operate.md)")
    ] = Path("targets.yaml"),
    port: Annotated[int, typer.Option(help="the server's port on 127.0.0.1")] = DEFAULT_PORT,
    pool: Annotated[str, typer.Option(help="the process work pool's name")] = "dbcrew",
    max_reviews: Annotated[
        int,
        typer.Option(min=1, help="reviews at once over the whole pool (the reviews queue's limit)"),
    ] = 2,
    max_diagnoses: Annotated[
        int,
        typer.Option(
            min=1,
            help="diagnoses that incidents and alerts start, at once over the whole pool (the incidents queue's"
            " limit; polled before reviews)",
        ),
    ] = MAX_DIAGNOSES,
    poll_seconds: Annotated[
        float, typer.Option(min=0.5, help="how often the worker asks for runs")
    ] = 5.0,
    logs: Annotated[
        Path, typer.Option(help="folder for the server's and the worker's logs")
    ] = Path(".dbcrew/server"),
    receiver_port: Annotated[
        int,
        typer.Option(
            min=0,
            max=65535,
            help="port on 127.0.0.1 of the Alertmanager webhook receiver (POST /alertmanager); 0: none",
        ),
    ] = DEFAULT_PORT + 1,
    prefect_database: Annotated[
        str | None,
        typer.Option(
            help="the Prefect server's own database, postgresql://USER@HOST:PORT/DB (default: Prefect's SQLite)",
        ),
    ] = None,
    store: Annotated[
        str | None,
        typer.Option(
            help="the store the worker's runs share, postgresql://USER@HOST:PORT/DB (default: DBCREW_STORE_URL)",
        ),
    ] = None,
    local_postgres: Annotated[
        Path | None,
        typer.Option(
            help="a folder where this command runs a PostgreSQL of its own for both (started and stopped with it)",
        ),
    ] = None,
    work_queue: Annotated[
        list[str] | None,
        typer.Option(
            help="a queue the server's own worker serves (repeat it; default: all of reviews, fleet, incidents,"
            " watch); without watch it does not watch, without incidents it runs no diagnosis",
        ),
    ] = None,
) -> None:
    """Start (or reuse) a Prefect server with its UI, a work pool and a worker; deploy the inventory's reviews and
    watching; receive Alertmanager's alerts."""
    from dbcrew.cli.server_databases import ServerDatabases, postgres_url

    databases = ServerDatabases(
        prefect=postgres_url(prefect_database, "--prefect-database", ("postgresql+asyncpg://",))
        if prefect_database
        else None,
        store=postgres_url(store, "--store") if store else None,
    )
    serve(
        inventory,
        port,
        pool,
        max_reviews,
        poll_seconds,
        logs,
        receiver_port,
        databases,
        local_postgres,
        pool_queues(work_queue or ()),
        max_diagnoses,
    )
