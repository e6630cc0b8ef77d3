"""Watching's cost: on the target per pass, on the watcher per target-pass, in the store per target-day
(`--suite accuracy`: diagnosis from history against live, bench/history_accuracy.py; `--suite detection`: incident
detection's precision, recall and delay on injections and healthy hours, bench/detection.py).

One embedded PostgreSQL serves `--targets` databases (each a target: its own connection, its own
statistics), each under a light pgbench load so its passes carry statements and tables. The
watcher samples them all every `--every` seconds for `--rounds` rounds, as `dbcrew watch` does,
logged in as its own role so pg_stat_statements tells its statements apart. Printed:
- the target's time per pass: the watcher role's statement time (pg_stat_statements, planning
  included), and the most any one statement of a pass took;
- the watcher's CPU per target-pass (this process's CPU time over the passes), and the targets one
  core watches at a 15 s interval, extrapolated from it;
- the store's bytes per raw pass and per one-minute bucket (the JSON bodies, before the backend's
  compression), and per target-day: what downsampling adds each day (1440 minute and 24 hour
  buckets), also per active backend (pg_ash's measure: the bytes a day over the active backends a session sample
  caught on average), and the steady footprint of the retention policy (2 days raw, 14 of minutes, 90 of hours);
- of those, the session samples' time attribution's bytes, per target-day and per active backend
  (pg_ash's measure; `--clients N --rate 0` keeps N sessions busy on each target), and the watcher's
  CPU for one session sample between passes, measured alone.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psutil
import psycopg

from dbcrew.lab.embedded import POSTGRES_BIN_PATH, EmbeddedPostgres
from dbcrew.operators.watch.session_sampler import session_step
from dbcrew.operators.window.passes import PassBody, as_stored, bodies, merge
from dbcrew.operators.window.readers import ActivityTally, sessions
from dbcrew.roles.watching import TIERS, RoundReport, Watcher
from dbcrew.store.samples import SampleStore, StoredPass, open_samples
from dbcrew.targets import PostgresTarget, Resumable, parse_target

ROLE = "dbcrew_watch"
PASSES_PER_DAY_AT_15S = 86_400 // 15


SUITES = ("cost", "accuracy", "detection")


def main(argv: Sequence[str] = ()) -> None:
    """The cost suite (default), `--suite accuracy [its options]`: diagnosis from history against live
    (bench.history_accuracy), or `--suite detection [its options]`: incident detection (bench.detection)."""
    chooser = argparse.ArgumentParser(prog="python -m bench watch", add_help=False)
    chooser.add_argument("--suite", choices=SUITES, default="cost")
    known, rest = chooser.parse_known_args(list(argv))
    if known.suite == "accuracy":
        from bench import history_accuracy

        history_accuracy.main(rest)
    elif known.suite == "detection":
        from bench import detection

        detection.main(rest)
    else:
        cost(rest)


def cost(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench watch [--suite cost]")
    parser.add_argument("--targets", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--every", type=float, default=1.0)
    parser.add_argument(
        "--clients", type=int, default=1, help="pgbench clients per target (its active sessions)"
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=5.0,
        help="pgbench transactions a second per target; 0: as fast as it can",
    )
    args = parser.parse_args(list(argv))
    with tempfile.TemporaryDirectory(prefix="dbcrew-bench-watch-") as tmp:
        pg = EmbeddedPostgres(
            Path(tmp) / "data", settings={"max_connections": str(2 * args.targets + 20)}
        ).start()
        loads: list[subprocess.Popen[bytes]] = []
        try:
            pg.psql(
                f"CREATE ROLE {ROLE} LOGIN; GRANT pg_monitor TO {ROLE}; CREATE EXTENSION pg_stat_statements;"
            )
            names = [f"t{i}" for i in range(args.targets)]
            for name in names:
                pg.psql(f"CREATE DATABASE {name};")
                pg.psql("CREATE EXTENSION pg_stat_statements;", name)
                subprocess.run(
                    [str(POSTGRES_BIN_PATH / "pgbench"), "-i", "-s", "1", "-q", pg.dsn(name)],
                    check=True,
                    capture_output=True,
                )
            pg.psql("SELECT pg_stat_statements_reset();")
            duration = int(args.rounds * args.every + 30)
            loads = [
                subprocess.Popen(
                    [
                        str(POSTGRES_BIN_PATH / "pgbench"),
                        "-c",
                        str(args.clients),
                        *(["-R", f"{args.rate:g}"] if args.rate > 0 else []),
                        "-T",
                        str(duration),
                        pg.dsn(n),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                for n in names
            ]
            report(pg, names, Path(tmp) / "store.duckdb", args.rounds, args.every)
            print(
                f"reproduce: python -m bench watch --targets {args.targets} --rounds {args.rounds} --every {args.every:g}"
                f" --clients {args.clients} --rate {args.rate:g}"
            )
        finally:
            for load in loads:
                load.terminate()
                load.wait(timeout=30)
            pg.stop()


def report(
    pg: EmbeddedPostgres, names: list[str], store_path: Path, rounds: int, every: float
) -> None:
    store = open_samples(str(store_path))
    targets = [parse_target(pg.dsn(n, user=ROLE)) for n in names]
    took: list[float] = []
    me = psutil.Process()
    cpu_before = sum(me.cpu_times()[:2])
    started = time.monotonic()

    def on_round(r: RoundReport) -> None:
        took.append(r.took_seconds)

    Watcher(targets, store, every=every).run(on_round, rounds=rounds)
    wall = time.monotonic() - started
    cpu = sum(me.cpu_times()[:2]) - cpu_before
    passes = len(targets) * rounds
    with psycopg.connect(pg.dsn("postgres")) as conn:
        row = conn.execute(
            "SELECT sum(total_exec_time + total_plan_time) OVER (), max_exec_time, calls, left(regexp_replace(query,"
            " '\\s+', ' ', 'g'), 60) FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid WHERE r.rolname = %s"
            " ORDER BY max_exec_time DESC LIMIT 1",
            (ROLE,),
        ).fetchone()
    assert row is not None
    target_ms, worst_ms, worst_calls, worst = float(row[0]), float(row[1]), int(row[2]), str(row[3])
    now = datetime.now(UTC)
    stored = [
        p
        for n in names
        for p in store.passes(_identity(store, pg, n), 0, now - timedelta(hours=1), now)
    ]
    raw = sum(len(p.body) for p in stored) / max(len(stored), 1)
    # A bucket keeps at most the top statements, tables and running texts whatever it spans: one target's passes merged
    # stand for a minute's and an hour's bucket alike.
    bucket = sum(
        len(as_stored(merge(bodies(group)))) for group in _per_target(stored).values()
    ) / max(len(names), 1)
    per_day = (1440 + 24) * bucket
    footprint = (
        TIERS[0].keep.days * PASSES_PER_DAY_AT_15S * raw
        + TIERS[1].keep.days * 1440 * bucket
        + TIERS[2].keep.days * 24 * bucket
    )
    print(
        f"{len(targets)} targets, {rounds} rounds every {every:g} s, {len(stored)} passes stored ({passes - len(stored)}"
        f" were first readings); load average {psutil.getloadavg()[0]:.1f} on {psutil.cpu_count()} cores"
    )
    print(
        f"target's time per pass (the watcher role's statements, planning included): {target_ms / passes:.2f} ms;"
        f" the slowest statement once took {worst_ms:.2f} ms"
        f" ({worst}..., {worst_calls} calls); limit 20 ms of CPU per sample"
    )
    print(
        f"watcher CPU per target-pass: {1000 * cpu / passes:.2f} ms -> {15 / (cpu / passes):.0f} targets per core at 15 s"
        f" (target >= 500); round took {1000 * sum(took) / len(took):.0f} ms on average, {1000 * max(took):.0f} ms at most;"
        f" wall {wall:.0f} s"
    )
    active = active_backends(stored)
    per_backend = f" ({per_day / active / 2**20:.2f} MB per active backend)" if active else ""
    print(
        f"store: {raw:.0f} B per raw pass, {bucket:.0f} B per bucket (JSON, before compression);"
        f" per target-day after downsampling {per_day / 2**20:.2f} MB{per_backend} (limit 5 MB);"
        f" steady footprint at 15 s {footprint / 2**20:.1f} MB per target; DuckDB file {store_path.stat().st_size / 2**20:.1f} MB"
    )
    print(session_time_line(stored))
    print(session_sample_cost(targets[0]))


def session_time_line(stored: list[StoredPass]) -> str:
    """The bytes the session samples' attribution adds (dbcrew/operators/window/session_time.py), per target-day and per
    active backend (pg_ash's measure: its bytes a day for so many active backends)."""
    parts = bodies(stored)
    raw = sum(len(session_json(body)) for _seconds, body in parts) / max(len(parts), 1)
    groups = [bodies(group) for group in _per_target(stored).values()]
    bucket = sum(len(session_json(merge(group))) for group in groups) / max(len(groups), 1)
    active = active_backends(stored)
    per_day = (1440 + 24) * bucket
    raw_day = PASSES_PER_DAY_AT_15S * raw
    per_backend = f"{per_day / active / 2**20:.3f}" if active else "-"
    return (
        f"session time attribution: {raw:.0f} B per raw pass, {bucket:.0f} B per bucket, {active:.2f} active backends"
        f" sampled on average; per target-day after downsampling {per_day / 2**20:.2f} MB ({per_backend} MB per"
        f" active backend), raw passes at 15 s {raw_day / 2**20:.2f} MB a day (kept {TIERS[0].keep.days} days)"
    )


def active_backends(stored: list[StoredPass]) -> float:
    """The active backends a session sample caught on average: pg_ash's measure divides a day's bytes by them."""
    parts = bodies(stored)
    return sum(b.session_time.samples for _s, b in parts if b.session_time) / max(
        sum(b.session_samples for _s, b in parts), 1
    )


def session_sample_cost(target: PostgresTarget, n: int = 200) -> str:
    """The watcher's CPU for one session sample between passes (dbcrew/operators/watch/session_sampler.py), measured alone: `n`
    reads of pg_stat_activity tallied as the sampler tallies them, while the load still runs."""
    session = Resumable(target)
    try:
        tally = ActivityTally()
        tally.add(session.run(lambda conn: sessions(conn, 0)))
        cpu, wall = time.process_time(), time.monotonic()
        for _ in range(n):
            tally.add(session.run(lambda conn: sessions(conn, tally.samples)))
        cpu, wall = (time.process_time() - cpu) / n, (time.monotonic() - wall) / n
    finally:
        session.close()
    every = session_step(15.0)
    return (
        f"one session sample: {1000 * cpu:.2f} ms of the watcher's CPU ({1000 * wall:.2f} ms wall), one every"
        f" {every:g} s between passes at 15 s: {1000 * cpu * 15 / every:.1f} ms a pass"
    )


def session_json(body: PassBody) -> str:
    """The stored JSON a body's session time takes (its field and its value)."""
    return (
        as_stored(PassBody(session_time=body.session_time, passes=1)) if body.session_time else ""
    )


def _identity(store: SampleStore, pg: EmbeddedPostgres, name: str) -> str:
    found = store.identity_of(parse_target(pg.dsn(name, user=ROLE)).display)
    assert found is not None
    return found


def _per_target(stored: list[StoredPass]) -> dict[str, list[StoredPass]]:
    groups: dict[str, list[StoredPass]] = {}
    for p in stored:
        groups.setdefault(p.target, []).append(p)
    return groups
