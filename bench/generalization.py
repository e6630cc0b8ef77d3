"""`python -m bench diagnose --suite generalization`: the diagnosis rules on what they were not written for.

The injection suite (bench.injections) and the rules were written together: one schema, one
workload shape and one intensity per cause. This suite shares nothing with it but the cause list:
three other schemas (an event log, a ledger, a product catalogue with full-text search), other
workload shapes for every cause, each at three intensities (level 1 is the mildest shape that is
still a real problem on a 2-core machine; 2 and 3 scale clients, batch sizes or data touched),
two-cause combinations, and healthy controls at several load levels (pgbench at three rates, a
light and a busy OLTP mix over the three schemas) on which no root cause may be named. A
rate-limited pgbench is a healthy control only if the server keeps up with its rate: one that fell
behind (its clients then commit back to back, an overloaded server) is reported apart, with the
rate it got.

Reported: a confusion matrix of the single-cause cases (injected cause x strongest reported
cause), D-Bot's accuracy (single, multi), the precision of secondary causes (every cause a case
reports after its strongest: right when injected), the causes named on the healthy controls, and
the spread of each number over the runs. Cases, levels and runs are options, since a full suite
(57 cases a run) takes a quarter of an hour a run on 2 cores:
`--levels 2 --runs 1 --only lock_contention,healthy` while developing.
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.diagnose import DiagnosisServer, accuracy
from bench.injections import NO_SYNC, SERIAL, Client, Recipe, Statement, committers, connect, fixed
from dbcrew.lab.embedded import POSTGRES_BIN_PATH

LEVELS = (1, 2, 3)
RUNS = 3
COMBINATION_LEVEL = 2
HEALTHY = "healthy"
NONE = "(none)"

SCHEMA = """
-- An event log: devices report events; a retention job deletes, an audit trail is heavily indexed.
CREATE TABLE ev_device (id int PRIMARY KEY, site text NOT NULL, model text NOT NULL);
INSERT INTO ev_device SELECT g, 'site-' || (g % 40), 'model-' || (g % 7) FROM generate_series(1, 5000) g;
CREATE TABLE ev_event (id bigint PRIMARY KEY, device_id int NOT NULL, session_id bigint NOT NULL, kind text NOT NULL,
                       payload jsonb NOT NULL, at timestamptz NOT NULL);
INSERT INTO ev_event SELECT g, g % 5000 + 1, (g::bigint * 31) % 200000, (ARRAY['boot','ping','error','sync'])[g % 4 + 1],
       jsonb_build_object('seq', g, 'msg', md5(g::text)), now() - g * interval '1 second' FROM generate_series(1, 400000) g;
CREATE TABLE ev_ingest (device_id int, kind text, payload jsonb, at timestamptz DEFAULT now());
CREATE TABLE ev_retired (id bigint PRIMARY KEY, payload text);
CREATE TABLE ev_audit (id bigint, device_id int, kind text, a int, b int, c int, d int, e int, f text, at timestamptz DEFAULT now());
DO $$ DECLARE c text; BEGIN
  FOREACH c IN ARRAY ARRAY['id','device_id','kind','a','b','c','d','e','f','at'] LOOP
    EXECUTE format('CREATE INDEX ev_audit_%s ON ev_audit (%I)', c, c);
  END LOOP;
END $$;
DO $$ BEGIN
  FOR i IN 1..3 LOOP
    EXECUTE format('CREATE TABLE ev_archive_%s WITH (autovacuum_enabled = off) AS
                    SELECT g AS id, g %% 5000 AS device_id, md5(g::text) || md5((g * 3)::text) AS payload
                    FROM generate_series(1, 300000) g', i);
    EXECUTE format('CREATE INDEX ON ev_archive_%s (device_id)', i);
  END LOOP;
END $$;
-- A ledger: accounts, entries far larger than shared_buffers, transfers priced by validity ranges.
CREATE TABLE lg_account (id int PRIMARY KEY, owner text NOT NULL, balance numeric(14, 2) NOT NULL DEFAULT 0);
INSERT INTO lg_account SELECT g, 'owner ' || g FROM generate_series(1, 50000) g;
CREATE TABLE lg_entry (id bigint PRIMARY KEY, account_id int NOT NULL, amount numeric(12, 2) NOT NULL,
                       posted_at timestamptz NOT NULL, memo text NOT NULL);
-- Wide rows (about 450 bytes, 16 a page): a scan reads many pages for little work per row.
INSERT INTO lg_entry SELECT g, g % 50000 + 1, (g % 1000) / 10.0, now() - g * interval '10 seconds',
       repeat(md5(g::text), 12) FROM generate_series(1, 600000) g;
CREATE TABLE lg_rate (id int PRIMARY KEY, currency text, valid_from timestamptz, valid_to timestamptz, rate numeric);
INSERT INTO lg_rate SELECT g, (ARRAY['EUR','USD','GBP','CHF'])[g % 4 + 1], now() - (g + 1) * interval '1 hour',
       now() - g * interval '1 hour' + interval '30 minutes', 1 + g % 10 / 10.0 FROM generate_series(1, 4000) g;
CREATE TABLE lg_transfer (id int PRIMARY KEY, at timestamptz, currency text, amount numeric);
INSERT INTO lg_transfer SELECT g, now() - (g % 4000) * interval '1 hour' - (g % 60) * interval '1 minute',
       (ARRAY['EUR','USD','GBP','CHF'])[g % 4 + 1], g % 500 FROM generate_series(1, 20000) g;
CREATE TABLE lg_posting (id bigserial PRIMARY KEY, source int, target int, amount numeric(12, 2), at timestamptz DEFAULT now());
CREATE TABLE lg_import (account_id int, amount numeric(12, 2), posted_at timestamptz, memo text);
-- A catalogue: products with a full-text search column (GIN), categories, reviews.
CREATE TABLE cat_category (id int PRIMARY KEY, name text NOT NULL);
INSERT INTO cat_category SELECT g, 'category ' || g FROM generate_series(1, 200) g;
CREATE TABLE cat_product (id int PRIMARY KEY, category_id int NOT NULL, name text NOT NULL, description text NOT NULL,
                          price numeric(10, 2) NOT NULL, stock int NOT NULL, search tsvector);
INSERT INTO cat_product SELECT g, g % 200 + 1, 'product ' || g,
       array_to_string(ARRAY(SELECT (ARRAY['red','blue','green','steel','wooden','compact','large','portable','quiet',
                                           'wireless','kitchen','garden','office','outdoor','vintage','modern','cotton',
                                           'leather','glass','solar'])[1 + (g * k * 7 + k) % 20]
                             FROM generate_series(1, 40) k), ' '),
       (g % 900) + 0.99, 1000 FROM generate_series(1, 120000) g;
UPDATE cat_product SET search = to_tsvector('english', name || ' ' || description);
CREATE INDEX cat_product_search ON cat_product USING gin (search);
CREATE TABLE cat_review (id bigserial PRIMARY KEY, product_id int NOT NULL, stars int NOT NULL, body text, at timestamptz DEFAULT now());
"""
# Autovacuum stays out of the tables the cases write, so each case carries only the causes it injects.
QUIET_TABLES = (
    "ev_event",
    "ev_ingest",
    "ev_retired",
    "ev_audit",
    "lg_account",
    "lg_entry",
    "lg_posting",
    "lg_import",
    "cat_product",
    "cat_review",
)


def prepare(dsn: str) -> None:
    """The three schemas, pgbench's tables (scale 5) for the healthy controls, then VACUUM ANALYZE."""
    with connect(dsn) as conn:
        conn.execute(SCHEMA)
        for table in QUIET_TABLES:
            conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = off)")
    subprocess.run(
        [str(POSTGRES_BIN_PATH / "pgbench"), "-i", "-q", "-s", "5", dsn],
        check=True,
        capture_output=True,
    )
    with connect(dsn) as conn:
        conn.execute("VACUUM ANALYZE")


# -- the workload shapes ----------------------------------------------------------------------
WORDS = (
    "red",
    "blue",
    "steel",
    "wooden",
    "quiet",
    "garden",
    "vintage",
    "solar",
    "leather",
    "portable",
)


def values_insert(rows: int) -> Statement:
    """Event ingestion: one multi-row VALUES insert of `rows` events (literal parameters, not generate_series)."""
    sql = "INSERT INTO ev_ingest (device_id, kind, payload) VALUES " + ", ".join(
        ["(%s, %s, %s::jsonb)"] * rows
    )

    def statement(rng: random.Random) -> tuple[str, tuple[object, ...]]:
        params: list[object] = []
        for _ in range(rows):
            params += [
                rng.randint(1, 5000),
                rng.choice(("ping", "sync")),
                f'{{"v": {rng.random():.6f}}}',
            ]
        return sql, tuple(params)

    return statement


def hot_product(rng: random.Random) -> tuple[str, tuple[object, ...]]:
    return "UPDATE cat_product SET stock = stock - 1 WHERE id = %s", (rng.randint(1, 3),)


def transfer_steps() -> tuple[Statement, ...]:
    """A ledger transfer: debit, credit, posting, in one transaction."""

    def debit(rng: random.Random) -> tuple[str, tuple[object, ...]]:
        return "UPDATE lg_account SET balance = balance - 1 WHERE id = %s", (rng.randint(1, 25000),)

    def credit(rng: random.Random) -> tuple[str, tuple[object, ...]]:
        return "UPDATE lg_account SET balance = balance + 1 WHERE id = %s", (
            rng.randint(25001, 50000),
        )

    def post(rng: random.Random) -> tuple[str, tuple[object, ...]]:
        return "INSERT INTO lg_posting (source, target, amount) VALUES (%s, %s, 1)", (
            rng.randint(1, 25000),
            rng.randint(25001, 50000),
        )

    return (debit, credit, post)


def entry_range(rng: random.Random) -> tuple[str, tuple[object, ...]]:
    first = rng.randint(1, 500000)
    return "SELECT sum(amount) FROM lg_entry WHERE id BETWEEN %s AND %s", (first, first + 100)


def by_id(sql: str, high: int) -> Statement:
    return lambda rng: (sql, (rng.randint(1, high),))


def cause_recipes(level: int) -> list[Recipe]:
    """Every cause at intensity `level` (1, 2, 3): clients, batches or data touched grow with it."""
    n = level
    return [
        Recipe(
            "workload_many_inserts",
            ((Client(values_insert((10, 20, 40)[n - 1]), (NO_SYNC,)), (4, 6, 8)[n - 1]),),
            description="clients ingest events in small multi-row VALUES inserts, one commit each",
        ),
        Recipe(
            "workload_large_insert",
            (
                (
                    Client(
                        fixed(
                            "WITH src AS (SELECT g % 50000 + 1 AS account_id, (g % 700) / 7.0 AS amount, now() AS posted_at, md5(g::text) AS memo"
                            f" FROM generate_series(1, {(30000, 80000, 150000)[n - 1]}) g) INSERT INTO lg_import SELECT * FROM src"
                        ),
                        (NO_SYNC,),
                    ),
                    1,
                ),
            ),
            reset="TRUNCATE lg_import",
            description="a ledger import loads statement batches through a CTE",
        ),
        Recipe(
            "workload_high_updates",
            (
                (
                    Client(
                        lambda rng: (
                            "UPDATE cat_product SET stock = stock - 1, price = price WHERE id = ANY(%s)",
                            ([rng.randint(10, 120000) for _ in range(5)],),
                        ),
                        (NO_SYNC,),
                    ),
                    (3, 5, 8)[n - 1],
                ),
            ),
            description="clients update the stock of five random products per statement",
        ),
        Recipe(
            "workload_many_deletes",
            (
                (
                    Client(
                        lambda _rng: (
                            "DELETE FROM ev_retired WHERE ctid = ANY(ARRAY(SELECT ctid FROM ev_retired LIMIT %s))",
                            ((500, 1500, 4000)[n - 1],),
                        ),
                        (NO_SYNC,),
                        pause=0.05,
                    ),
                    1,
                ),
            ),
            reset="TRUNCATE ev_retired; INSERT INTO ev_retired SELECT g, md5(g::text) FROM generate_series(1, 1000000) g",
            description="a retention job deletes rows by ctid batches",
        ),
        Recipe(
            "workload_large_fetch",
            (
                (
                    Client(
                        fixed(
                            f"SELECT id, name, description, price FROM cat_product WHERE id <= {(40000, 80000, 120000)[n - 1]}"
                        ),
                        (SERIAL,),
                        fetch=True,
                    ),
                    (1, 2, 2)[n - 1],
                ),
            ),
            description="a catalogue export fetches tens of thousands of products",
        ),
        Recipe(
            "query_poor_join",
            (
                (
                    Client(
                        fixed(
                            "SELECT count(*) FROM lg_transfer t JOIN lg_rate r ON t.at >= r.valid_from AND t.at < r.valid_to"
                            f" WHERE t.id <= {(5000, 10000, 20000)[n - 1]}"
                        ),
                        (SERIAL,),
                    ),
                    1,
                ),
            ),
            description="transfers priced by a validity-range join (no equality: nested loop only)",
        ),
        Recipe(
            "query_correlated_subquery",
            (
                (
                    Client(
                        fixed(
                            "SELECT d.id, (SELECT count(*) FROM ev_event e WHERE e.device_id = d.id AND e.kind = 'error') FROM ev_device d"
                            f" WHERE d.id <= {(50, 150, 400)[n - 1]}"
                        ),
                        (SERIAL,),
                    ),
                    1,
                ),
            ),
            description="errors per device through a scalar subquery over an unindexed column",
        ),
        Recipe(
            "sync_commit_pressure",
            (),
            command=committers("ledger_transfer.sql", (2, 4, 6)[n - 1]),
            description="ledger transfers (two updates and a posting) committed durably, back to back",
        ),
        Recipe(
            "lock_contention",
            (
                (
                    Client(fixed(""), (NO_SYNC,), transaction=(hot_product,), hold=0.05),
                    (4, 6, 8)[n - 1],
                ),
            ),
            description="clients sell the same three hot products, holding the row lock 50 ms each",
        ),
        Recipe(
            "vacuum_interference",
            (
                *(
                    (
                        Client(
                            fixed(f"VACUUM (FREEZE, DISABLE_PAGE_SKIPPING) ev_archive_{i}"),
                            ("SET vacuum_cost_delay = 0",),
                        ),
                        1,
                    )
                    for i in range(1, n + 1)
                ),
                (
                    Client(
                        by_id("SELECT count(*) FROM ev_archive_1 WHERE device_id = %s", 5000),
                        pause=0.02,
                    ),
                    1,
                ),
            ),
            description="freezing vacuums of archive tables beside a reader",
        ),
        Recipe(
            "cpu_contention",
            (
                (
                    Client(
                        lambda rng: (
                            "SELECT count(*) FROM cat_product WHERE to_tsvector('english', description) @@ to_tsquery('english', %s)",
                            (rng.choice(WORDS),),
                        ),
                        (SERIAL,),
                    ),
                    (4, 6, 8)[n - 1],
                ),
            ),
            description="text search that re-parses every description instead of using the search column",
        ),
        # Measured: a LIKE over the memo of every row kept 3 clients on the CPU (wait share 0.07 with
        # the table in the page cache), a CPU load; totals over wide rows wait on reads instead.
        Recipe(
            "io_contention",
            (
                (
                    Client(fixed("SELECT sum(amount), max(posted_at) FROM lg_entry"), (SERIAL,)),
                    (2, 3, 4)[n - 1],
                ),
            ),
            description="ledger totals scanning wide rows of a table larger than shared_buffers",
        ),
        Recipe(
            "index_missing",
            (
                (
                    Client(
                        by_id("SELECT * FROM ev_event WHERE session_id = %s", 200000), (SERIAL,)
                    ),
                    n,
                ),
            ),
            description="event lookups by session, a column without an index",
        ),
        Recipe(
            "indexes_too_many",
            (
                (
                    Client(
                        lambda rng: (
                            "INSERT INTO ev_audit (id, device_id, kind, a, b, c, d, e, f) VALUES (%s, %s, 'login', %s, %s, %s, %s, %s, md5(%s::text))",
                            tuple(rng.randint(1, 10**6) for _ in range(8)),
                        ),
                        (NO_SYNC,),
                    ),
                    (2, 4, 6)[n - 1],
                ),
            ),
            description="single-row inserts into an audit table carrying ten indexes",
        ),
        # Measured: hash aggregates of 10M groups peaked at 0.8 GB for two backends within a window
        # (4% of 24 GB: no pressure); a hash join of two materialised series holds both and the table.
        Recipe(
            "memory_pressure",
            (
                (
                    Client(
                        fixed(
                            f"SELECT count(*) FROM generate_series(1, {(12, 16, 20)[n - 1]}000000) a(x)"
                            f" JOIN generate_series(1, {(12, 16, 20)[n - 1]}000000) b(y) ON a.x = b.y"
                        ),
                        (SERIAL, "SET work_mem = '4GB'", "SET hash_mem_multiplier = 2"),
                    ),
                    (1, 1, 2)[n - 1],
                ),
            ),
            description="in-memory hash joins of tens of millions of rows with a 4 GB work_mem",
        ),
    ]


PGBENCH_RATES = {f"{HEALTHY}:pgbench@{rate}tps": rate for rate in (50, 300, 1000)}


def pgbench(rate: int) -> Recipe:
    return Recipe(
        f"{HEALTHY}:pgbench@{rate}tps",
        (),
        command=("pgbench", "-n", "-c", "4", "-j", "2", "-R", str(rate), "-T", "600"),
        reset="TRUNCATE pgbench_history",
        description=f"pgbench TPC-B-like, 4 clients, {rate} transactions a second, durable commits",
    )


def schedule_kept(dsn: str, rate: int) -> tuple[bool, float]:
    """Whether a rate-limited pgbench kept its rate over the case (a control is healthy only if the
    server keeps up with it), and the rate it got. Each transaction leaves one pgbench_history row
    stamped with its start; pgbench's arrivals are Poisson, so it fell behind when it ran more than
    three standard deviations (3 sqrt(n)) short of the n transactions asked for."""
    with connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*)::float8, extract(epoch FROM max(mtime) - min(mtime))::float8 FROM pgbench_history"
        ).fetchone()
    count, seconds = (row[0], row[1] or 0.0) if row else (0.0, 0.0)
    asked = rate * seconds
    return count >= asked - 3 * asked**0.5, count / seconds if seconds else 0.0


def oltp_mix(name: str, clients: int, pause: float) -> Recipe:
    """A healthy mix over the three schemas: indexed reads, searches through the GIN index, small writes, transfers."""
    shapes = (
        Client(by_id("SELECT * FROM cat_product WHERE id = %s", 120000), pause=pause),
        Client(
            lambda rng: (
                "SELECT id, name FROM cat_product WHERE search @@ to_tsquery('english', %s) LIMIT 20",
                (rng.choice(WORDS),),
            ),
            fetch=True,
            pause=pause,
        ),
        Client(
            lambda rng: (
                "INSERT INTO cat_review (product_id, stars, body) VALUES (%s, %s, 'fine')",
                (rng.randint(1, 120000), rng.randint(1, 5)),
            ),
            pause=pause,
        ),
        Client(by_id("SELECT * FROM ev_event WHERE id = %s", 400000), fetch=True, pause=pause),
        Client(fixed(""), transaction=transfer_steps(), pause=pause),
        Client(entry_range, pause=pause),
    )
    return Recipe(
        f"{HEALTHY}:{name}",
        tuple((shape, max(1, clients // len(shapes))) for shape in shapes),
        description=f"OLTP mix, {clients} clients pausing {pause * 1000:.0f} ms",
    )


CONTROLS = [
    *(pgbench(rate) for rate in PGBENCH_RATES.values()),
    oltp_mix("oltp-light", 6, 0.05),
    oltp_mix("oltp-busy", 12, 0.002),
]
RECIPES: dict[str, Recipe] = {
    f"{r.cause}@{level}": r for level in LEVELS for r in cause_recipes(level)
} | {r.cause: r for r in CONTROLS}
CAUSES = [r.cause for r in cause_recipes(1)]
COMBINATIONS = [
    ("workload_many_inserts", "index_missing"),
    ("lock_contention", "io_contention"),
    ("workload_large_fetch", "query_poor_join"),
    ("vacuum_interference", "cpu_contention"),
    ("indexes_too_many", "query_correlated_subquery"),
    ("workload_many_deletes", "sync_commit_pressure"),
    ("memory_pressure", "workload_high_updates"),
]


# -- running and scoring ----------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    """What runs (keys of RECIPES) and which causes it carries (none for a healthy control)."""

    name: str
    keys: tuple[str, ...]
    expected: tuple[str, ...]


@dataclass(frozen=True)
class Outcome:
    case: Case
    run: int
    found: tuple[str, ...]
    seconds: float
    behind: str = ""  # a rate-limited control the server did not keep up with: what it got


def cases(levels: Sequence[int], only: set[str]) -> list[Case]:
    def chosen(*names: str) -> bool:
        return not only or any(n in only for n in names)

    single = [Case(f"{c}@{lv}", (f"{c}@{lv}",), (c,)) for lv in levels for c in CAUSES if chosen(c)]
    multi = [
        Case(" + ".join(pair), tuple(f"{c}@{COMBINATION_LEVEL}" for c in pair), pair)
        for pair in COMBINATIONS
        if chosen(*pair, "multi")
    ]
    healthy = [Case(r.cause, (r.cause,), ()) for r in CONTROLS if chosen(HEALTHY, r.cause)]
    return single + multi + healthy


def secondary(outcomes: list[Outcome]) -> tuple[int, int]:
    """(right, reported) over the causes each case names after its strongest one."""
    shown = [(o.case.expected, c) for o in outcomes for c in o.found[1:4]]
    return sum(1 for expected, c in shown if c in expected), len(shown)


def spread(values: list[float]) -> str:
    if len(values) < 2:
        return f"{values[0]:.3f}" if values else "-"
    return f"{statistics.mean(values):.3f} (min {min(values):.3f}, max {max(values):.3f}, sd {statistics.stdev(values):.3f})"


def confusion(outcomes: list[Outcome]) -> list[str]:
    """Rows: injected cause of single-cause cases; columns: the strongest cause reported (counts over levels and runs)."""
    singles = [o for o in outcomes if len(o.case.expected) == 1]
    columns = sorted(
        {o.found[0] if o.found else NONE for o in singles} | {o.case.expected[0] for o in singles}
    )
    short = {c: f"c{i}" for i, c in enumerate(columns)}
    lines = [
        "columns: " + ", ".join(f"{short[c]}={c}" for c in columns),
        f"{'injected':28}" + "".join(f"{short[c]:>4}" for c in columns) + "  acc",
    ]
    for cause in [c for c in CAUSES if any(o.case.expected == (c,) for o in singles)]:
        mine = [o for o in singles if o.case.expected == (cause,)]
        top = Counter(o.found[0] if o.found else NONE for o in mine)
        acc = statistics.mean(accuracy(o.case.expected, o.found) for o in mine)
        lines.append(
            f"{cause:28}" + "".join(f"{top.get(c, 0) or '.':>4}" for c in columns) + f"  {acc:.2f}"
        )
    return lines


def report(outcomes: list[Outcome], runs: int) -> None:
    by_run = {r: [o for o in outcomes if o.run == r] for r in range(runs)}

    def per_run(select: str) -> list[float]:
        out = []
        for mine in by_run.values():
            scored = [
                accuracy(o.case.expected, o.found)
                for o in mine
                if (len(o.case.expected) == 1 if select == "single" else len(o.case.expected) > 1)
            ]
            if scored:
                out.append(statistics.mean(scored))
        return out

    print()
    print("confusion matrix (single-cause cases, strongest reported cause):")
    for line in confusion(outcomes):
        print("  " + line)
    print()
    right, shown = secondary(outcomes)
    healthy = [o for o in outcomes if not o.case.expected and not o.behind]
    overloaded = [o for o in outcomes if o.behind]
    false = Counter(c for o in healthy for c in o.found)
    print(f"single-cause accuracy  {spread(per_run('single'))}  (goal >= 0.90)")
    print(f"multi-cause accuracy   {spread(per_run('multi'))}  (goal >= 0.80)")
    print(
        f"secondary-cause precision {right}/{shown}" + (f" = {right / shown:.2f}" if shown else "")
    )
    print(
        f"healthy controls: {sum(1 for o in healthy if o.found)} of {len(healthy)} windows named a root cause"
        + (f" ({', '.join(f'{c} x{n}' for c, n in false.most_common())})" if false else "")
        + "  (goal 0)"
    )
    if overloaded:
        print(
            "controls the server did not keep up with (not healthy, not counted above): "
            + "; ".join(
                f"{o.case.name} {o.behind}, found {', '.join(o.found) or '-'}" for o in overloaded
            )
        )
    for level in sorted(
        {o.case.name.rsplit("@", 1)[1] for o in outcomes if len(o.case.expected) == 1}
    ):
        mine = [
            accuracy(o.case.expected, o.found)
            for o in outcomes
            if len(o.case.expected) == 1 and o.case.name.endswith(f"@{level}")
        ]
        print(
            f"  level {level}: single-cause accuracy {statistics.mean(mine):.3f} over {len(mine)} cases"
        )


def host_load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min) {five:.1f} (5 min) on {os.cpu_count()} cores"


def main(argv: Sequence[str] = ()) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench diagnose --suite generalization")
    parser.add_argument(
        "--levels", default=",".join(map(str, LEVELS)), help="intensities to run, e.g. 2 or 1,3"
    )
    parser.add_argument("--runs", type=int, default=RUNS, help="how many times each case runs")
    parser.add_argument(
        "--only", default="", help="comma-separated causes, 'multi', 'healthy' or a control's name"
    )
    args = parser.parse_args(list(argv))
    try:
        levels = [int(x) for x in args.levels.split(",")]
    except ValueError:
        parser.error(f"--levels {args.levels}: comma-separated numbers from {LEVELS}")
    if not set(levels) <= set(LEVELS) or args.runs < 1:
        parser.error(f"--levels from {LEVELS}, --runs at least 1")
    only = {x for x in args.only.split(",") if x}
    unknown = only - set(CAUSES) - {"multi", HEALTHY} - {r.cause for r in CONTROLS}
    if unknown:
        parser.error(f"--only: unknown {', '.join(sorted(unknown))}")
    chosen = cases(levels, only)
    started = time.monotonic()
    print(
        f"generalization suite: {len(chosen)} cases x {args.runs} runs; {host_load()}", flush=True
    )
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="dbcrew-bench-general-") as tmp:
        workdir = Path(tmp)
        server = DiagnosisServer.start(workdir, prepare=prepare, catalogue=__name__)
        print(
            f"  schemas ready and baseline recorded in {time.monotonic() - started:.0f}s",
            flush=True,
        )
        try:
            for run, (i, case) in itertools.product(range(args.runs), enumerate(chosen)):
                report_, seconds = server.diagnose_injected(case.keys, workdir / f"r{run}c{i}")
                found = tuple(rc.code for rc in report_.root_causes)
                behind = ""
                if case.name in PGBENCH_RATES:
                    kept, got = schedule_kept(server.dsn, PGBENCH_RATES[case.name])
                    behind = "" if kept else f"got {got:.0f} of {PGBENCH_RATES[case.name]} tps"
                outcomes.append(Outcome(case, run, found, seconds, behind))
                score = (
                    f"acc {accuracy(case.expected, found):.2f}"
                    if case.expected
                    else ("ok     " if not found else "FALSE  ")
                )
                print(
                    f"  run {run} {case.name:58} {score}  {seconds:5.1f}s  found: {', '.join(found) or '-'}"
                    + (f"  (fell behind: {behind})" if behind else ""),
                    flush=True,
                )
                if (
                    found and not case.expected
                ):  # a control's false cause: the evidence that crossed the line, for tuning
                    for cause in report_.root_causes:
                        print(f"      {cause.code}: {cause.evidence}", flush=True)
        finally:
            server.stop()
    report(outcomes, args.runs)
    print(f"wall time {time.monotonic() - started:.0f}s; at the end: {host_load()}")
