"""(Re)collect dbcrew/error_tree/labelled.yaml: real failures, provoked for real, each with the leaf it belongs to.

`.venv/bin/python -m bench.collect_errors` starts two embedded PostgreSQL servers (one with a tiny
max_connections and password logins, one without pg_stat_statements preloaded), a scripted
OpenAI-compatible server, DuckDB workspaces and the crew's own validators, makes each of them fail
in the ways a review meets, and writes what a worker would report to the monitor: the exception's
class name and the first line of its text (dbcrew/roles/crew/worker.py records exactly that). The intended
leaf is the collector's judgement, written next to the code that provokes the failure.

The file is committed; tests and `python -m bench error_tree` read it and never rerun this. A case
that does not fail is reported and left out, so a changed server shows up as a shorter set.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import duckdb
import networkx as nx
import numpy as np
import openai
import pandas as pd
import psycopg
import yaml

import dbcrew.operators  # noqa: F401 - registers the operators whose parameter models we validate
from dbcrew.error_tree.classify import LABELLED_PATH, LabelledError
from dbcrew.lab.embedded import (
    POSTGRES_BIN_PATH,
    EmbeddedPostgres,
    _free_port,
)  # _free_port: a port nobody listens on
from dbcrew.lab.scripted_llm import Reply, ScriptedServer
from dbcrew.models import Strategy
from dbcrew.models.crew import Action
from dbcrew.models.faults import FaultSpec
from dbcrew.operators.registry import REGISTRY, get
from dbcrew.roles.brains.openai import OpenAIBrain, Problems, Recommendations, Summary
from dbcrew.roles.crew.faults import FaultInjector
from dbcrew.roles.crew.planner import PlanRejected
from dbcrew.roles.crew.validators import validate
from dbcrew.settings.run import Settings
from dbcrew.targets.postgres import first_line, parse_target
from dbcrew.workspace import Workspace

PASSWORDS = {"alice": "correct-horse-1", "bob": "battery-staple-2", "carol": "tr0ub4dor-3"}


class Collector:
    """Runs provocations; each must raise, and what it raises becomes a labelled case."""

    def __init__(self) -> None:
        self.cases: list[LabelledError] = []
        self.silent: list[str] = []

    @contextmanager
    def expect(self, leaf: str, source: str) -> Iterator[None]:
        try:
            yield
        except Exception as exc:  # noqa: BLE001 - every failure is the data we came for
            self.cases.append(
                LabelledError(
                    leaf=leaf, error_type=type(exc).__name__, message=first_line(exc), source=source
                )
            )
        else:
            self.silent.append(f"{leaf}: {source}")

    def plan_problems(self, leaf: str, source: str, strategy: Strategy) -> None:
        """Feed a strategy to the crew's validators; their objections surface as PlanRejected."""
        with self.expect(leaf, source):
            problems = validate(strategy, [op.entry() for op in REGISTRY.values()])
            if problems:
                raise PlanRejected([p for p in problems if p.kind != "missing_input"] or problems)


# ---------------------------------------------------------------- PostgreSQL servers


def _servers(root: Path) -> tuple[EmbeddedPostgres, EmbeddedPostgres]:
    main = EmbeddedPostgres(
        root / "main",
        settings={
            "max_connections": "12",
            "superuser_reserved_connections": "2",
            "deadlock_timeout": "'100ms'",
            "password_encryption": "'scram-sha-256'",
        },
    ).start()
    bare = EmbeddedPostgres(root / "bare", settings={"shared_preload_libraries": "''"}).start()
    hba = main.datadir / "pg_hba.conf"
    hba.write_text(
        "host all blocked 127.0.0.1/32 reject\n"
        + "".join(f"host all {user} 127.0.0.1/32 scram-sha-256\n" for user in PASSWORDS)
        + hba.read_text()
    )
    main.psql(
        "".join(f"CREATE ROLE {user} LOGIN PASSWORD '{pw}';" for user, pw in PASSWORDS.items())
        + "CREATE ROLE auditor LOGIN; CREATE ROLE blocked LOGIN; CREATE ROLE dormant NOLOGIN;"
        "CREATE ROLE limited LOGIN CONNECTION LIMIT 1; CREATE DATABASE shop; CREATE DATABASE archive CONNECTION LIMIT 1;"
        "SELECT pg_reload_conf();"
    )
    main.psql(
        "CREATE EXTENSION pg_stat_statements;"
        "CREATE TABLE orders (id int PRIMARY KEY, customer_id int, total numeric(8,2), status text);"
        "CREATE TABLE customers (id int PRIMARY KEY, email text UNIQUE, name text);"
        "CREATE TABLE invoices (id int PRIMARY KEY, order_id int, amount numeric(6,2));"
        "CREATE TABLE payments (id int PRIMARY KEY, invoice_id int, paid boolean);"
        "CREATE TABLE shipments (id int PRIMARY KEY, order_id int, carrier text);"
        "CREATE TABLE accounts (id int PRIMARY KEY, balance int, on_call boolean);"
        "INSERT INTO orders SELECT g, g % 50, g * 1.5, 'new' FROM generate_series(1, 200) g;"
        "INSERT INTO customers SELECT g, 'c' || g || '@shop.test', 'customer ' || g FROM generate_series(1, 50) g;"
        "INSERT INTO invoices SELECT g, g, g FROM generate_series(1, 100) g;"
        "INSERT INTO payments SELECT g, g, g % 2 = 0 FROM generate_series(1, 100) g;"
        "INSERT INTO shipments SELECT g, g, 'dhl' FROM generate_series(1, 100) g;"
        "INSERT INTO accounts VALUES (1, 100, true), (2, 100, true), (3, 50, false), (4, 70, false);"
        "CREATE SEQUENCE invoice_numbers; CREATE SCHEMA billing; CREATE TABLE billing.ledger (id int);"
        "CREATE VIEW big_spenders AS SELECT customer_id, sum(total) FROM orders GROUP BY 1;"
        "CREATE TABLE audit_log (id int, note text); ALTER TABLE audit_log RENAME TO audit_events;"
        "CREATE TABLE sales_2023 (id int); ALTER TABLE sales_2023 RENAME TO sales_history;"
        "CREATE TABLE old_carts (id int); DROP TABLE old_carts;"
        "ALTER TABLE customers RENAME COLUMN name TO full_name;",
        dbname="shop",
    )
    bare.psql("CREATE DATABASE plain; CREATE EXTENSION pg_stat_statements;")
    return main, bare


def _connect(
    server: EmbeddedPostgres, user: str = "postgres", dbname: str = "shop", **kwargs: Any
) -> psycopg.Connection[Any]:
    return psycopg.connect(server.dsn(dbname, user=user), connect_timeout=3, **kwargs)


def _query(conn: psycopg.Connection[Any], sql: str) -> None:
    """Run one statement and read its rows, so errors raised while fetching surface too."""
    cursor = conn.execute(sql)
    if cursor.description is not None:
        cursor.fetchall()


def connection_faults(c: Collector, main: EmbeddedPostgres) -> None:
    for user, db in [
        ("monitor", "shop"),
        ("postgres", "postgres"),
        ("reviewer", "inventory"),
        ("app", "crm"),
    ]:
        with c.expect("connection", "psycopg connect to a closed port"):
            psycopg.connect(f"postgresql://{user}@127.0.0.1:{_free_port()}/{db}", connect_timeout=3)
    for user, db in [("monitor", "orders"), ("dbcrew", "billing")]:
        with c.expect("connection", "PostgresTarget to a closed port"):
            parse_target(f"postgresql://{user}@127.0.0.1:{_free_port()}/{db}").connect()
    for folder in ["/tmp/pg-gone", "/var/run/postgresql-old"]:
        with c.expect("connection", "unix socket directory without a server"):
            psycopg.connect(f"postgresql://monitor@/shop?host={folder}", connect_timeout=3)
    for host in ["db-7.invalid", "warehouse.nowhere.example", "replica-eu.internal.invalid"]:
        with c.expect("host_unresolved", "host name that does not resolve"):
            psycopg.connect(f"postgresql://monitor@{host}:5432/shop", connect_timeout=3)
    with c.expect("host_unresolved", "PostgresTarget to a host name that does not resolve"):
        parse_target("postgresql://monitor@pg-primary.corp.invalid:5432/shop").connect()


def authentication_faults(c: Collector, main: EmbeddedPostgres) -> None:
    for user in PASSWORDS:
        with c.expect("authentication_failed", "wrong password"):
            psycopg.connect(
                main.dsn("shop", user=user), password="wrong-" + user, connect_timeout=3
            )
    with c.expect("authentication_failed", "no password given to a scram login"):
        psycopg.connect(main.dsn("postgres", user="alice"), connect_timeout=3)
    with c.expect("authentication_failed", "PostgresTarget with a wrong password"):
        parse_target(f"postgresql://bob:guess@127.0.0.1:{main.port}/shop").connect()
    for user in ["ghost", "reporting_ro"]:
        with c.expect("authentication_failed", "role that does not exist"):
            _connect(main, user=user)
    for db in ["shop_staging", "analytics"]:
        with c.expect("authentication_failed", "database that does not exist"):
            _connect(main, dbname=db)
    with c.expect("authentication_failed", "pg_hba.conf reject line"):
        _connect(main, user="blocked")
    with c.expect("authentication_failed", "NOLOGIN role"):
        _connect(main, user="dormant")


def dropped_connections(c: Collector, main: EmbeddedPostgres) -> None:
    admin = _connect(main, autocommit=True)
    for sql in ["SELECT 1", "SELECT count(*) FROM orders", "SELECT now()"]:
        victim = _connect(main, user="auditor", autocommit=True)
        admin.execute("SELECT pg_terminate_backend(%s)", [victim.info.backend_pid])
        time.sleep(0.1)
        with c.expect("connection_dropped", "session terminated by an administrator"):
            _query(victim, sql)
        with c.expect("connection_dropped", "using the connection after the server dropped it"):
            _query(victim, sql)
    for timeout in ["idle_session_timeout", "idle_in_transaction_session_timeout"]:
        victim = _connect(
            main,
            user="auditor",
            options=f"-c {timeout}=150",
            autocommit=timeout == "idle_session_timeout",
        )
        victim.execute("SELECT 1")
        time.sleep(0.6)
        with c.expect("connection_dropped", f"{timeout} expired"):
            _query(victim, "SELECT 2")
    closed = _connect(main)
    closed.close()
    with c.expect("connection_dropped", "statement on a closed connection"):
        _query(closed, "SELECT 1")
    ws = duckdb.connect()
    ws.close()
    with c.expect("connection_dropped", "DuckDB workspace used after close"):
        ws.execute("SELECT 1")
    admin.close()


def permission_faults(c: Collector, main: EmbeddedPostgres) -> None:
    conn = _connect(main, user="auditor", autocommit=True)
    for sql in [
        "SELECT * FROM orders",
        "SELECT email FROM customers",
        "SELECT * FROM invoices",
        "SELECT * FROM big_spenders",
        "SELECT * FROM billing.ledger",
        "SELECT nextval('invoice_numbers')",
        "SELECT * FROM pg_ls_waldir()",
        "SELECT pg_read_file('postgresql.conf')",
        "SELECT * FROM pg_ls_logdir()",
        "SELECT pg_stat_reset()",
        "SELECT * FROM pg_stat_file('postgresql.conf')",
        "SET log_statement = 'none'",
        "SET session_replication_role = replica",
        "CREATE TABLE public.scratch (id int)",
        "SELECT pg_reload_conf()",
        "SELECT * FROM pg_ls_tmpdir()",
        "SELECT pg_stat_reset_shared('bgwriter')",
    ]:
        with c.expect("permission", f"restricted role: {sql}"):
            _query(conn, sql)
    conn.close()


def read_only_faults(c: Collector, main: EmbeddedPostgres) -> None:
    target = parse_target(main.dsn("shop"))
    with target.session() as conn:
        for sql in [
            "INSERT INTO orders VALUES (1001, 1, 9.99, 'new')",
            "UPDATE customers SET email = NULL WHERE id = 3",
            "DELETE FROM shipments WHERE id < 10",
            "CREATE TABLE dbcrew_scratch (id int)",
            "CREATE INDEX ON invoices (order_id)",
            "SELECT nextval('invoice_numbers')",
            "TRUNCATE payments",
            "SELECT * FROM accounts FOR UPDATE",
            "CREATE EXTENSION pg_buffercache",
            "ALTER TABLE orders ADD COLUMN note text",
            "DROP VIEW big_spenders",
            "COMMENT ON TABLE orders IS 'reviewed'",
        ]:
            with c.expect("read_only_violation", f"read-only session: {sql}"):
                _query(conn, sql)


def timeout_faults(c: Collector, main: EmbeddedPostgres) -> None:
    target = parse_target(main.dsn("shop"))
    for ms, sql in [
        (10, "SELECT pg_sleep(1)"),
        (50, "SELECT pg_sleep(2), count(*) FROM orders"),
        (20, "SELECT count(*) FROM generate_series(1, 50000000)"),
    ]:
        with (
            c.expect("timeout", "statement_timeout"),
            target.session(statement_timeout_ms=ms) as conn,
        ):
            conn.execute(sql)
    injector = FaultInjector([FaultSpec.parse("check_sessions:timeout")], target)
    with c.expect("timeout", "the crew's injected timeout"):
        injector.before("check_sessions")
    conn = _connect(main, autocommit=True)
    threading.Timer(0.2, conn.cancel).start()
    with c.expect("timeout", "statement cancelled by the client"):
        conn.execute("SELECT pg_sleep(3)")
    conn.close()
    ws = duckdb.connect()
    threading.Timer(0.2, ws.interrupt).start()
    with c.expect("timeout", "DuckDB query interrupted after its time ran out"):
        ws.execute("SELECT count(*) FROM range(100000000000) a WHERE a % 7 = 3").fetchall()
    ws.close()
    for ms, sql in [
        (300, "SELECT pg_sleep(3)"),
        (400, "SELECT count(*) FROM generate_series(1, 300000000)"),
    ]:
        with c.expect("timeout", f"psql stopped after {ms} ms"):
            subprocess.run(
                [
                    "psql",
                    "-X",
                    "-h",
                    "127.0.0.1",
                    "-p",
                    str(main.port),
                    "-U",
                    "postgres",
                    "-c",
                    sql,
                ],
                capture_output=True,
                timeout=ms / 1000,
                check=False,
                env={**os.environ, "PATH": f"{POSTGRES_BIN_PATH}:{os.environ['PATH']}"},
            )
    with ThreadPoolExecutor(1) as pool:
        slow = pool.submit(time.sleep, 0.5)
        with c.expect("timeout", "waiting on a task past its deadline"):
            slow.result(timeout=0.05)


def lock_faults(c: Collector, main: EmbeddedPostgres) -> None:
    target = parse_target(main.dsn("shop")).model_copy(update={"lock_timeout_ms": 50})
    for table in ["orders", "customers", "invoices"]:
        holder = _connect(main)
        holder.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
        with (
            c.expect("lock_timeout", f"lock_timeout behind an exclusive lock on {table}"),
            target.session() as conn,
        ):
            conn.execute(f"SELECT count(*) FROM {table}")
        other = _connect(main)
        with c.expect("lock_timeout", f"LOCK TABLE {table} NOWAIT"):
            other.execute(f"LOCK TABLE {table} IN ACCESS SHARE MODE NOWAIT")
        other.close()
        holder.rollback()
        holder.close()
    for table, row in [("payments", 7), ("shipments", 12)]:
        holder = _connect(main)
        holder.execute(f"SELECT * FROM {table} WHERE id = {row} FOR UPDATE")
        other = _connect(main)
        with c.expect("lock_timeout", f"row lock NOWAIT on {table}"):
            other.execute(f"SELECT * FROM {table} WHERE id = {row} FOR UPDATE NOWAIT")
        other.close()
        holder.rollback()
        holder.close()


def concurrency_faults(c: Collector, main: EmbeddedPostgres) -> None:
    for table in ["accounts", "orders", "invoices"]:
        barrier = threading.Barrier(2)
        errors: list[BaseException] = []

        def cross(
            first: int,
            second: int,
            table: str = table,
            barrier: threading.Barrier = barrier,
            errors: list[BaseException] = errors,
        ) -> None:
            conn = _connect(main)
            try:
                conn.execute(f"UPDATE {table} SET id = id WHERE id = {first}")
                barrier.wait()
                conn.execute(f"UPDATE {table} SET id = id WHERE id = {second}")
                conn.commit()
            except psycopg.Error as exc:
                errors.append(exc)
            finally:
                conn.close()

        threads = [
            threading.Thread(target=cross, args=(1, 2)),
            threading.Thread(target=cross, args=(2, 1)),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        with c.expect("deadlock", f"two sessions updating {table} rows in opposite orders"):
            if errors:
                raise errors[0]
    for table, change in [
        ("orders", "UPDATE orders SET status = 'paid' WHERE id = 5"),
        ("customers", "DELETE FROM customers WHERE id = 9"),
        ("shipments", "UPDATE shipments SET carrier = 'ups' WHERE id = 3"),
    ]:
        reader, writer = _connect(main), _connect(main, autocommit=True)
        reader.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        reader.execute(f"SELECT * FROM {table}").fetchall()
        writer.execute(change)
        row = change.split("WHERE id = ")[1]
        with c.expect(
            "serialization_failure", f"repeatable read after a concurrent change to {table}"
        ):
            reader.execute(f"UPDATE {table} SET id = id WHERE id = {row}")
        reader.close()
        writer.close()
    first, second = _connect(main), _connect(main)
    for conn in (first, second):
        conn.execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
        conn.execute("SELECT count(*) FROM accounts WHERE on_call").fetchall()
    first.execute("UPDATE accounts SET on_call = false WHERE id = 1")
    second.execute("UPDATE accounts SET on_call = false WHERE id = 2")
    first.commit()
    with c.expect("serialization_failure", "serializable write skew"):
        second.commit()
    first.close()
    second.close()


def catalog_faults(c: Collector, main: EmbeddedPostgres, bare: EmbeddedPostgres) -> None:
    plain = _connect(bare, dbname="postgres", autocommit=True)
    for sql in [
        "SELECT * FROM pg_stat_statements",
        "SELECT queryid, calls FROM pg_stat_statements ORDER BY calls DESC",
        "SELECT * FROM hypopg_create_index('CREATE INDEX ON t (a)')",
        "SELECT * FROM pg_buffercache",
        "SELECT * FROM pgstattuple('pg_class')",
        "SELECT pg_prewarm('pg_class')",
        "SELECT * FROM pg_visibility_map('pg_class')",
        "SELECT * FROM pg_freespace('pg_class')",
        "SELECT * FROM pgstatindex('pg_class_oid_index')",
    ]:
        with c.expect("missing_extension", f"extension not created: {sql}"):
            _query(plain, sql)
    for name in ["pg_partman", "timescaledb", "pg_repack"]:
        with c.expect("missing_extension", f"extension not installed on the server: {name}"):
            plain.execute(f"CREATE EXTENSION {name}")
    plain.close()
    preload = _connect(bare, dbname="plain", autocommit=True)
    for sql in [
        "SELECT * FROM pg_stat_statements",
        "SELECT sum(calls) FROM pg_stat_statements",
        "SELECT * FROM pg_stat_statements_info",
    ]:
        with c.expect("missing_extension", f"pg_stat_statements created but not preloaded: {sql}"):
            _query(preload, sql)
    preload.close()
    conn = _connect(main, autocommit=True)
    for sql in [
        "SELECT query, total_time FROM pg_stat_statements",
        "SELECT mean_time FROM pg_stat_statements",
        "SELECT blk_read_time, blk_write_time FROM pg_stat_statements",
        "SELECT checkpoints_timed FROM pg_stat_bgwriter",
        "SELECT buffers_checkpoint FROM pg_stat_bgwriter",
        "SELECT procpid, current_query FROM pg_stat_activity",
        "SELECT waiting FROM pg_stat_activity",
        "SELECT sent_location FROM pg_stat_replication",
        "SELECT max_dead_tuples FROM pg_stat_progress_vacuum",
        "SELECT wal_write_time FROM pg_stat_wal",
        "SELECT name FROM customers",
        "SELECT spcname, spclocation FROM pg_tablespace",
    ]:
        with c.expect("schema_drift_column", f"column renamed or removed: {sql}"):
            _query(conn, sql)
    for sql in [
        "SELECT * FROM audit_log",
        "SELECT count(*) FROM sales_2023",
        "SELECT * FROM old_carts",
        "SELECT * FROM pg_stat_bgwriter_checkpoints",
        "SELECT * FROM pg_stat_wal_senders",
        "SELECT * FROM pg_stat_lock_waits",
        "SELECT * FROM pg_stat_progress_checkpoint",
    ]:
        with c.expect(
            "schema_drift_relation", f"relation renamed, dropped or from another version: {sql}"
        ):
            _query(conn, sql)
    for sql in [
        "SELECT pg_current_xlog_location()",
        "SELECT pg_last_xlog_receive_location()",
        "SELECT pg_xlogfile_name('0/0')",
        "SELECT pg_is_xlog_replay_paused()",
        "SELECT pg_xlog_location_diff('0/1', '0/0')",
        "SELECT pg_stat_get_backend_waiting(1)",
        "SELECT pg_relation_size('orders', 'main', true)",
    ]:
        with c.expect("schema_drift_function", f"function renamed or from another version: {sql}"):
            _query(conn, sql)
    conn.close()


def input_faults(c: Collector, main: EmbeddedPostgres) -> None:
    conn = _connect(main, autocommit=True)
    for sql in [
        "SET statement_timeout = 'soon'",
        "SET work_mem = '-1'",
        "SET lock_timeout = '5 parsecs'",
        "SET random_page_cost = -4",
        "SET default_statistics_target = 999999",
        "SET dbcrew_window = 30",
        "SET pg_stat_statements.max = 5000",
        "SET shared_buffers = '1GB'",
        "SET max_connections = 500",
        "SET track_io_timing = maybe",
        "SET log_min_duration_statement = 'fast'",
    ]:
        with c.expect("invalid_setting", f"GUC rejected: {sql}"):
            conn.execute(sql)
    with c.expect("invalid_setting", "connection option with a bad value"):
        _connect(main, options="-c statement_timeout=forever")
    for sql in [
        "SELECT 'abc'::int",
        "SELECT 1 / 0",
        "SELECT 2147483647::int + 1",
        "SELECT '2024-13-01'::date",
        "SELECT '{1,2'::int[]",
        "SELECT 'not-a-uuid'::uuid",
        "SELECT '1.2.3'::inet",
        "SELECT 123.45::numeric(3,1)",
        "SELECT '{bad json'::json",
        "SELECT '3 fortnights and change'::interval",
        "SELECT 'yes please'::boolean",
        "SELECT (orders.total / (orders.id - orders.id)) FROM orders",
        "SELECT repeat('x', -1)::int",
        "SELECT to_timestamp('31/31/2024', 'DD/MM/YYYY')",
    ]:
        with c.expect("invalid_input", f"bad value in SQL: {sql}"):
            _query(conn, sql)
    for sql in [
        "SELEC * FROM orders",
        "SELECT * FROMM customers",
        "SELECT count(* FROM invoices",
        "SELECT id, FROM payments",
        "SELECT * FROM orders WHERE",
        "EXPLAIN SELECT ** FROM shipments",
        'SELECT "" FROM orders',
        "SELECT * FROM orders ORDER BY LIMIT 5",
    ]:
        with c.expect("sql_syntax", f"malformed SQL: {sql}"):
            _query(conn, sql)
    conn.close()


def resource_faults(c: Collector, main: EmbeddedPostgres) -> None:
    held: list[psycopg.Connection[Any]] = []
    try:
        held.append(_connect(main, user="limited"))
        with c.expect("resource_limit", "role connection limit"):
            _connect(main, user="limited")
        held.append(_connect(main, dbname="archive"))
        with c.expect("resource_limit", "database connection limit"):
            _connect(main, user="auditor", dbname="archive")
        with c.expect("resource_limit", "all connection slots taken"):
            for _ in range(20):
                held.append(_connect(main, user="auditor", dbname="postgres"))
        with c.expect("resource_limit", "PostgresTarget when all slots are taken"):
            for _ in range(
                5
            ):  # a slot a closing backend just freed is taken, then the next one fails
                held.append(parse_target(main.dsn("shop", user="auditor")).connect())
        with c.expect("resource_limit", "superuser beyond max_connections"):
            for _ in range(5):
                held.append(_connect(main, dbname="postgres"))
        with c.expect("resource_limit", "PostgresTarget as superuser beyond max_connections"):
            for _ in range(5):
                held.append(parse_target(main.dsn("postgres")).connect())
    finally:
        for conn in held:
            conn.close()
    conn = _connect(main, autocommit=True)
    for limit, rows in [("64kB", 200_000), ("128kB", 300_000), ("1MB", 2_000_000)]:
        conn.execute(f"SET temp_file_limit = '{limit}'")
        with c.expect("temp_space_limit", f"sort spilling past temp_file_limit {limit}"):
            conn.execute(
                f"SELECT g FROM generate_series(1, {rows}) g ORDER BY md5(g::text)"
            ).fetchall()
    conn.close()
    for shape in [(10**7, 10**7), (10**15,), (4 * 10**6, 10**6, 8)]:
        with c.expect("out_of_memory", f"numpy allocation {shape}"):
            np.empty(shape)
    for limit, sql in [
        ("8MB", "SELECT list(range) FROM range(10000000) GROUP BY range % 3"),
        ("16MB", "SELECT string_agg(range::VARCHAR, ',') FROM range(20000000)"),
        ("10MB", "SELECT * FROM range(5000000) a ORDER BY random()"),
    ]:
        ws = duckdb.connect()
        ws.execute(f"SET memory_limit = '{limit}'; SET threads = 1; SET temp_directory = ''")
        with c.expect("out_of_memory", f"DuckDB over memory_limit {limit}"):
            ws.execute(sql).fetchall()
        ws.close()
    for size in [10_000, 1_000_000]:
        with (
            c.expect("disk_full", f"writing {size} bytes to a full device"),
            Path("/dev/full").open("w") as fh,
        ):
            fh.write("x" * size)
    with c.expect("disk_full", "pandas CSV export to a full device"):
        pd.DataFrame({"a": range(100_000)}).to_csv("/dev/full")
    with c.expect("disk_full", "numpy save to a full device"), Path("/dev/full").open("wb") as fh:
        np.save(fh, np.zeros(500_000))
    for fmt in ["csv", "parquet"]:
        with c.expect("disk_full", f"DuckDB COPY to a full device as {fmt}"):
            duckdb.connect().execute(
                f"COPY (SELECT * FROM range(1000000)) TO '/dev/full' (FORMAT {fmt})"
            )


def empty_results(c: Collector, main: EmbeddedPostgres, ws: Workspace) -> None:
    conn = _connect(main, autocommit=True)
    with c.expect("empty_result", "fetchone() of a query with no rows"):
        conn.execute("SELECT id FROM orders WHERE id < 0").fetchone()[0]  # type: ignore[index]
    with c.expect("empty_result", "max() over no rows"):
        max(r[0] for r in conn.execute("SELECT total FROM orders WHERE status = 'refunded'"))
    with c.expect("empty_result", "mean of no samples"):
        statistics.mean(
            r[0] for r in conn.execute("SELECT calls FROM pg_stat_statements WHERE calls < 0")
        )
    with c.expect("empty_result", "first row of an empty DataFrame"):
        pd.DataFrame(conn.execute("SELECT * FROM invoices WHERE amount > 1e6").fetchall()).iloc[0]
    with c.expect("empty_result", "percentile of no samples"):
        np.percentile(np.array([], dtype=float), 95)
    with c.expect("empty_result", "statistics.median of an empty sample"):
        statistics.median([])
    with c.expect("empty_result", "DuckDB fetchone() of an empty table"):
        ws.write_table("waits", [("event", "VARCHAR"), ("n", "BIGINT")], [])
        ws.query("SELECT event FROM waits")[0]
    with c.expect("empty_result", "empty sequence to min()"):
        min(row["n"] for row in ws.query("SELECT n FROM waits"))
    conn.close()


def unexpected_faults(c: Collector) -> None:
    """Failures that say nothing about the target or the plan: bugs and misused libraries."""
    pool = ThreadPoolExecutor(1)
    pool.shutdown()
    with c.expect("unexpected", "a task submitted to a pool that was shut down"):
        pool.submit(time.sleep, 0)
    loop = asyncio.new_event_loop()
    loop.close()
    with c.expect("unexpected", "a callback scheduled on a closed event loop"):
        loop.call_soon(time.sleep, 0)
    seen = {"orders": 1, "customers": 2}
    with c.expect("unexpected", "a dict changed while iterated"):
        for key in seen:
            seen[key + "_copy"] = seen[key]

    def nested(depth: int) -> int:
        return nested(depth + 1)

    with c.expect("unexpected", "unbounded recursion"):
        nested(0)


def llm_faults(c: Collector) -> None:
    """The openai client against the scripted server; answers go through OpenAIBrain.ask, the brain's own parser."""

    def brain(server: ScriptedServer, timeout: float = 5.0) -> OpenAIBrain:
        return OpenAIBrain(
            lambda _t, _c: "prompt",
            base_url=server.url,
            api_key="sk-scripted",
            model="gpt-4o-mini",
            timeout=timeout,
            max_repairs=0,
        )

    def client(server: ScriptedServer, timeout: float = 5.0) -> openai.OpenAI:
        return openai.OpenAI(
            base_url=server.url, api_key="sk-scripted", timeout=timeout, max_retries=0
        )

    def ask(cl: openai.OpenAI) -> Any:
        return cl.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "plan"}]
        )

    server = ScriptedServer()
    try:
        rate_bodies = [
            "Rate limit reached for gpt-4o-mini on tokens per min (TPM): Limit 200000, Used 199100, Requested 2400.",
            "Rate limit reached for requests per min (RPM): Limit 500, Used 500, Requested 1. Please try again in 120ms.",
            "Too many requests, please slow down",
            "Server is busy: request queue full (max 64 pending); retry later",
        ]
        for body in rate_bodies:
            server.replies[:] = [Reply(status=429, content=body)]
            with c.expect("llm_rate_limit", "HTTP 429 from the endpoint"):
                ask(client(server))
        server.replies[:] = [
            Reply(status=429, content="Rate limit exceeded: 20 requests per minute")
        ] * 3
        with c.expect("llm_rate_limit", "HTTP 429 through the brain's retries"):
            brain(server).ask("plan.j2", {}, Strategy)
        for delay, timeout in [(0.6, 0.2), (0.8, 0.3)]:
            server.replies[:] = [Reply(delay=delay, content="{}")]
            with c.expect("llm_timeout", "endpoint slower than the client timeout"):
                ask(client(server, timeout=timeout))
        server.replies[:] = [Reply(delay=0.6, content="{}")] * 3
        with c.expect("llm_timeout", "brain call slower than its timeout"):
            brain(server, timeout=0.2).ask("summarize.j2", {}, Summary)
        for status, body in [
            (500, "The server had an error while processing your request."),
            (502, "Bad gateway"),
            (503, "The engine is currently overloaded, please try again later"),
            (401, "Incorrect API key provided: sk-scri*****pted."),
            (404, "The model `gpt-5-turbo` does not exist"),
        ]:
            server.replies[:] = [Reply(status=status, content=body)]
            with c.expect("llm_unavailable", f"HTTP {status} from the endpoint"):
                ask(client(server))
        with c.expect("llm_unavailable", "no endpoint listening"):
            openai.OpenAI(
                base_url=f"http://127.0.0.1:{_free_port()}/v1",
                api_key="sk-x",
                max_retries=0,
                timeout=3,
            ).chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        malformed: list[tuple[str, type[Any]]] = [
            ("Sure! Here is the plan you asked for.", Strategy),
            ('{"team": [{"name": "collector", "role": "extractor"', Strategy),
            ("```json\n{'team': [], 'tasks': []}\n```", Strategy),
            ('{"recommendations": [{"action": "retry",}]}', Recommendations),
            ("I cannot help with that request.", Problems),
            ('{"text": "the database is healthy"} trailing words', Summary),
            ("", Strategy),
            ("<think>let me plan</think>", Recommendations),
        ]
        for content, model in malformed:
            server.replies[:] = [Reply(content=content)]
            with c.expect("llm_malformed_output", f"unparseable answer for {model.__name__}"):
                brain(server).ask("plan.j2", {}, model)
        with c.expect("llm_malformed_output", "json.loads of a chatty answer"):
            json.loads('Here you go: {"tasks": []}')
        wrong_schema: list[tuple[str, type[Any]]] = [
            ('{"plan": [{"step": 1, "do": "collect"}]}', Strategy),
            ('{"team": "collector, checker", "tasks": []}', Strategy),
            ('{"team": [], "tasks": [{"id": "t1", "operator": "collect_settings"}]}', Strategy),
            (
                '{"recommendations": [{"action": "restart_database", "task_id": "t3"}]}',
                Recommendations,
            ),
            ('{"recommendations": "replace the operator"}', Recommendations),
            ('{"problems": [{"kind": "cycle"}]}', Problems),
            ('{"summary": "all good"}', Summary),
            ('{"team": [{"name": "a", "role": "janitor", "goal": "x"}], "tasks": []}', Strategy),
        ]
        for content, model in wrong_schema:
            server.replies[:] = [Reply(content=content)]
            with c.expect(
                "llm_wrong_schema", f"well-formed JSON that does not fit {model.__name__}"
            ):
                brain(server).ask("plan.j2", {}, model)
        for content in ['{"team": 3}', '[{"id": "t1"}]']:
            with c.expect("llm_wrong_schema", "model_validate_json of a wrong shape"):
                Strategy.model_validate_json(content)
    finally:
        server.close()
    for name in ["analyze_everything", "collect_bloat_stats", "optimize_all_queries", "run_sql"]:
        with c.expect("llm_hallucinated_tool", f"registry lookup of an invented operator {name}"):
            get(name)
    for action in ["restart_database", "retry_forever"]:
        with c.expect("llm_hallucinated_tool", f"an invented remedy action {action}"):
            Action(action)


def _team(*agents: tuple[str, str]) -> list[dict[str, Any]]:
    return [{"name": name, "role": role, "goal": "review"} for name, role in agents]


def plan_faults(c: Collector, ws: Workspace, main: EmbeddedPostgres) -> None:
    extractor = ("collector", "extractor")
    for name in ["vacuum_wizard", "explain_all_queries", "fix_indexes"]:
        c.plan_problems(
            "llm_hallucinated_tool",
            f"plan naming an invented operator {name}",
            Strategy.model_validate(
                {
                    "team": _team(extractor),
                    "tasks": [{"id": "t1", "agent": "collector", "operator": name}],
                }
            ),
        )
    for agent, op in [
        ("painter", "paint_table_activity"),
        ("checker", "check_sessions"),
        ("collector", "collect_settings"),
        ("retriever", "collect_table_stats"),
    ]:
        c.plan_problems(
            "missing_agent",
            f"task for {agent}, who is not in the team",
            Strategy.model_validate(
                {
                    "team": _team(("someone_else", "tasker")),
                    "tasks": [{"id": op, "agent": agent, "operator": op}],
                }
            ),
        )
    for agent, role, op in [
        ("painter", "painter", "collect_settings"),
        ("collector", "extractor", "check_sessions"),
        ("summariser", "tasker", "collect_table_stats"),
    ]:
        c.plan_problems(
            "wrong_role",
            f"{op} given to a {role}",
            Strategy.model_validate(
                {
                    "team": _team((agent, role)),
                    "tasks": [{"id": op, "agent": agent, "operator": op}],
                }
            ),
        )
    for task, need in [
        ("check_sessions", "collect_activity"),
        ("check_indexes", "collect_index_stats"),
        ("paint", "summary"),
    ]:
        c.plan_problems(
            "broken_dependency",
            f"{task} needs a task that is not in the plan",
            Strategy.model_validate(
                {
                    "team": _team(extractor),
                    "tasks": [
                        {
                            "id": task,
                            "agent": "collector",
                            "operator": "collect_settings",
                            "needs": [need],
                        }
                    ],
                }
            ),
        )
    for ids in [("a", "b"), ("collect", "check", "report"), ("t1", "t2", "t3", "t4")]:
        tasks = [
            {"id": i, "agent": "collector", "operator": "collect_settings", "needs": [ids[n - 1]]}
            for n, i in enumerate(ids)
        ]
        c.plan_problems(
            "dependency_cycle",
            f"tasks {ids} depend on each other in a ring",
            Strategy.model_validate({"team": _team(extractor), "tasks": tasks}),
        )
        with c.expect("dependency_cycle", f"topological order of the ring {ids}"):
            list(nx.topological_sort(nx.DiGraph([(t["needs"][0], t["id"]) for t in tasks])))
    for dup in ["collect_settings", "t7", "sessions"]:
        c.plan_problems(
            "duplicate_task",
            f"task id {dup} twice",
            Strategy.model_validate(
                {
                    "team": _team(extractor),
                    "tasks": [{"id": dup, "agent": "collector", "operator": "collect_settings"}]
                    * 2,
                }
            ),
        )
    c.plan_problems(
        "duplicate_task",
        "two agents with one name",
        Strategy.model_validate(
            {
                "team": _team(extractor, extractor),
                "tasks": [{"id": "t1", "agent": "collector", "operator": "collect_settings"}],
            }
        ),
    )
    for op, params in [
        ("collect_activity", {"samples": 0}),
        ("collect_activity", {"samples": 500, "window_seconds": -2}),
        ("collect_statements", {"window": 30}),
        ("collect_settings", {"verbose": True}),
        ("check_sessions", {"threshold": 5}),
    ]:
        c.plan_problems(
            "bad_parameter",
            f"plan with bad params for {op}",
            Strategy.model_validate(
                {
                    "team": _team(
                        ("collector", "extractor")
                        if op.startswith("collect")
                        else ("checker", "tasker")
                    ),
                    "tasks": [
                        {
                            "id": op,
                            "agent": "collector" if op.startswith("collect") else "checker",
                            "operator": op,
                            "params": params,
                        }
                    ],
                }
            ),
        )
    for op, params in [
        ("collect_activity", {"window_seconds": "half a minute"}),
        ("collect_activity", {"samples": 61}),
        ("collect_table_stats", {"window_seconds": -30}),
        ("collect_settings", {"limit": 10}),
        ("collect_activity", {"samples": 2.5}),
        ("check_missing_indexes", {"min_size": "1GB"}),
    ]:
        with c.expect("bad_parameter", f"{op} called with {params}"):
            REGISTRY[op].params_model.model_validate(params)
    for text in ["check_sessions", "check_sessions:explode", "collect_activity:timeout:twice"]:
        with c.expect("bad_parameter", f"--inject-fault {text}"):
            FaultSpec.parse(text)
    for field, value in [("window_seconds", "soon"), ("max_replans", "many")]:
        with c.expect("bad_parameter", f"settings {field}={value}"):
            Settings.model_validate({field: value})
    target = parse_target(main.dsn("shop"))
    for op in [
        "collect_table_stats",
        "check_sessions",
        "collect_statements",
        "paint_table_activity",
    ]:
        injector = FaultInjector([FaultSpec.parse(f"{op}:misfit")], target)
        with c.expect("wrong_operator", f"injected misfit in {op}"):
            injector.before(op)
    for table in ["index_stats", "top_queries", "table_stats", "activity", "settings"]:
        with c.expect("broken_dependency", f"workspace table {table} never produced"):
            ws.query(f"SELECT * FROM {table}")
    with c.expect("broken_dependency", "column of an upstream table that was not produced"):
        ws.query("SELECT mean_exec_time FROM waits")


def contradictions(c: Collector, main: EmbeddedPostgres, ws: Workspace) -> None:
    conn = _connect(main, autocommit=True)
    for sql in [
        "SELECT (SELECT id FROM orders WHERE customer_id = 3)",
        "SELECT id, (SELECT amount FROM invoices WHERE amount > 10) FROM orders",
    ]:
        with c.expect("contradictory_results", "one value expected, several found"):
            _query(conn, sql)
    conn.close()
    with c.expect("contradictory_results", "DuckDB scalar subquery with several rows"):
        ws.query("SELECT (SELECT * FROM range(3))")
    dup = duckdb.connect()
    dup.execute("CREATE TABLE verdicts (code VARCHAR PRIMARY KEY, severity VARCHAR)")
    dup.execute("INSERT INTO verdicts VALUES ('index_missing', 'warning')")
    with c.expect("contradictory_results", "two tasks record different verdicts for one finding"):
        dup.execute("INSERT INTO verdicts VALUES ('index_missing', 'critical')")
    left = pd.DataFrame({"relid": [1, 1, 2], "size": [10, 12, 30]})
    right = pd.DataFrame({"relid": [1, 2], "scans": [5, 6]})
    with c.expect("contradictory_results", "two snapshots disagree on a key that should be unique"):
        left.merge(right, on="relid", validate="one_to_one")


def budget_faults(c: Collector) -> None:
    server = ScriptedServer()
    cl = openai.OpenAI(base_url=server.url, api_key="sk-scripted", max_retries=0, timeout=5)
    try:
        for status, body in [
            (429, "You exceeded your current quota, please check your plan and billing details."),
            (
                400,
                "This model's maximum context length is 128000 tokens. However, your messages resulted in 131072 tokens.",
            ),
            (
                400,
                "This model's maximum context length is 8192 tokens; you requested 9120 tokens (8000 in the messages, 1120 in the completion).",
            ),
            (402, "Insufficient credits: this request needs 2.1 credits, your balance is 0.0"),
        ]:
            server.replies[:] = [Reply(status=status, content=body)]
            with c.expect("budget_exhausted", f"HTTP {status}: out of quota or context"):
                cl.chat.completions.create(
                    model="gpt-4o-mini", messages=[{"role": "user", "content": "plan"}]
                )
    finally:
        server.close()


def collect() -> Collector:
    c = Collector()
    with tempfile.TemporaryDirectory(prefix="dbcrew-errors-") as tmp:
        root = Path(tmp)
        main, bare = _servers(root)
        ws = Workspace(root / "workspace.duckdb")
        steps: list[Callable[[], None]] = [
            lambda: connection_faults(c, main),
            lambda: authentication_faults(c, main),
            lambda: dropped_connections(c, main),
            lambda: permission_faults(c, main),
            lambda: read_only_faults(c, main),
            lambda: timeout_faults(c, main),
            lambda: lock_faults(c, main),
            lambda: concurrency_faults(c, main),
            lambda: catalog_faults(c, main, bare),
            lambda: input_faults(c, main),
            lambda: resource_faults(c, main),
            lambda: empty_results(c, main, ws),
            lambda: llm_faults(c),
            lambda: plan_faults(c, ws, main),
            lambda: contradictions(c, main, ws),
            lambda: budget_faults(c),
            lambda: unexpected_faults(c),
        ]
        try:
            for step in steps:
                step()
        finally:
            ws.close()
            main.stop()
            bare.stop()
    return c


def main() -> None:
    c = collect()
    cases = sorted(
        {(x.leaf, x.error_type, x.message): x for x in c.cases}.values(),
        key=lambda x: (x.leaf, x.source, x.message),
    )
    header = (
        "# Real error messages provoked by bench/collect_errors.py (rerun it to refresh): what a worker reports\n"
        "# to the monitor (exception class, first line of its text) and the leaf it belongs to. The test set of\n"
        "# the error-tree classifier; never copied into tree.yaml.\n"
    )
    LABELLED_PATH.write_text(
        header
        + yaml.safe_dump([asdict(x) for x in cases], sort_keys=False, allow_unicode=True, width=200)
    )
    per_leaf = Counter(x.leaf for x in cases)
    print(
        f"{len(cases)} distinct cases ({len(c.cases)} provoked) over {len(per_leaf)} leaves -> {LABELLED_PATH}"
    )
    for leaf, n in sorted(per_leaf.items()):
        print(f"  {leaf:24} {n}")
    for miss in c.silent:
        print(f"  did not fail: {miss}")


if __name__ == "__main__":
    main()
