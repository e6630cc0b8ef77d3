"""Anomaly injection: recipes that produce each root cause on a real PostgreSQL.

Injections write to the database, so they live here, outside anything a review runs; tests and
the benchmark call them over their own read-write superuser connection (application_name
`dbcrew-inject`) while the diagnosis watches through its read-only session. Each recipe is a
set of client loops (D-Bot's anomaly_trigger shapes, re-done for PostgreSQL from the manual):
what runs, how many clients, with which session settings.
"""

from __future__ import annotations

import importlib
import multiprocessing
import random
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

APP = "dbcrew-inject"

SCHEMA = """
CREATE TABLE IF NOT EXISTS inj_fetch AS
  SELECT g AS id, ((g::bigint * 7919) % 100000)::int AS k, md5(g::text) AS a, md5((g + 1)::text) AS b, now() AS at
  FROM generate_series(1, 300000) g;
CREATE TABLE IF NOT EXISTS inj_big AS
  SELECT g AS id, g % 1000 AS k, repeat(md5(g::text), 4) AS pad FROM generate_series(1, 1500000) g;
CREATE TABLE IF NOT EXISTS inj_orders AS SELECT g AS id, g % 97 AS customer FROM generate_series(1, 4000) g;
CREATE TABLE IF NOT EXISTS inj_items AS
  SELECT g AS id, (g * 31) % 4000 + 1 AS order_id, g % 13 AS qty FROM generate_series(1, 40000) g;
CREATE TABLE IF NOT EXISTS inj_acct (id int PRIMARY KEY, balance bigint NOT NULL DEFAULT 0);
INSERT INTO inj_acct SELECT g FROM generate_series(1, 20000) g ON CONFLICT DO NOTHING;
CREATE TABLE IF NOT EXISTS inj_log (id bigserial, a int, b text, at timestamptz);
CREATE TABLE IF NOT EXISTS inj_bulk (a int, b text, c text);
CREATE TABLE IF NOT EXISTS inj_sync (id bigserial, at timestamptz DEFAULT now());
CREATE TABLE IF NOT EXISTS inj_del (id int, pad text);
CREATE TABLE IF NOT EXISTS inj_wide (id int PRIMARY KEY, c1 int, c2 int, c3 int, c4 int, c5 int, c6 int, c7 int, c8 int, c9 int, c10 int);
INSERT INTO inj_wide SELECT g, g, g, g, g, g, g, g, g, g, g FROM generate_series(1, 20000) g ON CONFLICT DO NOTHING;
DO $$ BEGIN FOR i IN 1..10 LOOP EXECUTE format('CREATE INDEX IF NOT EXISTS inj_wide_c%s ON inj_wide (c%s)', i, i); END LOOP; END $$;
CREATE TABLE IF NOT EXISTS inj_vac (id int, pad text) WITH (autovacuum_enabled = off);
-- Autovacuum stays out of the injection tables, so each case carries only the causes it injects.
ALTER TABLE inj_fetch SET (autovacuum_enabled = off); ALTER TABLE inj_big SET (autovacuum_enabled = off);
ALTER TABLE inj_acct SET (autovacuum_enabled = off); ALTER TABLE inj_log SET (autovacuum_enabled = off);
ALTER TABLE inj_bulk SET (autovacuum_enabled = off); ALTER TABLE inj_sync SET (autovacuum_enabled = off);
ALTER TABLE inj_del SET (autovacuum_enabled = off); ALTER TABLE inj_wide SET (autovacuum_enabled = off); ALTER TABLE inj_vac SET (autovacuum_enabled = off);
ANALYZE inj_fetch; ANALYZE inj_big; ANALYZE inj_orders; ANALYZE inj_items; ANALYZE inj_acct; ANALYZE inj_wide;
"""


def connect(dsn: str) -> psycopg.Connection:
    return psycopg.connect(dsn, autocommit=True, application_name=APP)


def prepare_schema(dsn: str) -> None:
    """Create the injection tables once (idempotent); the baseline is taken after this."""
    with connect(dsn) as conn:
        conn.execute(SCHEMA)
        conn.execute("VACUUM ANALYZE")  # leaves autovacuum nothing to do during the windows


Statement = Callable[[random.Random], tuple[str, tuple[object, ...] | None]]


def fixed(sql: str) -> Statement:
    return lambda _rng: (sql, None)


def _account_run(rng: random.Random) -> tuple[str, tuple[object, ...]]:
    """An update of eight neighbouring accounts from a random one (taken in key order by every client)."""
    start = rng.randint(1, 20000 - 7)
    return "UPDATE inj_acct SET balance = balance + 1 WHERE id BETWEEN %s AND %s", (
        start,
        start + 7,
    )


@dataclass(frozen=True)
class Client:
    """One client loop: session settings, then `statement` again and again until stopped."""

    statement: Statement
    settings: tuple[str, ...] = ()
    fetch: bool = False
    pause: float = 0.0  # seconds between two statements or transactions (think time)
    transaction: tuple[
        str | Statement, ...
    ] = ()  # if set: run these in one transaction instead (with `hold` seconds inside)
    hold: float = 0.0


@dataclass(frozen=True)
class Recipe:
    cause: str
    clients: tuple[tuple[Client, int], ...]
    reset: str = ""  # SQL run before the clients start (refills what the last run consumed)
    # Tables vacuumed before the clients start (after `reset`): what earlier cases left dead in tables kept
    # out of autovacuum's reach would otherwise be this case's too (a scan of them reads the dead rows).
    tidy: tuple[str, ...] = ()
    description: str = ""
    command: tuple[
        str, ...
    ] = ()  # a program of the server's bin folder run beside the clients (e.g. pgbench), the DSN appended
    # A condition of the host the cause needs beyond its clients (bench/slow_disk.py's slow disk):
    # entered in the injection child with the DSN before the clients start, left after they stop.
    beside: Callable[[str], AbstractContextManager[object]] | None = None


def _run(dsn: str, client: Client, stop: threading.Event, seed: int, errors: list[str]) -> None:
    rng = random.Random(seed)
    try:
        with connect(dsn) as conn:
            for setting in client.settings:
                conn.execute(setting)
            while not stop.is_set():
                try:
                    if client.transaction:
                        with conn.transaction():
                            for step in client.transaction:
                                conn.execute(
                                    *((step, None) if isinstance(step, str) else step(rng))
                                )
                            stop.wait(client.hold)
                    else:
                        sql, params = client.statement(rng)
                        cur = conn.execute(sql, params)
                        if client.fetch:
                            cur.fetchall()
                except (
                    psycopg.errors.QueryCanceled,
                    psycopg.errors.LockNotAvailable,
                    psycopg.errors.DeadlockDetected,
                ):
                    continue
                if client.pause:
                    stop.wait(client.pause)
    except psycopg.OperationalError as exc:
        if not stop.is_set():
            errors.append(f"{type(exc).__name__}: {exc}")


def _clients(
    dsn: str, recipes: list[Recipe], stop: threading.Event, errors: list[str]
) -> list[threading.Thread]:
    threads = []
    for recipe in recipes:
        for client, count in recipe.clients:
            for _ in range(count):
                thread = threading.Thread(
                    target=_run,
                    args=(dsn, client, stop, len(threads) + 1, errors),
                    daemon=True,
                    name=f"inject-{recipe.cause}",
                )
                thread.start()
                threads.append(thread)
    return threads


def _serve(
    dsn: str, catalogue: str, causes: list[str], stop: Any, ready: Any, failures: Any
) -> None:
    """Child process: run the clients of `causes` (keys of `catalogue`'s RECIPES: statements are
    closures, so the child looks recipes up by name) until `stop` is set, then cancel and join them;
    the recipes' `beside` conditions hold from before the clients start until they are joined."""
    from dbcrew.lab.embedded import POSTGRES_BIN_PATH

    errors: list[str] = []
    recipes = [importlib.import_module(catalogue).RECIPES[c] for c in causes]
    with connect(dsn) as conn:
        for recipe in recipes:
            if recipe.reset:
                conn.execute(recipe.reset)
            if recipe.tidy:
                conn.execute(f"VACUUM {', '.join(recipe.tidy)}")
    with ExitStack() as conditions:
        for recipe in recipes:
            if recipe.beside:
                conditions.enter_context(recipe.beside(dsn))
        programs = [
            subprocess.Popen(
                [str(POSTGRES_BIN_PATH / r.command[0]), *r.command[1:], dsn],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for r in recipes
            if r.command
        ]
        halt = threading.Event()
        threads = _clients(dsn, recipes, halt, errors)
        ready.set()
        stop.wait()
        halt.set()
        for program in programs:
            program.terminate()
            program.wait(timeout=30)
        # A terminated pgbench leaves its backends running their last statement until they next write
        # to it (a correlated subquery's call ran on into the next case's window): cancelled with ours.
        with connect(dsn) as conn:
            conn.execute(
                "SELECT pg_cancel_backend(pid) FROM pg_stat_activity"
                " WHERE application_name IN (%s, 'pgbench') AND pid <> pg_backend_pid()",
                (APP,),
            )
        for thread in threads:
            thread.join(timeout=30)
    if errors:
        failures.put(errors[0])


@contextmanager
def injected(
    dsn: str, causes: list[str], warmup: float = 2.0, catalogue: str = __name__
) -> Iterator[None]:
    """Run the recipes of `causes` (from the RECIPES of module `catalogue`) in a child process (its
    own interpreter, so the clients never compete with the diagnosis for the GIL); yields once they
    ran for `warmup` seconds.

    The child is forked by a fork server that has imported this module once (multiprocessing's
    forkserver, started by the first injection): a freshly spawned interpreter paid its start and
    imports (about a second on 2 loaded cores) before every injection. Forked from that server, not
    from this process, it inherits none of this process's threads, connections or locks."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__, catalogue])
    stop, ready, failures = context.Event(), context.Event(), context.Queue()
    child = context.Process(
        target=_serve, args=(dsn, catalogue, list(causes), stop, ready, failures), daemon=True
    )
    child.start()
    try:
        if not ready.wait(timeout=120):
            raise RuntimeError(f"injection of {', '.join(causes)} did not start")
        time.sleep(warmup)
        yield
    finally:
        stop.set()
        child.join(timeout=60)
    if not failures.empty():
        raise RuntimeError(f"injection clients failed: {failures.get()}")


PGBENCH_SCRIPTS = Path(__file__).parent / "pgbench"


def pgbench_script(script: Path, clients: int, *options: str) -> tuple[str, ...]:
    """A Recipe's command: pgbench running `script` on `clients` connections until stopped (`options`
    before the script, e.g. a rate limit)."""
    return (
        "pgbench",
        "-n",
        "-c",
        str(clients),
        "-j",
        str(min(clients, 2)),
        "-T",
        "3600",
        *options,
        "-f",
        str(script),
    )


def committers(script: str, clients: int) -> tuple[str, ...]:
    """pgbench running `script` (from bench/pgbench/) back to back on `clients` connections, for a
    Recipe's command. Commit pressure needs clients that commit again as soon as a commit returns:
    Python threads sharing one interpreter on a CPU-starved host left their sessions idle between
    commits most of the time (CI: 6 clients, 0.44 sessions waiting), a C client does not."""
    return pgbench_script(PGBENCH_SCRIPTS / script, clients)


NO_SYNC = "SET synchronous_commit = off"
SERIAL = "SET max_parallel_workers_per_gather = 0"

RECIPES: dict[str, Recipe] = {
    r.cause: r
    for r in (
        Recipe(
            "workload_many_inserts",
            (
                (
                    Client(
                        fixed(
                            "INSERT INTO inj_log (a, b, at) SELECT g, md5(g::text), now() FROM generate_series(1, 40) g"
                        ),
                        (NO_SYNC,),
                    ),
                    8,
                ),
            ),
            description="8 clients commit small multi-row inserts one after another",
        ),
        Recipe(
            "workload_large_insert",
            (
                (
                    Client(
                        fixed(
                            "INSERT INTO inj_bulk SELECT g, md5(g::text), repeat('x', 200) FROM generate_series(1, 150000) g"
                        ),
                        (NO_SYNC,),
                    ),
                    1,
                ),
            ),
            reset="TRUNCATE inj_bulk",
            description="one client loads 150k-row batches",
        ),
        Recipe(
            "workload_high_updates",
            (
                (
                    Client(
                        _account_run,
                        (NO_SYNC,),
                    ),
                    8,
                ),
            ),
            # Eight rows a statement: the row rate is the server's work, not the clients' (eight Python
            # threads behind one interpreter lock sent 11-17k single-row updates a second here and,
            # once, under the 8k a second that two cores carry on a slower CI host).
            description="8 clients update runs of 8 random accounts, one commit each",
        ),
        Recipe(
            "workload_many_deletes",
            (
                (
                    Client(
                        lambda rng: (
                            "DELETE FROM inj_del WHERE id IN (SELECT id FROM inj_del LIMIT 2000)",
                            (),
                        ),
                        (NO_SYNC,),
                        pause=0.02,
                    ),
                    2,
                ),
            ),
            reset="TRUNCATE inj_del; INSERT INTO inj_del SELECT g, md5(g::text) FROM generate_series(1, 600000) g",
            description="2 clients delete rows in 2000-row batches",
        ),
        Recipe(
            "workload_large_fetch",
            (
                (
                    Client(
                        fixed("SELECT * FROM inj_fetch WHERE id <= 200000"), (SERIAL,), fetch=True
                    ),
                    2,
                ),
            ),
            description="2 clients fetch 200k rows each time",
        ),
        Recipe(
            "query_poor_join",
            (
                (
                    Client(
                        fixed(
                            "SELECT count(*) FROM inj_orders o JOIN inj_items i ON i.order_id BETWEEN o.id AND o.id + 0"
                        ),
                        (SERIAL,),
                    ),
                    1,
                ),
            ),
            description="one client runs a range join that only a nested loop can execute",
        ),
        Recipe(
            "query_correlated_subquery",
            (
                (
                    Client(
                        fixed(
                            "SELECT o.id, (SELECT sum(i.qty) FROM inj_items i WHERE i.order_id = o.id) FROM inj_orders o"
                        ),
                        (SERIAL,),
                    ),
                    1,
                ),
            ),
            description="one client runs a scalar subquery per order",
        ),
        Recipe(
            "sync_commit_pressure",
            (),
            command=committers("sync_insert.sql", 6),
            description="6 clients commit single-row inserts with synchronous_commit on",
        ),
        Recipe(
            "lock_contention",
            (
                (
                    Client(
                        fixed(""),
                        transaction=("UPDATE inj_acct SET balance = balance WHERE id = 1",),
                        hold=3.0,
                    ),
                    1,
                ),
                (
                    Client(
                        fixed("UPDATE inj_acct SET balance = balance + 1 WHERE id = 1"), (NO_SYNC,)
                    ),
                    5,
                ),
            ),
            description="one session holds a row lock for 3 s at a time; 5 wait for it",
        ),
        Recipe(
            "vacuum_interference",
            (
                (
                    Client(
                        fixed("VACUUM (DISABLE_PAGE_SKIPPING) inj_vac"),
                        ("SET vacuum_cost_delay = 0",),
                    ),
                    1,
                ),
                (Client(fixed("SELECT count(*) FROM inj_vac"), (SERIAL,), pause=0.05), 1),
            ),
            reset="TRUNCATE inj_vac; INSERT INTO inj_vac SELECT g, md5(g::text) FROM generate_series(1, 400000) g;"
            " UPDATE inj_vac SET pad = pad || 'x'",
            description="a cost-unlimited VACUUM runs again and again beside a reader",
        ),
        Recipe(
            "cpu_contention",
            (
                (
                    Client(
                        fixed("SELECT count(*) FROM inj_fetch WHERE md5(a || b) < md5(b || a)"),
                        (SERIAL,),
                    ),
                    6,
                ),
            ),
            description="6 clients run CPU-bound hashing scans on 2 cores",
        ),
        Recipe(
            "io_contention",
            ((Client(fixed("SELECT count(*) FROM inj_big"), (SERIAL,)), 4),),
            description="4 clients scan a table larger than shared_buffers",
        ),
        Recipe(
            "index_missing",
            (
                (
                    Client(
                        lambda rng: (
                            "SELECT * FROM inj_fetch WHERE k = %s",
                            (rng.randint(0, 99999),),
                        ),
                        (SERIAL,),
                    ),
                    2,
                ),
            ),
            description="2 clients look rows up by a column without an index",
        ),
        Recipe(
            "indexes_too_many",
            (
                (
                    Client(
                        lambda rng: (
                            "UPDATE inj_wide SET c1 = c1 + 1, c4 = c4 + 1, c7 = c7 + 1 WHERE id = %s",
                            (rng.randint(1, 20000),),
                        ),
                        (NO_SYNC,),
                    ),
                    4,
                ),
            ),
            description="4 clients update indexed columns of a table carrying 11 indexes",
        ),
        Recipe(
            "memory_pressure",
            (
                (
                    Client(
                        fixed(
                            "SELECT count(*) FROM (SELECT g FROM generate_series(1, 25000000) g ORDER BY g DESC OFFSET 0) s"
                        ),
                        (SERIAL, "SET work_mem = '8GB'"),
                    ),
                    2,
                ),
            ),
            description="2 clients sort 25M rows in memory with an 8 GB work_mem",
        ),
    )
}

SINGLE = list(RECIPES)
COMBINATIONS: list[tuple[str, str]] = [
    ("workload_large_insert", "io_contention"),
    ("workload_large_fetch", "query_correlated_subquery"),
    ("query_poor_join", "cpu_contention"),
    ("lock_contention", "workload_many_inserts"),
    ("workload_many_deletes", "memory_pressure"),
    ("sync_commit_pressure", "query_correlated_subquery"),
    ("index_missing", "workload_many_inserts"),
]
