"""Missing-index advice proven with hypopg, on Debian's PostgreSQL 15 + postgresql-15-hypopg (1.3.1).

The set-up installs the two Debian packages when they are absent (as root, with apt-get) and
fails, never skips, when it cannot: the hypopg path is an acceptance point of the catalogue.
The advisor itself runs through the review's read-only session, as it will in a review.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.operators.hypothetical_indexes import (
    HypopgMissing,
    Statement,
    advise,
    generic_plan_cost,
    hide_index_effect,
)
from dbcrew.targets import parse_target

PG15_BIN = Path("/usr/lib/postgresql/15/bin")
HYPOPG_CONTROL = Path("/usr/share/postgresql/15/extension/hypopg.control")
PACKAGES = ("postgresql-15", "postgresql-15-hypopg")

SCHEMA = """
CREATE EXTENSION pg_stat_statements;
CREATE EXTENSION hypopg;
CREATE ROLE monitor LOGIN;
GRANT pg_monitor TO monitor;
CREATE TABLE events (
    id bigserial PRIMARY KEY, account_id int NOT NULL, device_id int NOT NULL,
    region int NOT NULL, channel int NOT NULL, payload text NOT NULL);
INSERT INTO events (account_id, device_id, region, channel, payload)
SELECT (g::bigint * 7919) % 20000, (g::bigint * 104729) % 20000, g % 100, (g / 100) % 100, repeat('x', 40)
FROM generate_series(1, 200000) AS g;
CREATE INDEX events_device_id ON events (device_id);
CREATE TABLE tiny (id int PRIMARY KEY, code text NOT NULL);
INSERT INTO tiny SELECT g, 'c' || g FROM generate_series(1, 50) AS g;
CREATE TABLE readings (id int NOT NULL, sensor int NOT NULL, doc json) PARTITION BY RANGE (id);
CREATE TABLE readings_1 PARTITION OF readings FOR VALUES FROM (0) TO (50000);
CREATE TABLE readings_2 PARTITION OF readings FOR VALUES FROM (50000) TO (100000);
INSERT INTO readings SELECT g, g % 5000, NULL FROM generate_series(0, 99999) AS g;
ANALYZE readings;
VACUUM ANALYZE events;
VACUUM ANALYZE tiny;
"""

# Run with constants, so pg_stat_statements keeps them normalized ($1 ...).
WORKLOAD = """
SELECT pg_stat_statements_reset();
SELECT * FROM events WHERE account_id = 42;
SELECT * FROM events WHERE account_id = 43;
SELECT * FROM events WHERE device_id = 7;
SELECT * FROM events WHERE region = 3 AND channel = 5;
SELECT * FROM tiny WHERE code = 'c7';
"""


def _ensure_debian_pg15() -> None:
    """Install postgresql-15 and postgresql-15-hypopg when absent; fail with the reason when impossible."""
    if (PG15_BIN / "postgres").exists() and HYPOPG_CONTROL.exists():
        return
    wanted = " ".join(PACKAGES)
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        pytest.fail(
            f"Debian's {wanted} are not installed and this run cannot install them (needs root and apt-get): "
            f"run `apt-get install -y {wanted}` or `make test` as root"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", *PACKAGES]
    if subprocess.run(install, env=env, capture_output=True, text=True).returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, text=True)
        result = subprocess.run(install, env=env, capture_output=True, text=True)
        if result.returncode != 0:
            pytest.fail(f"apt-get install {wanted} failed: {result.stderr.strip()[-500:]}")


@pytest.fixture(scope="module")
def pg15(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedPostgres]:
    """Debian's PostgreSQL 15 with pg_stat_statements preloaded, a 200k-row table and the workload run."""
    _ensure_debian_pg15()
    server = EmbeddedPostgres(tmp_path_factory.mktemp("pg15") / "data", bin_dir=PG15_BIN).start()
    try:
        server.psql("CREATE DATABASE hypo;")
        server.psql(SCHEMA, dbname="hypo")
        server.psql(WORKLOAD, dbname="hypo")
        yield server
    finally:
        server.stop()


@pytest.fixture()
def session15(pg15: EmbeddedPostgres) -> Iterator[Any]:
    with parse_target(pg15.dsn("hypo")).session() as conn:
        yield conn


def _statements(conn: Any) -> list[Statement]:
    rows = conn.execute(
        "SELECT query, calls, total_exec_time FROM pg_stat_statements"
        " WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
        " AND query ~ '^SELECT \\* FROM' ORDER BY total_exec_time DESC"
    ).fetchall()
    return [Statement(r["query"], r["calls"], r["total_exec_time"]) for r in rows]


def _our_prepared(conn: Any) -> int:
    """The advisor's own PREPAREd statements still alive (psycopg's automatic ones are named _pg3_*)."""
    return int(
        conn.execute(
            "SELECT count(*) AS n FROM pg_prepared_statements WHERE name LIKE 'dbcrew_generic%'"
        ).fetchone()["n"]
    )


def _version(conn: Any) -> int:
    return int(conn.execute("SHOW server_version_num").fetchone()["server_version_num"])


def test_advisor_proves_the_missing_index_in_a_read_only_session(session15: Any) -> None:
    conn = session15
    assert (
        conn.execute("SHOW default_transaction_read_only").fetchone()[
            "default_transaction_read_only"
        ]
        == "on"
    )
    version = _version(conn)
    assert 150000 <= version < 160000
    statements = _statements(conn)
    assert any("account_id = $1" in s.query for s in statements), statements

    advice = advise(conn, statements, version, min_saving=0.5)

    by_columns = {(s.schema, s.table, s.columns): s for s in advice.suggestions}
    account = by_columns[("public", "events", ("account_id",))]
    assert account.ddl == "CREATE INDEX CONCURRENTLY ON public.events (account_id);"
    assert account.cost_before > 1000 and account.cost_after < account.cost_before / 10
    assert account.saving > 0.9
    assert account.estimated_bytes > 1_000_000
    assert account.proofs[0].calls == 2 and "$1" in account.proofs[0].query
    # Neither column alone is selective (2,000 rows each); the pair is (20 rows): pass 2 finds it.
    pair = [s for s in advice.suggestions if set(s.columns) == {"region", "channel"}]
    assert len(pair) == 1 and len(pair[0].columns) == 2
    assert pair[0].saving >= 0.5
    assert set(by_columns) == {
        ("public", "events", ("account_id",)),
        ("public", "events", pair[0].columns),
    }
    skipped = dict(advice.skipped)
    tiny = next(q for q in skipped if "FROM tiny" in q)
    assert "not worth an index" in skipped[tiny]

    # Nothing left behind: no hypothetical index, no prepared statement, the session still usable.
    assert conn.execute("SELECT count(*) AS n FROM hypopg_list_indexes").fetchone()["n"] == 0
    assert _our_prepared(conn) == 0
    assert conn.execute("SHOW plan_cache_mode").fetchone()["plan_cache_mode"] == "auto"


def test_advisor_skips_columns_an_index_already_serves(session15: Any) -> None:
    conn = session15
    device = [s for s in _statements(conn) if "device_id = $1" in s.query]
    assert device
    advice = advise(conn, device, _version(conn))
    assert advice.suggestions == []
    assert advice.skipped == [(device[0].query, "every filter column already leads a btree index")]
    # Told that (device_id) is not indexed, the advisor plans it, and the real index already makes it cheap.
    told_nothing = advise(conn, device, _version(conn), indexed={("public", "events"): []})
    assert told_nothing.suggestions == []
    assert "not worth an index" in told_nothing.skipped[0][1]
    # Told that an index leads with account_id, the advisor believes the caller and tries nothing.
    account = Statement("SELECT * FROM events WHERE account_id = $1", 1, 1.0)
    told_wrong = advise(
        conn, [account], _version(conn), indexed={("public", "events"): [["account_id", "region"]]}
    )
    assert told_wrong.suggestions == [] and told_wrong.plans == 0
    assert told_wrong.skipped == [
        (account.query, "every filter column already leads a btree index")
    ]


def test_a_higher_saving_threshold_withholds_the_suggestion(session15: Any) -> None:
    conn = session15
    pair_stmt = [s for s in _statements(conn) if "region = $1" in s.query]
    lenient = advise(conn, pair_stmt, _version(conn), min_saving=0.5)
    assert len(lenient.suggestions) == 1
    saving = lenient.suggestions[0].saving
    strict = advise(conn, pair_stmt, _version(conn), min_saving=min(saving + 0.01, 0.999))
    assert strict.suggestions == []


def test_generic_plan_cost_of_normalized_statements_on_pg15(session15: Any) -> None:
    conn = session15
    version = _version(conn)
    cost = generic_plan_cost(
        conn, "SELECT * FROM events WHERE account_id = $1 AND region < $2", version
    )
    assert cost.total is not None and cost.total > 1000 and cost.reason is None
    utility = generic_plan_cost(conn, "VACUUM events", version)
    assert utility.total is None and "utility statement" in (utility.reason or "")
    missing = generic_plan_cost(conn, "SELECT * FROM no_such_table WHERE a = $1", version)
    assert missing.total is None and "UndefinedTable" in (missing.reason or "")
    # Prepared, then failing in the planner (constant folding): reported, and the PREPARE deallocated.
    failing = generic_plan_cost(conn, "SELECT * FROM events WHERE account_id = 1 / 0", version)
    assert failing.total is None and "DivisionByZero" in (failing.reason or "")
    assert _our_prepared(conn) == 0
    # Planned, never run: an UPDATE's plan in the read-only session, and the table unchanged.
    update = generic_plan_cost(
        conn, "UPDATE events SET payload = $1 WHERE account_id = $2", version
    )
    assert update.total is not None
    assert (
        conn.execute(
            "SELECT count(*) AS n FROM events WHERE payload <> repeat('x', 40)"
        ).fetchone()["n"]
        == 0
    )
    assert _our_prepared(conn) == 0


def test_hide_index_reports_unavailable_on_hypopg_1_3(session15: Any) -> None:
    conn = session15
    assert (
        conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'hypopg'").fetchone()[
            "extversion"
        ]
        == "1.3.1"
    )
    oid = conn.execute("SELECT 'public.events_device_id'::regclass::oid AS oid").fetchone()["oid"]
    effect = hide_index_effect(
        conn, oid, ["SELECT * FROM events WHERE device_id = $1"], _version(conn)
    )
    assert not effect.available and effect.costs == ()
    assert effect.reason == "unavailable: hypopg 1.3.1 < 1.4 (no hypopg_hide_index)"


def test_generic_plan_on_pg18_matches_the_prepared_path(pg: EmbeddedPostgres) -> None:
    """PostgreSQL 16+ has EXPLAIN (GENERIC_PLAN); the PREPARE path used before 16 must plan the same."""
    pg.psql("CREATE DATABASE hypo18;")
    pg.psql(
        "CREATE TABLE items (id int PRIMARY KEY, sku int NOT NULL);"
        "INSERT INTO items SELECT g, g % 500 FROM generate_series(1, 20000) AS g; ANALYZE items;",
        dbname="hypo18",
    )
    with parse_target(pg.dsn("hypo18")).session() as conn:
        version = _version(conn)
        assert version >= 160000
        query = "SELECT * FROM items WHERE sku = $1 AND id > $2"
        native = generic_plan_cost(conn, query, version)
        prepared = generic_plan_cost(conn, query, 150000)
        assert native.total is not None and native.total > 100
        assert native == prepared
        with pytest.raises(HypopgMissing):
            advise(conn, [Statement(query, 1, 1.0)], version)


def test_a_pg_monitor_role_gets_the_reason_instead_of_a_plan(pg15: EmbeddedPostgres) -> None:
    """pg_monitor reads pg_stat_statements but may not plan statements on tables it cannot SELECT."""
    with parse_target(pg15.dsn("hypo", user="monitor")).session() as conn:
        statements = [s for s in _statements(conn) if "account_id = $1" in s.query]
        assert statements
        advice = advise(conn, statements, _version(conn))
        assert advice.suggestions == []
        assert advice.skipped == [
            (
                statements[0].query,
                "cannot be planned: InsufficientPrivilege: permission denied for table events",
            )
        ]


def test_a_refused_plan_on_a_session_with_automatic_prepared_statements_gives_the_reason(
    pg15: EmbeddedPostgres,
) -> None:
    """psycopg prepares a query it has run prepare_threshold times, and its rollback of a failed
    transaction then sends DEALLOCATE ALL, taking the advisor's own PREPAREd statement with it: the
    refusal must still read as the privilege it is, not as a statement that does not exist."""
    with parse_target(pg15.dsn("hypo", user="monitor")).session() as conn:
        threshold = conn.prepare_threshold
        assert threshold is not None
        for _ in range(threshold + 1):
            conn.execute("SELECT 1 AS one").fetchone()
        assert conn.execute(
            "SELECT count(*) AS n FROM pg_prepared_statements WHERE NOT from_sql"
        ).fetchone()["n"], "psycopg prepared nothing: the case this test is for did not arise"
        statements = [s for s in _statements(conn) if "account_id = $1" in s.query]
        advice = advise(conn, statements, _version(conn))
        assert advice.skipped == [
            (
                statements[0].query,
                "cannot be planned: InsufficientPrivilege: permission denied for table events",
            )
        ]
        assert _our_prepared(conn) == 0


def test_a_single_column_suggestion_folds_into_the_pair_it_leads(session15: Any) -> None:
    conn = session15
    region = Statement("SELECT * FROM events WHERE region = $1", 5, 50.0)

    def advised(pair_query: str) -> dict[tuple[str, ...], Any]:
        advice = advise(
            conn, [Statement(pair_query, 1, 100.0), region], _version(conn), min_saving=0.4
        )
        return {s.columns: s for s in advice.suggestions}

    # (region) alone saves about half; (region, channel) serves that statement too: one index, two proofs.
    folded = advised("SELECT * FROM events WHERE region = $1 AND channel = $2")
    assert list(folded) == [("region", "channel")]
    assert [p.query for p in folded[("region", "channel")].proofs] == [
        "SELECT * FROM events WHERE region = $1 AND channel = $2",
        region.query,
    ]
    assert folded[("region", "channel")].proofs[1].saving >= 0.4
    # (channel, region) does not lead with region: both indexes stay.
    kept = advised("SELECT * FROM events WHERE channel = $1 AND region = $2")
    assert set(kept) == {("channel", "region"), ("region",)}


def test_partitioned_tables_get_plain_create_index_and_json_columns_a_reason(
    session15: Any,
) -> None:
    conn = session15
    sensor = Statement("SELECT * FROM readings WHERE sensor = $1", 10, 100.0)
    doc = Statement("SELECT * FROM readings_1 WHERE doc IS NULL", 10, 50.0)
    advice = advise(conn, [sensor, doc], _version(conn))
    assert [s.ddl for s in advice.suggestions] == [
        "CREATE INDEX ON public.readings (sensor);"
    ]  # no CONCURRENTLY there
    assert advice.suggestions[0].saving > 0.5
    assert advice.skipped == [
        (
            doc.query,
            "no hypothetical index could be planned: "
            'data type json has no default operator class for access method "btree"',
        )
    ]


def test_a_review_on_pg15_proves_its_index_advice_and_says_why_no_hide(
    pg15: EmbeddedPostgres, tmp_path: Path
) -> None:
    from dbcrew.roles.crew.context import RunContext
    from dbcrew.roles.spine import PlainPhases, review
    from dbcrew.settings.run import Settings

    pg15.psql("CREATE DATABASE shop15;")
    pg15.psql(
        "CREATE EXTENSION pg_stat_statements; CREATE EXTENSION hypopg;"
        " CREATE TABLE orders (id int PRIMARY KEY, customer int NOT NULL, status int NOT NULL);"
        " INSERT INTO orders SELECT g, g % 9000, g % 5 FROM generate_series(1, 120000) g;"
        " CREATE INDEX orders_status_idx ON orders (status); CREATE INDEX orders_status_customer_idx ON orders (status, customer);"
        " VACUUM ANALYZE orders; SELECT pg_stat_statements_reset();"
        " SELECT count(*) FROM orders WHERE customer = 17; SELECT count(*) FROM orders WHERE customer = 18;",
        dbname="shop15",
    )
    run = RunContext(
        target=parse_target(pg15.dsn("shop15")),
        settings=Settings(window_seconds=1.0, activity_samples=2),
        out_dir=tmp_path,
    )
    report = review(run, PlainPhases)
    missing = [f for f in report.findings if f.code == "index_missing"]
    assert [f.object for f in missing] == ["public.orders(customer)"]
    proof = missing[0].evidence
    assert proof["cost_after"] < proof["cost_before"] / 2 and missing[0].confidence == 0.9
    assert missing[0].fix_sql == "CREATE INDEX CONCURRENTLY ON public.orders (customer);"
    duplicate = next(f for f in report.findings if f.code == "index_duplicate")
    assert duplicate.object == "public.orders_status_idx"
    assert (
        duplicate.evidence["if_dropped"] == "unavailable: hypopg 1.3.1 < 1.4 (no hypopg_hide_index)"
    )
    assert not any(f.code == "extension_missing" and f.object == "hypopg" for f in report.findings)


def test_a_pg_monitor_review_falls_back_to_the_heuristic_and_names_the_grant(
    pg15: EmbeddedPostgres, tmp_path: Path
) -> None:
    """The README's role (pg_monitor) with hypopg installed: EXPLAIN needs SELECT on the table, so the
    advice cannot prove the index. The table's sequential scans still show it, the check is partial,
    and the coverage carries the GRANT that lets the review prove it next time."""
    from dbcrew.roles.crew.context import RunContext
    from dbcrew.roles.spine import PlainPhases, review
    from dbcrew.settings.run import Settings

    pg15.psql("CREATE DATABASE parcels;")
    pg15.psql(
        "CREATE EXTENSION pg_stat_statements; CREATE EXTENSION hypopg;"
        " CREATE TABLE shipments (id int PRIMARY KEY, tracking text NOT NULL, weight int NOT NULL);"
        " INSERT INTO shipments SELECT g, md5(g::text), g % 50 FROM generate_series(1, 30000) g;"
        " VACUUM ANALYZE shipments; SELECT pg_stat_statements_reset();"
        + "".join(f" SELECT * FROM shipments WHERE tracking = md5('{n}');" for n in range(25)),
        dbname="parcels",
    )
    run = RunContext(
        target=parse_target(pg15.dsn("parcels", user="monitor")),
        settings=Settings(window_seconds=1.0, activity_samples=2),
        out_dir=tmp_path,
    )
    report = review(run, PlainPhases)
    missing = [f for f in report.findings if f.code == "index_missing"]
    # Failed in full-suite runs of fresh clones (never alone) with no check_missing_indexes in the coverage at
    # all: the message says what was planned and edited, for whoever sees it next.
    assert [f.object for f in missing] == ["public.shipments(tracking)"], (
        [(c.check, c.status.value, c.reason) for c in report.coverage if "index" in c.check],
        [(m.agent, m.tasks) for m in report.team],
        report.edits,
        report.declined,
        report.partial,
        report.notes,
    )
    assert "md5($1)" in missing[0].evidence["query"]
    coverage = next(c for c in report.coverage if c.check == "check_missing_indexes")
    assert coverage.status.value == "ran" and coverage.unjudged == ["index_missing"]
    assert "partial" in coverage.reason and "sequential-scan heuristic" in coverage.reason
    assert "GRANT SELECT ON public.shipments TO monitor;" in coverage.reason
    assert "pg_read_all_data" in coverage.reason
