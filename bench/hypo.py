"""Bench section `hypo`: how long the hypopg advisor takes for 20 normalized statements.

Runs on Debian's PostgreSQL 15 with postgresql-15-hypopg (installed by `make test` as root, or the hypopg
integration test's set-up); prints a line saying so and returns when they are absent. The
advisor runs through the review's read-only session, as in a review.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.operators.hypothetical_indexes import Statement, advise
from dbcrew.targets import parse_target

PG15_BIN = Path("/usr/lib/postgresql/15/bin")
HYPOPG_CONTROL = Path("/usr/share/postgresql/15/extension/hypopg.control")
ROUNDS = 5

SCHEMA = """
CREATE EXTENSION hypopg;
CREATE TABLE customers (id int PRIMARY KEY, email text NOT NULL, country int NOT NULL, tier int NOT NULL,
                        created_at timestamptz NOT NULL);
INSERT INTO customers SELECT g, 'c' || g || '@example.com', g % 50, g % 4, now() - g * interval '1 minute'
FROM generate_series(1, 50000) AS g;
CREATE TABLE orders (id bigint PRIMARY KEY, customer_id int NOT NULL, status int NOT NULL, shop int NOT NULL,
                     total numeric NOT NULL, created_at timestamptz NOT NULL);
INSERT INTO orders SELECT g, (g::bigint * 7919) % 50000, g % 5, (g / 5) % 200, g % 1000, now() - g * interval '1 second'
FROM generate_series(1, 300000) AS g;
CREATE INDEX orders_status ON orders (status);
CREATE TABLE events (id bigint PRIMARY KEY, order_id bigint NOT NULL, kind int NOT NULL, region int NOT NULL,
                     channel int NOT NULL, at timestamptz NOT NULL);
INSERT INTO events SELECT g, g / 2, g % 20, g % 100, (g / 100) % 100, now() - g * interval '1 second'
FROM generate_series(1, 300000) AS g;
CREATE TABLE countries (id int PRIMARY KEY, name text NOT NULL);
INSERT INTO countries SELECT g, 'country ' || g FROM generate_series(1, 50) AS g;
VACUUM ANALYZE;
"""

STATEMENTS = [
    "SELECT * FROM customers WHERE email = $1",
    "SELECT * FROM customers WHERE id = $1",
    "SELECT * FROM customers WHERE country = $1 AND tier = $2",
    "SELECT * FROM customers WHERE created_at > $1",
    "SELECT count(*) FROM customers WHERE country = $1 AND tier = $2 AND created_at < $3",
    "SELECT * FROM orders WHERE customer_id = $1",
    "SELECT * FROM orders WHERE customer_id = $1 AND status = $2",
    "SELECT * FROM orders WHERE status = $1 AND shop = $2",
    "SELECT * FROM orders WHERE shop = $1 AND created_at > $2 AND total > $3",
    "SELECT sum(total) FROM orders WHERE created_at >= $1 AND created_at < $2",
    "UPDATE orders SET status = $1 WHERE id = $2",
    "DELETE FROM orders WHERE customer_id = $1 AND created_at < $2",
    "SELECT * FROM events WHERE order_id = $1",
    "SELECT * FROM events WHERE region = $1 AND channel = $2",
    "SELECT * FROM events WHERE kind = $1 AND region = $2 AND channel = $3 AND at > $4",
    "SELECT count(*) FROM events WHERE kind = $1",
    "UPDATE events SET kind = $1 WHERE order_id = $2",
    "SELECT * FROM countries WHERE name = $1",
    "SELECT * FROM events e JOIN orders o ON o.id = e.order_id WHERE o.customer_id = $1",
    "VACUUM events",
]


def main() -> None:
    if not ((PG15_BIN / "postgres").exists() and HYPOPG_CONTROL.exists()):
        print(
            "needs Debian's postgresql-15 and postgresql-15-hypopg (apt-get install, or `make test` as root): not measured"
        )
        return
    work = Path(tempfile.mkdtemp(prefix="dbcrew-bench-hypo-"))
    pg = EmbeddedPostgres(work / "pgdata", bin_dir=PG15_BIN).start()
    try:
        pg.psql("CREATE DATABASE hypo;")
        pg.psql(SCHEMA, dbname="hypo")
        statements = [Statement(q, 100, 1000.0) for q in STATEMENTS]
        with parse_target(pg.dsn("hypo")).session() as conn:
            version = int(conn.execute("SHOW server_version_num").fetchone()["server_version_num"])
            timings = []
            for _ in range(ROUNDS):
                started = time.perf_counter()
                advice = advise(conn, statements, version)
                timings.append(time.perf_counter() - started)
    finally:
        pg.stop()
        shutil.rmtree(work, ignore_errors=True)  # a cluster of up to a few GB: never left in /tmp
    timings.sort()
    print(
        f"hypopg advisor, PostgreSQL {version}, {len(statements)} statements, {ROUNDS} rounds, 2 cores"
    )
    print(
        f"  wall time per round: median {timings[len(timings) // 2] * 1000:7.1f} ms, worst {timings[-1] * 1000:7.1f} ms"
    )
    print(
        f"  plans asked per round: {advice.plans} ({advice.plans / len(statements):.1f} per statement)"
    )
    print(f"  suggestions: {len(advice.suggestions)}, statements skipped: {len(advice.skipped)}")
    for s in advice.suggestions:
        print(
            f"    {s.ddl:70s} cost {s.cost_before:9.1f} -> {s.cost_after:8.1f} ({s.saving:.0%}), serves {len(s.proofs)}"
        )
    for query, reason in advice.skipped:
        print(f"    skipped: {query[:60]:60s} {reason}")
