"""A clean, freshly loaded (and analyzed) database: no warning or critical finding, with default thresholds."""

from __future__ import annotations

from pathlib import Path

import psycopg

from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.settings.thresholds import Thresholds
from tests.integration.health.clinic import flush_statistics
from tests.integration.health.conftest import review

FRESH = """
CREATE EXTENSION pg_stat_statements;
CREATE TABLE customers (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, email text NOT NULL UNIQUE, created_at timestamptz NOT NULL);
CREATE TABLE products (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, name text NOT NULL, price numeric(10, 2) NOT NULL);
CREATE TABLE orders (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, customer_id bigint NOT NULL REFERENCES customers (id),
                     created_at timestamptz NOT NULL);
CREATE TABLE order_items (order_id bigint NOT NULL REFERENCES orders (id), product_id bigint NOT NULL REFERENCES products (id),
                          quantity int NOT NULL, PRIMARY KEY (order_id, product_id));
INSERT INTO customers (email, created_at) SELECT 'c' || g || '@example.com', now() - g * interval '1 minute' FROM generate_series(1, 20000) g;
INSERT INTO products (name, price) SELECT 'p' || g, g % 100 + 0.99 FROM generate_series(1, 500) g;
INSERT INTO orders (customer_id, created_at) SELECT 1 + g % 20000, now() - g * interval '1 second' FROM generate_series(1, 50000) g;
INSERT INTO order_items SELECT o, 1 + (o * 7) % 500, 1 + o % 3 FROM generate_series(1, 50000) o;
CREATE INDEX orders_customer_id_idx ON orders (customer_id);
CREATE INDEX order_items_product_id_idx ON order_items (product_id);
"""


def test_clean_database_has_no_problem(pg: EmbeddedPostgres, tmp_path: Path):
    pg.psql("CREATE DATABASE fresh;")
    dsn = pg.dsn("fresh")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(FRESH)
        flush_statistics(conn)  # or the load's counts can land after the ANALYZE, as changes since
        conn.execute("ANALYZE")
        for i in range(1, 200):
            conn.execute("SELECT * FROM orders WHERE customer_id = %s", [i])
            conn.execute("SELECT * FROM customers WHERE email = %s", [f"c{i}@example.com"])
    report = review(dsn, tmp_path, thresholds=Thresholds())
    assert [(f.code, f.object, f.severity.value) for f in report.findings if f.is_problem] == []
    assert {c.status.value for c in report.coverage} == {"ran"}
    # Without hypopg the index advice is heuristic, and the report says so (info, not a problem).
    assert ("extension_missing", "hypopg", "info") in {
        (f.code, f.object, f.severity.value) for f in report.findings
    }
