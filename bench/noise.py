"""Bench section `noise`: what a healthy, busy database gets from reviews in a row, and how much of it flips.

One embedded PostgreSQL holds pgbench's tables (scale 3; pgbench_history given a primary key, so
nothing in the schema is a problem) under a steady load: pgbench's TPC-B-like transactions (4
clients, 100 tps) and its select-only ones (2 clients, 200 tps), warmed up 20 s. Then reviews run
one after the other through the one review path with history (dbcrew.roles.spine.review, the store a
throw-away one), as a schedule would run them. Nothing changes in the database between reviews:
every finding that comes and goes is noise.

Printed per review: findings by severity, history's counts (new, regressed, resolved, absent),
and the codes of the problems; then per code how often it was reported and at which severity; the
statements reported as slow_query; the flips (a finding called new or regressed after the first
review, or resolved: each is an alert or a line in "what changed" a user reads for nothing); the
load average; the command that reproduces them.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path

import psutil

from dbcrew.lab.embedded import POSTGRES_BIN_PATH, EmbeddedPostgres
from dbcrew.models import Report
from dbcrew.roles.crew.context import RunContext
from dbcrew.roles.spine import PlainPhases, review
from dbcrew.settings.run import Settings
from dbcrew.targets import parse_target

SCALE = 3
LOADS = (
    ("-c", "4", "-j", "2", "-R", "100"),  # TPC-B-like: updates, an insert, a select per transaction
    ("-S", "-c", "2", "-j", "1", "-R", "200"),  # select-only
)
WARMUP_SECONDS = 20.0


def prepare(pg: EmbeddedPostgres) -> str:
    pg.psql("CREATE DATABASE busy;")
    dsn = pg.dsn("busy")
    subprocess.run(
        [str(POSTGRES_BIN_PATH / "pgbench"), "-i", "-s", str(SCALE), "-q", dsn],
        check=True,
        capture_output=True,
    )
    pg.psql(
        "CREATE EXTENSION IF NOT EXISTS pg_stat_statements;"
        " ALTER TABLE pgbench_history ADD COLUMN id bigserial PRIMARY KEY; VACUUM ANALYZE;",
        "busy",
    )
    return dsn


def start_load(dsn: str) -> list[subprocess.Popen[bytes]]:
    return [
        subprocess.Popen(
            [str(POSTGRES_BIN_PATH / "pgbench"), "-n", "-T", "36000", *args, dsn],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for args in LOADS
    ]


def flips_of(report: Report, first: bool) -> list[tuple[str, str]]:
    """(change, code) of each finding this review calls new or regressed (after the first) or resolved."""
    history = report.history
    if history is None or first:
        return []
    return [
        (change, item.code)
        for change, items in (
            ("new", history.new),
            ("regressed", history.regressed),
            ("resolved", history.resolved),
        )
        for item in items
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench noise")
    parser.add_argument("--reviews", type=int, default=10)
    parser.add_argument("--window", type=float, default=5.0, help="each review's window, seconds")
    args = parser.parse_args(argv or [])

    root = Path(tempfile.mkdtemp(prefix="dbcrew-bench-noise-"))
    pg = EmbeddedPostgres(root / "data").start()
    load: list[subprocess.Popen[bytes]] = []
    reports: list[Report] = []
    started = time.monotonic()
    try:
        dsn = prepare(pg)
        load = start_load(dsn)
        time.sleep(WARMUP_SECONDS)
        print(
            f"pgbench scale {SCALE}: TPC-B-like 4 clients at 100 tps, select-only 2 clients at 200 tps;"
            f" {args.reviews} reviews, window {args.window:g} s"
        )
        print(" #  crit warn info   new regr  res absent  problems")
        for n in range(args.reviews):
            run = RunContext(
                target=parse_target(dsn),
                out_dir=root / f"review-{n:02d}",
                settings=Settings(window_seconds=args.window),
            )
            report = review(run, PlainPhases)
            reports.append(report)
            counts = Counter(f.severity.value for f in report.findings)
            h = report.history
            changes = (
                (len(h.new), len(h.regressed), len(h.resolved), len(h.absent))
                if h
                else (0, 0, 0, 0)
            )
            problems = sorted({f.code for f in report.findings if f.is_problem})
            print(
                f"{n + 1:2d}  {counts['critical']:4d} {counts['warning']:4d} {counts['info']:4d}"
                f"  {changes[0]:4d} {changes[1]:4d} {changes[2]:4d} {changes[3]:6d}"
                f"  {', '.join(problems) or '-'}",
                flush=True,
            )
    finally:
        for process in load:
            process.terminate()
            process.wait(timeout=30)
        pg.stop()
        shutil.rmtree(root, ignore_errors=True)
    reported: dict[str, Counter[str]] = {}
    for report in reports:
        for f in report.findings:
            reported.setdefault(f.code, Counter())[f.severity.value] += 1
    flips = [flip for n, r in enumerate(reports) for flip in flips_of(r, first=n == 0)]
    by_code = Counter(code for _change, code in flips)
    print()
    print(f"{'code':28} {'reported (crit/warn/info) over the reviews':>44}  flips")
    for code in sorted(reported):
        c = reported[code]
        print(
            f"{code:28} {c['critical']:>24d}/{c['warning']}/{c['info']:<17}  {by_code.get(code, 0)}"
        )
    statements = Counter(
        " ".join(f.statement.split())[:70] for r in reports for f in r.findings if f.statement
    )
    if statements:
        print("statements reported as slow_query (reviews):")
        for text, times in statements.most_common():
            print(f"  {times:3d}  {text}")
    kinds = Counter(change for change, _code in flips)
    print(
        f"flips after the first review: {len(flips)} ({kinds['new']} new, {kinds['regressed']} regressed,"
        f" {kinds['resolved']} resolved) over {len(reports) - 1} reviews;"
        f" findings per review: {sum(len(r.findings) for r in reports) / max(len(reports), 1):.1f}"
        f" ({sum(sum(f.is_problem for f in r.findings) for r in reports) / max(len(reports), 1):.1f} problems)"
    )
    print(
        f"wall {time.monotonic() - started:.0f} s; load average"
        f" {' '.join(f'{x:.1f}' for x in psutil.getloadavg())} (1, 5, 15 min) on {psutil.cpu_count()} cores;"
        f" reproduce: python -m bench noise --reviews {args.reviews} --window {args.window:g}"
    )
