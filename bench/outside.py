"""`python -m bench diagnose --suite outside`: the diagnosis on workloads written from outside the code.

The injection and generalization suites were written beside the rules. This one was written from the
vocabulary alone (finding-codes.md), over schemas the code knows nothing of: pgbench's own tables
(scale 10, larger than shared_buffers), a TPC-H-like order schema (customers, orders, order lines,
no index on the foreign keys, as TPC-H ships it) and a forum whose replies and votes are skewed
(power-law threads and authors). Every client is pgbench (a C client: Python threads on a 2-core
host leave their sessions idle), running the built-in TPC-B-like transactions or a script of
bench/outside/.

Load levels are clients per core: at each level a healthy background (account look-ups and now and
then a small transfer, rate-limited, one connection per client) runs through the level's own baseline
window, its healthy controls (the background alone, and at twice its rate) and every case. Causes
made by many clients (inserts, updates, commits, locks, look-ups without an index, CPU work) run with
the level's client count; causes made by one heavy statement (joins, subqueries, exports, loads,
purges, scans) run on one or two clients beside the background, whose connections carry the level.
Two-cause mixes run at the middle level. I/O contention runs its scans on a slow data disk (a blkio
read throttle, bench/slow_disk.py): this host's disk is faster than the scans; where no throttle can
be set, the case says it was not run.

Reported, over the runs (three by default): accuracy per cause (D-Bot's, sigma 0.1), per load level,
single-cause and two-cause, the causes named on the healthy controls of each level, the seconds each
diagnosis took beyond its window, and the machine's load average. A full run is about 50 cases; use
`--levels 10 --runs 1 --only lock_contention,healthy` while developing.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.diagnose import WINDOW_SECONDS, DiagnosisServer, accuracy
from bench.generalization import host_load, spread
from bench.injections import Recipe, connect, injected, pgbench_script
from bench.slow_disk import SlowDisk, unavailable
from dbcrew.lab.embedded import POSTGRES_BIN_PATH, EmbeddedPostgres
from dbcrew.operators.window.live import sample_window
from dbcrew.settings.run import Ablations
from dbcrew.targets import parse_target

SCRIPTS = Path(__file__).parent / "outside"
CORES = os.cpu_count() or 1
LEVELS = (1, 10, 30)  # clients per core
MIX_LEVEL = 10
RUNS = 3
HEALTHY = "healthy"
SERVER_SETTINGS = {
    "fsync": "on",
    "synchronous_commit": "on",
    "shared_buffers": "'128MB'",
    "max_connections": "300",
}

SCHEMA = """
-- A TPC-H-like order schema at about a tenth of scale factor 1; like TPC-H, no index on the foreign keys.
CREATE TABLE region (r_regionkey int PRIMARY KEY, r_name text NOT NULL);
INSERT INTO region SELECT g, (ARRAY['AFRICA','AMERICA','ASIA','EUROPE','MIDDLE EAST'])[g + 1] FROM generate_series(0, 4) g;
CREATE TABLE nation (n_nationkey int PRIMARY KEY, n_name text NOT NULL, n_regionkey int NOT NULL);
INSERT INTO nation SELECT g, 'nation ' || g, g % 5 FROM generate_series(0, 24) g;
CREATE TABLE customer (c_custkey int PRIMARY KEY, c_name text, c_nationkey int, c_phone text, c_acctbal numeric(12, 2),
                       c_mktsegment text);
INSERT INTO customer SELECT g, 'Customer#' || g, g % 25, '1' || (g % 9) || '-' || g, (g % 9999) - 999.99,
       (ARRAY['AUTOMOBILE','BUILDING','FURNITURE','HOUSEHOLD','MACHINERY'])[g % 5 + 1] FROM generate_series(1, 15000) g;
CREATE TABLE orders (o_orderkey int PRIMARY KEY, o_custkey int NOT NULL, o_orderstatus char(1), o_totalprice numeric(12, 2),
                     o_orderdate date, o_orderpriority text, o_comment text);
INSERT INTO orders SELECT g, (g * 7919) % 15000 + 1, (ARRAY['F','O','P'])[g % 3 + 1], 1000 + (g * 37) % 400000 / 1.0,
       date '1992-01-01' + (g % 2400), (g % 5 + 1) || '-PRIORITY', md5(g::text) FROM generate_series(1, 150000) g;
CREATE TABLE lineitem (l_orderkey int, l_linenumber int, l_partkey int, l_quantity numeric(12, 2),
                       l_extendedprice numeric(12, 2), l_discount numeric(4, 2), l_shipdate date, l_comment text,
                       PRIMARY KEY (l_orderkey, l_linenumber));
INSERT INTO lineitem SELECT o, n, (o * n * 131) % 20000 + 1, n * 3, n * 3 * 901.0, (o % 10) / 100.0,
       date '1992-01-02' + (o % 2400), md5((o * 10 + n)::text) || ' carefully final deposits'
       FROM generate_series(1, 150000) o, generate_series(1, 4) n;
-- A forum: threads and authors follow power laws, votes have no index on the reply they vote for.
CREATE TABLE fm_thread (id int PRIMARY KEY, title text);
INSERT INTO fm_thread SELECT g, 'thread ' || g FROM generate_series(1, 20000) g;
CREATE TABLE fm_reply (id int PRIMARY KEY, thread_id int NOT NULL, author int NOT NULL, body text, at timestamptz);
INSERT INTO fm_reply SELECT g, floor(20000 * power(random(), 3))::int + 1, floor(100000 * power(random(), 2))::int + 1,
       repeat(md5(g::text), 3), now() - g * interval '1 minute' FROM generate_series(1, 400000) g;
CREATE INDEX fm_reply_thread ON fm_reply (thread_id);
CREATE TABLE fm_vote (reply_id int NOT NULL, voter int NOT NULL, value smallint NOT NULL);
INSERT INTO fm_vote SELECT floor(400000 * random())::int + 1, g % 100000, (ARRAY[-1, 1, 1])[g % 3 + 1]
       FROM generate_series(1, 300000) g;
-- Operations tables: readings, a small work queue, staging, an archive to purge, an audit trail with twelve
-- indexes (more than PMM's advisor allows, the vocabulary's "too many").
CREATE TABLE ot_reading (id bigserial PRIMARY KEY, device int NOT NULL, value float8, taken timestamptz);
CREATE INDEX ot_reading_device ON ot_reading (device);
CREATE TABLE ot_queue (slot int PRIMARY KEY, pending bigint NOT NULL DEFAULT 0);
INSERT INTO ot_queue SELECT g FROM generate_series(1, 8) g;
CREATE TABLE ot_staging (orderkey int, linenumber int, partkey int, quantity numeric, price numeric, comment text);
CREATE TABLE ot_archive (id int PRIMARY KEY, payload text);
CREATE TABLE ot_audit (id bigserial PRIMARY KEY, user_id int, action text, a int, b int, c int, d int, e int, note text,
                       at timestamptz DEFAULT now());
DO $$ DECLARE c text; BEGIN
  FOREACH c IN ARRAY ARRAY['user_id','action','a','b','c','d','e','note','at','e,a','d,c'] LOOP
    EXECUTE format('CREATE INDEX ON ot_audit (%s)', c);
  END LOOP;
END $$;
"""
# Autovacuum stays out of the tables the cases write, so each case carries only the causes it injects; and
# every case starts with those tables vacuumed (Recipe.tidy): the dead rows an earlier case's updates and
# deletes left (orders after order_update.sql, pgbench_accounts after the backgrounds) would otherwise be read
# by a later case's scans, a true dead_tuples_high the later case did not inject.
QUIET_TABLES = (
    "orders",
    "ot_reading",
    "ot_queue",
    "ot_staging",
    "ot_archive",
    "ot_audit",
    "pgbench_accounts",
    "pgbench_history",
    "pgbench_branches",
    "pgbench_tellers",
)


def prepare(dsn: str) -> None:
    """pgbench's tables at scale 10, the order, forum and operations schemas, then VACUUM ANALYZE."""
    subprocess.run(
        [str(POSTGRES_BIN_PATH / "pgbench"), "-i", "-q", "-s", "10", dsn],
        check=True,
        capture_output=True,
    )
    with connect(dsn) as conn:
        conn.execute(SCHEMA)
        for table in QUIET_TABLES:
            conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = off)")
        conn.execute("VACUUM ANALYZE")


def pgbench(script: str, clients: int, *options: str) -> tuple[str, ...]:
    """A Recipe command: pgbench running bench/outside/`script` on `clients` connections until stopped."""
    return pgbench_script(SCRIPTS / script, clients, *options)


def background(level: int, rate_factor: int = 1) -> Recipe:
    """The healthy background of a level: one connection per client, 25 look-ups a second per core
    per level step (the server keeps up at every level), now and then a small transfer."""
    clients = level * CORES
    rate = (40 + 4 * clients) * rate_factor
    name = f"{HEALTHY}:background@{level}" + (f"x{rate_factor}" if rate_factor > 1 else "")
    return Recipe(
        name,
        (),
        command=pgbench("background.sql", clients, "-R", str(rate)),
        tidy=QUIET_TABLES,
        description=f"{clients} clients, {rate} look-ups a second, one in ten with a transfer",
    )


@dataclass(frozen=True)
class Shape:
    """How a cause is made from outside: its script, and whether its clients scale with the level."""

    cause: str
    script: str
    scales: bool  # many clients (the level's count) or one heavy statement stream (`fixed` clients)
    fixed: int = 1
    reset: str = ""
    disk: SlowDisk | None = None  # a slow data disk for the case's duration (bench/slow_disk.py)


SHAPES = (
    Shape("workload_many_inserts", "sensor_insert.sql", scales=True),
    Shape("sync_commit_pressure", "commits.sql", scales=True),
    Shape("workload_high_updates", "order_update.sql", scales=True),
    Shape("lock_contention", "hot_rows.sql", scales=True),
    Shape("index_missing", "author_lookup.sql", scales=True),
    Shape("cpu_contention", "checksum.sql", scales=True),
    Shape("indexes_too_many", "audit_insert.sql", scales=True),
    Shape("query_poor_join", "nested_join.sql", scales=False),
    Shape("query_poor_join", "skewed_join.sql", scales=False),
    Shape("query_correlated_subquery", "subquery.sql", scales=False),
    # On a disk of 64 MB/s (measured, 2 scanners beside each level's background, the disk reading at
    # 62-65 MB/s: 0.95-1.00 of the active samples waiting on reads at levels 1, 10 and 30, 3.4-16.6 s
    # of read time a second, host iowait 2-88 % as the host's other work left the CPUs idle or not);
    # on this host's own disk the scans stayed on the CPU (0.28-0.31 waiting on reads, iowait < 3 %).
    Shape(
        "io_contention",
        "account_totals.sql",
        scales=False,
        fixed=2,
        disk=SlowDisk(("pgbench_accounts",), 64 << 20),
    ),
    Shape("workload_large_fetch", "export.sql", scales=False, fixed=2),
    Shape("workload_large_insert", "load.sql", scales=False, reset="TRUNCATE ot_staging"),
    Shape(
        "workload_many_deletes",
        "purge.sql",
        scales=False,
        reset="TRUNCATE ot_archive; INSERT INTO ot_archive SELECT g, md5(g::text) FROM generate_series(1, 1200000) g",
    ),
)
MIXES = (
    ("workload_high_updates", "indexes_too_many"),
    ("workload_many_inserts", "index_missing"),
    ("lock_contention", "query_poor_join"),
    ("sync_commit_pressure", "workload_large_fetch"),
)


def shape_recipe(shape: Shape, level: int) -> Recipe:
    clients = level * CORES if shape.scales else shape.fixed
    return Recipe(
        shape.cause,
        (),
        command=pgbench(shape.script, clients),
        reset=shape.reset,
        tidy=QUIET_TABLES,
        description=f"{shape.script} on {clients} clients"
        + (f" on a disk of {shape.disk.read_bps >> 20} MB/s" if shape.disk else ""),
        beside=shape.disk,
    )


def key(shape: Shape, level: int) -> str:
    return f"{shape.cause}:{shape.script.removesuffix('.sql')}@{level}"


RECIPES: dict[str, Recipe] = {
    key(s, level): shape_recipe(s, level) for s in SHAPES for level in LEVELS
} | {r.cause: r for level in LEVELS for r in (background(level), background(level, rate_factor=2))}


@dataclass(frozen=True)
class Case:
    """What runs (keys of RECIPES, the level's background first) and the causes it carries."""

    name: str
    level: int
    keys: tuple[str, ...]
    expected: tuple[str, ...]


@dataclass(frozen=True)
class Outcome:
    case: Case
    run: int
    found: tuple[str, ...]
    seconds: float


def cases(levels: Sequence[int], only: set[str]) -> list[Case]:
    def chosen(*names: str) -> bool:
        return not only or any(n in only for n in names)

    out: list[Case] = []
    for level in levels:
        base = background(level).cause
        out += [
            Case(key(s, level), level, (base, key(s, level)), (s.cause,))
            for s in SHAPES
            if chosen(s.cause)
        ]
        out += [
            Case(name, level, (name,), ())
            for name in (base, background(level, rate_factor=2).cause)
            if chosen(HEALTHY)
        ]
    if MIX_LEVEL in levels:
        first = {s.cause: s for s in reversed(SHAPES)}  # a cause's first shape
        out += [
            Case(
                " + ".join(pair),
                MIX_LEVEL,
                (background(MIX_LEVEL).cause, *(key(first[c], MIX_LEVEL) for c in pair)),
                pair,
            )
            for pair in MIXES
            if chosen(*pair, "multi")
        ]
    return out


def needs_slow_disk(case: Case) -> bool:
    return any(isinstance(RECIPES[k].beside, SlowDisk) for k in case.keys)


def score(case: Case, found: tuple[str, ...]) -> float:
    return accuracy(case.expected, found) if case.expected else float(not found)


def report(outcomes: list[Outcome], runs: int) -> None:
    """Accuracy per cause, per level, single and two-cause, healthy controls per level: mean and spread over runs."""

    def per_run(select: list[Outcome]) -> list[float]:
        return [
            statistics.mean(score(o.case, o.found) for o in select if o.run == r)
            for r in range(runs)
            if any(o.run == r for o in select)
        ]

    singles = [o for o in outcomes if len(o.case.expected) == 1]
    mixes = [o for o in outcomes if len(o.case.expected) > 1]
    controls = [o for o in outcomes if not o.case.expected]
    print()
    print("per cause (single-cause cases, all levels):")
    for cause in dict.fromkeys(s.cause for s in SHAPES):
        mine = [o for o in singles if o.case.expected == (cause,)]
        if mine:
            tops = Counter(o.found[0] if o.found else "-" for o in mine)
            print(
                f"  {cause:28} {spread(per_run(mine))}  strongest named: "
                + ", ".join(f"{c} x{n}" for c, n in tops.most_common())
            )
    print("per load level (clients per core):")
    for level in sorted({o.case.level for o in outcomes}):
        mine = [o for o in singles if o.case.level == level]
        clean = [o for o in controls if o.case.level == level]
        named = Counter(c for o in clean for c in o.found)
        worst = max(o.seconds - WINDOW_SECONDS for o in outcomes if o.case.level == level)
        print(
            f"  {level:>2}x ({level * CORES} clients): single-cause {spread(per_run(mine)) if mine else '-'}"
            + f"; worst {worst:.1f} s beyond the window (bound 60)"
            + (
                f"; healthy controls {sum(1 for o in clean if not o.found)}/{len(clean)} clean"
                + (
                    f" (named {', '.join(f'{c} x{n}' for c, n in named.most_common())})"
                    if named
                    else ""
                )
                if clean
                else ""
            )
        )
    if singles:
        print(f"single-cause accuracy {spread(per_run(singles))}  (goal >= 0.90)")
    if mixes:
        print(f"two-cause accuracy    {spread(per_run(mixes))}  (goal >= 0.85)")
    if controls:
        print(
            f"healthy controls: {sum(1 for o in controls if o.found)} of {len(controls)} windows named a root cause  (goal 0)"
        )
    beyond = [o.seconds - WINDOW_SECONDS for o in outcomes]
    print(
        f"seconds beyond the {WINDOW_SECONDS:.0f} s window: median {statistics.median(beyond):.1f}, max {max(beyond):.1f} (bound 60)"
    )


def record_baselines(
    server: DiagnosisServer, workdir: Path, levels: Sequence[int]
) -> dict[int, Path]:
    """Each level's baseline: one window of its healthy background, as the target's history would hold it."""
    out = {}
    for level in levels:
        path = workdir / f"baseline-{level}.json"
        with injected(server.dsn, [background(level).cause], warmup=3.0, catalogue=__name__):
            sample_window(parse_target(server.dsn), WINDOW_SECONDS).save(path)
        out[level] = path
    return out


def main(argv: Sequence[str] = (), ablations: Ablations | None = None) -> None:
    """The suite's cases, diagnosed with `ablations` switched off (bench diagnose's --no)."""
    ablations = ablations or Ablations()
    parser = argparse.ArgumentParser(prog="python -m bench diagnose --suite outside")
    parser.add_argument(
        "--levels", default=",".join(map(str, LEVELS)), help="clients per core, e.g. 10 or 1,30"
    )
    parser.add_argument("--runs", type=int, default=RUNS, help="how many times each case runs")
    parser.add_argument("--only", default="", help="comma-separated causes, 'multi' or 'healthy'")
    parser.add_argument(
        "--explain",
        action="store_true",
        help="print the abnormal metrics and process of every miss",
    )
    args = parser.parse_args(list(argv))
    try:
        levels = [int(x) for x in args.levels.split(",")]
    except ValueError:
        parser.error(f"--levels {args.levels}: comma-separated numbers from {LEVELS}")
    if not set(levels) <= set(LEVELS) or args.runs < 1:
        parser.error(f"--levels from {LEVELS}, --runs at least 1")
    only = {x for x in args.only.split(",") if x}
    unknown = only - {s.cause for s in SHAPES} - {"multi", HEALTHY}
    if unknown:
        parser.error(f"--only: unknown {', '.join(sorted(unknown))}")
    chosen = cases(levels, only)
    started = time.monotonic()
    print(
        f"outside suite: {len(chosen)} cases x {args.runs} runs; switched off:"
        f" {', '.join(ablations.off()) or 'nothing'}; {host_load()}",
        flush=True,
    )
    outcomes: list[Outcome] = []
    no_disk: str | None = None
    skipped: list[Case] = []  # cases this host cannot make (no slow disk)
    with tempfile.TemporaryDirectory(prefix="dbcrew-bench-outside-") as tmp:
        workdir = Path(tmp)
        pg = EmbeddedPostgres(workdir / "data", settings=SERVER_SETTINGS).start()
        try:
            pg.psql("CREATE DATABASE diag;")
            pg.psql("CREATE EXTENSION pg_stat_statements;", "diag")
            dsn = pg.dsn("diag")
            prepare(dsn)
            no_disk = unavailable(workdir / "data")
            skipped = [c for c in chosen if no_disk and needs_slow_disk(c)]
            for case in skipped:
                print(f"  {case.name:64} not run: no slow disk ({no_disk})", flush=True)
            chosen = [c for c in chosen if c not in skipped]
            server = DiagnosisServer(
                pg=pg, dsn=dsn, baseline=workdir / "none", catalogue=__name__, ablations=ablations
            )
            baselines = record_baselines(server, workdir, levels)
            print(f"  schemas and baselines ready in {time.monotonic() - started:.0f}s", flush=True)
            for run, (i, case) in itertools.product(range(args.runs), enumerate(chosen)):
                server.baseline = baselines[case.level]
                found_report, seconds = server.diagnose_injected(case.keys, workdir / f"r{run}c{i}")
                found = tuple(rc.code for rc in found_report.root_causes)
                outcomes.append(Outcome(case, run, found, seconds))
                mark = (
                    f"acc {score(case, found):.2f}"
                    if case.expected
                    else ("ok      " if not found else "FALSE   ")
                )
                print(
                    f"  run {run} {case.name:58} {mark}  {seconds:5.1f}s  found: {', '.join(found) or '-'}",
                    flush=True,
                )
                if args.explain and score(case, found) < 1 and found_report.diagnosis:
                    section = found_report.diagnosis
                    for line in [*section.abnormal_metrics, *section.process]:
                        print(f"      {line}", flush=True)
        finally:
            pg.stop()
    if outcomes:
        report(outcomes, args.runs)
    if skipped:
        print(f"not run: {', '.join(c.name for c in skipped)} ({no_disk})")
    print(f"wall time {time.monotonic() - started:.0f}s; at the end: {host_load()}")
