"""Bench section `tables`: review time and peak memory for 100, 1,000 and 10,000 tables (3 indexes each).

Each database gets N tables with a primary key and two secondary indexes (10,000 tables = 30,000
indexes), a row each, and statistics. Each review runs in its own process (plain phase runner,
5 s window) so its peak resident memory is its own; the table shows wall time, peak RSS, and
whether every check ran (no statement timeouts).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dbcrew.lab.embedded import EmbeddedPostgres

SIZES = (100, 1_000, 10_000)
WINDOW = 5.0

MAKE_TABLES = """
DO $$
BEGIN
  FOR i IN 1..{n} LOOP
    EXECUTE format('CREATE TABLE t%s (id int PRIMARY KEY, a int, b int)', i);
    EXECUTE format('CREATE INDEX t%s_a_idx ON t%s (a)', i, i);
    EXECUTE format('CREATE INDEX t%s_b_idx ON t%s (b)', i, i);
    EXECUTE format('INSERT INTO t%s VALUES (1, 1, 1)', i);
    IF i % 500 = 0 THEN COMMIT; END IF;
  END LOOP;
END $$;
"""


def child(dsn: str, out: str) -> None:
    """One review in this process; prints wall time, peak RSS and coverage as JSON."""
    from dbcrew.roles.crew.context import RunContext
    from dbcrew.roles.spine import PlainPhases, review
    from dbcrew.settings.run import Settings
    from dbcrew.targets import parse_target

    started = time.perf_counter()
    run = RunContext(
        target=parse_target(dsn), settings=Settings(window_seconds=WINDOW), out_dir=Path(out)
    )
    report = review(run, PlainPhases)
    elapsed = time.perf_counter() - started
    statuses = [c.status.value for c in report.coverage]
    print(
        json.dumps(
            {
                "seconds": elapsed,
                "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "checks_ran": statuses.count("ran"),
                "checks": len(statuses),
                "findings": len(report.findings),
            }
        )
    )


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="dbcrew-bench-scale-"))
    pg = EmbeddedPostgres(work / "pgdata", settings={"max_locks_per_transaction": "1024"}).start()
    rows = []
    try:
        for n in SIZES:
            db = f"scale_{n}"
            pg.psql(f"CREATE DATABASE {db};")
            started = time.perf_counter()
            pg.psql(
                "CREATE EXTENSION pg_stat_statements;" + MAKE_TABLES.format(n=n) + "ANALYZE;",
                dbname=db,
            )
            built = time.perf_counter() - started
            result = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "bench.tables",
                    "--child",
                    pg.dsn(db),
                    str(work / f"report-{n}"),
                ],
                check=True,
                capture_output=True,
                text=True,
            )
            rows.append((n, built, json.loads(result.stdout.strip().splitlines()[-1])))
    finally:
        pg.stop()
    print(f"health review, plain phase runner, {WINDOW:.0f}s window, 2 cores")
    print(
        f"  {'tables':>7} {'indexes':>8} {'set-up s':>9} {'review s':>9} {'peak RSS MB':>12} {'checks ran':>11} {'findings':>9}"
    )
    for n, built, r in rows:
        print(
            f"  {n:>7,} {3 * n:>8,} {built:>9.1f} {r['seconds']:>9.1f} {r['peak_rss_mb']:>12.0f}"
            f" {r['checks_ran']:>5}/{r['checks']:<5} {r['findings']:>9}"
        )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], sys.argv[3])
    else:
        main()
