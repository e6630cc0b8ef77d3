"""The demo shop: a small schema, a workload, and planted problems a review must find.

Used by `dbcrew demo`, the integration tests and the benchmarks. Everything here writes to its
own embedded database; the review itself stays read-only.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field

import psycopg

SCHEMA = """
CREATE EXTENSION IF NOT EXISTS pg_stat_statements;
CREATE TABLE customers (id bigserial PRIMARY KEY, email text NOT NULL, name text NOT NULL,
                        created_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE products (id bigserial PRIMARY KEY, name text NOT NULL, price numeric(10,2) NOT NULL);
CREATE TABLE orders (id bigserial PRIMARY KEY, customer_id bigint NOT NULL REFERENCES customers,
                     status text NOT NULL, total numeric(12,2) NOT NULL, created_at timestamptz NOT NULL);
CREATE TABLE order_items (id bigserial PRIMARY KEY, order_id bigint NOT NULL REFERENCES orders,
                          product_id bigint NOT NULL REFERENCES products, qty int NOT NULL);
CREATE TABLE cart_items (id bigserial PRIMARY KEY, customer_id bigint NOT NULL REFERENCES customers,
                         product_id bigint NOT NULL REFERENCES products, qty int NOT NULL,
                         updated_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE audit_log (happened_at timestamptz NOT NULL DEFAULT now(), action text NOT NULL, detail text);

INSERT INTO customers (email, name, created_at)
  SELECT 'user' || g || '@example.com', 'Customer ' || g, now() - (g % 900) * interval '1 day'
  FROM generate_series(1, 50000) g;
INSERT INTO products (name, price) SELECT 'Product ' || g, (g % 200) + 0.99 FROM generate_series(1, 1000) g;
INSERT INTO orders (customer_id, status, total, created_at)
  SELECT 1 + (g * 7919) % 50000, (ARRAY['new','paid','shipped','delivered'])[1 + g % 4], (g % 500) + 9.5,
         now() - (g % 365) * interval '1 day'
  FROM generate_series(1, 100000) g;
INSERT INTO order_items (order_id, product_id, qty)
  SELECT 1 + g % 100000, 1 + (g * 31) % 1000, 1 + g % 3 FROM generate_series(1, 150000) g;
INSERT INTO cart_items (customer_id, product_id, qty)
  SELECT 1 + g % 50000, 1 + g % 1000, 1 FROM generate_series(1, 30000) g;
INSERT INTO audit_log (action, detail) SELECT 'login', 'customer ' || g FROM generate_series(1, 5000) g;

CREATE INDEX orders_customer_created_idx ON orders (customer_id, created_at);
CREATE INDEX order_items_order_id_idx ON order_items (order_id);
CREATE INDEX order_items_product_id_idx ON order_items (product_id);
CREATE INDEX cart_items_customer_id_idx ON cart_items (customer_id);
CREATE INDEX cart_items_product_id_idx ON cart_items (product_id);
"""

# Each plant: (code, object) the review must report, and the SQL that creates the condition.
PLANT_SQL = {
    (
        "index_duplicate",
        "public.orders_customer_id_idx",
    ): "CREATE INDEX orders_customer_id_idx ON orders (customer_id);",
    (
        "autovacuum_disabled",
        "public.cart_items",
    ): "ALTER TABLE cart_items SET (autovacuum_enabled = false);",
    (
        "dead_tuples_high",
        "public.cart_items",
    ): "UPDATE cart_items SET qty = qty + 1; UPDATE cart_items SET qty = qty + 1;",
    ("table_without_primary_key", "public.audit_log"): "",  # created without one above
    ("index_missing", "public.customers(email)"): "",  # no index on the hot lookup column
}
# Fails on duplicate statuses and leaves the index behind, invalid.
INVALID_INDEX_SQL = "CREATE UNIQUE INDEX CONCURRENTLY orders_status_uniq ON orders (status)"
# Past the idle_in_transaction check's default threshold (30 s): what the demo waits for.
IDLE_SECONDS = 31.0
# The threshold a test gives the check instead (Thresholds.idle_in_transaction_seconds, or `--threshold`):
# the planted session is this old once the shop is built and its first workload ran, so a test sees it
# through the same check without waiting out the default.
QUICK_IDLE_SECONDS = 2.0
# The tests' workload (run_rounds): fifteen times the index_missing check's 20 sequential scans of
# customers. 6 s of run_workload made 164 rounds on a 2-core host at a load average of 10, their email
# lookups 1.2 s in all; 300 rounds took 0.6 s of lookups there when quiet, 2.0 s at that load.
WORKLOAD_ROUNDS = 300


@dataclass
class DemoShop:
    """The planted database, with the workload running and one session idle in a transaction."""

    dsn: str
    expected: set[tuple[str, str]] = field(default_factory=set)
    _idle: psycopg.Connection | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _worker: threading.Thread | None = None
    _idle_since: float = 0.0

    def build(self) -> DemoShop:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(SCHEMA)
            for sql in PLANT_SQL.values():
                if sql:
                    conn.execute(sql)
            try:
                conn.execute(INVALID_INDEX_SQL)
            except psycopg.errors.UniqueViolation:
                pass  # expected: that failure is the plant
            # A backend flushes its table statistics at most once a second (PostgreSQL 15+): flush the
            # writes above now, or they land after the ANALYZE as "changed since analyze".
            conn.execute("SELECT pg_stat_force_next_flush()")
            conn.execute("ANALYZE")
        self.expected = set(PLANT_SQL) | {("index_invalid", "public.orders_status_uniq")}
        self._idle = psycopg.connect(self.dsn, application_name="shop-batch")
        self._idle.execute(
            "SELECT count(*) FROM audit_log"
        )  # opens the transaction and leaves it open
        self._idle_since = time.monotonic()
        pid = self._idle.info.backend_pid
        self.expected.add(("idle_in_transaction", f"pid:{pid}"))
        return self

    def run_workload(self, seconds: float = 8.0) -> None:
        """The shop's traffic for `seconds`, paced like a web front end (`dbcrew demo`, the background load)."""
        with self._web() as conn:
            deadline = time.monotonic() + seconds
            rng = random.Random(7)
            while time.monotonic() < deadline and not self._stop.is_set():
                self._round(conn, rng)
                time.sleep(0.02)

    def run_rounds(self, rounds: int = WORKLOAD_ROUNDS) -> None:
        """The shop's traffic, `rounds` rounds of it back to back: what a test reads off the statistics
        (seq scans of customers, each statement's calls) is the same on a fast or a slow host, where a
        time-bounded run counts what the host managed in the time."""
        with self._web() as conn:
            rng = random.Random(7)
            for _ in range(rounds):
                self._round(conn, rng)
            # A backend flushes its table statistics at most once a second: a fast host's rounds fit in
            # less, and their scans would reach pg_stat_user_tables at the backend's exit, racing a review.
            conn.execute("SELECT pg_stat_force_next_flush()")

    def _web(self) -> psycopg.Connection:
        return psycopg.connect(self.dsn, autocommit=True, application_name="shop-web")

    @staticmethod
    def _round(conn: psycopg.Connection, rng: random.Random) -> None:
        """One visit: an email lookup (no index: a sequential scan of the 50,000 customers), the
        customer's order history (indexed) and a product read (by primary key)."""
        customer = rng.randint(1, 50000)
        conn.execute(
            "SELECT id, name FROM customers WHERE email = %s", (f"user{customer}@example.com",)
        )
        conn.execute(
            "SELECT id, status, total FROM orders WHERE customer_id = %s ORDER BY created_at DESC LIMIT 10",
            (customer,),
        )
        conn.execute("SELECT name, price FROM products WHERE id = %s", (rng.randint(1, 1000),))

    def start_background_workload(self) -> None:
        self._worker = threading.Thread(
            target=self.run_workload, args=(3600.0,), name="shop-workload", daemon=True
        )
        self._worker.start()

    def wait_until_idle_long_enough(self, seconds: float = IDLE_SECONDS) -> None:
        """Until the planted session has been idle in its transaction for `seconds`."""
        time.sleep(max(0.0, seconds - (time.monotonic() - self._idle_since)))

    def idle_object(self) -> str:
        """The planted idle session as a finding names it (`pid:<n>`)."""
        return next(obj for code, obj in self.expected if code == "idle_in_transaction")

    def close(self) -> None:
        self._stop.set()
        if self._worker is not None:
            self._worker.join(timeout=10)
        if self._idle is not None:
            self._idle.close()
