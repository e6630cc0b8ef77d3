"""Bench section `scale`: a fleet as issue 31 sets it up, watched and reviewed by two workers on one machine.

`--targets` databases spread over `--clusters` embedded clusters (each a small database made from a
template: `CREATE DATABASE ... TEMPLATE`), all in one targets.yaml watched at `--every` seconds and
reviewed on one shared cron schedule; `dbcrew server --local-postgres` keeps the Prefect server's
database and the store on a PostgreSQL of its own; a second worker runs from its own home
(PREFECT_HOME, logs) with the documented `prefect worker start --pool dbcrew` line, as another
machine would. Then, over a stretch of at least `--minutes`:
- watching: the share of target-intervals sampled and the intervals sampled twice (from the store's
  passes), the stints of two holders that overlap on one target (watch_tenures: exactly one holder),
  the workers' CPU per target-pass (psutil), sessions per target (pg_stat_activity of the clusters,
  application_name dbcrew), memory per worker (RSS);
- five targets given lock contention (bench/injections.py): each one's incidents and their diagnoses
  (the store), and the incidents of every other target during the stretch (false incidents);
- the second worker killed with SIGKILL: seconds until each of its targets is sampled again, and the
  gaps stored for them;
- the nightly fleet of `--reviews` targets (the schedule's own fan-out flow when it is every target,
  else `fleet_review` of the targets tagged for it, the same fan-out): databases per minute, the
  Prefect server's CPU and API requests per minute (its access log lines, when it writes them), the
  deployments and scheduled runs its database holds.
Every figure is printed with the load average and the command that reproduces it.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psutil
import psycopg

from bench import injections
from bench.fleet import family, tree_cpu
from dbcrew.cli.server import worker_args
from dbcrew.lab.crew_server import CrewServer, running_crew_server
from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.lab.waiting import wait_for
from dbcrew.store import STORE_ENV
from dbcrew.targets import parse_target

TEMPLATE = "scale_template"
# One small schema per target: the injected lock contention's accounts table, and no more (bench/injections.py
# SCHEMA's other tables weigh about 250 MB a database).
TEMPLATE_SQL = """
CREATE EXTENSION IF NOT EXISTS pg_stat_statements;
CREATE TABLE inj_acct (id int PRIMARY KEY, balance bigint NOT NULL DEFAULT 0) WITH (autovacuum_enabled = off);
INSERT INTO inj_acct SELECT g FROM generate_series(1, 20000) g;
VACUUM ANALYZE inj_acct;
"""
ANOMALY = "lock_contention"
ANOMALIES = 5
NIGHTLY_TAG = "nightly-bench"
WINDOW = 2  # seconds each review samples, as bench fleet
APP = "dbcrew"  # the application_name of the crew's sessions (dbcrew/targets/postgres.py)


REVIEWING = ("--work-queue", "reviews", "--work-queue", "fleet")  # the server's worker with --split
# the watching workers' queues with --split: the diagnoses their incidents start run beside the watching, off the
# host the fleet's reviews keep busy (the server's worker, REVIEWING, serves no `incidents`)
WATCHING = ("watch", "incidents")


def load() -> str:
    one, five, fifteen = psutil.getloadavg()
    return f"load average {one:.1f} {five:.1f} {fifteen:.1f} on {psutil.cpu_count()} cores"


def far_slot(now: datetime) -> str:
    """The shared cron schedule: daily, 12 hours from `now`, so that it never fires during the bench, which starts
    its fleet on demand (a fixed "0 3 * * *" fired in a run across 03:00 UTC: a second fleet of 1,000 beside the
    bench's own)."""
    at = now + timedelta(hours=12)
    return f"{at.minute} {at.hour} * * *"


def say(figure: str, command: str) -> None:
    print(f"{figure}\n    ({load()}; reproduce: {command})", flush=True)


@dataclass
class Fleet:
    """The targets: name -> DSN, which cluster serves each, and the clusters."""

    clusters: list[EmbeddedPostgres]
    dsns: dict[str, str] = field(default_factory=dict)

    def make(self, targets: int) -> float:
        """Create the targets' databases from a template on each cluster; the seconds it took."""
        started = time.perf_counter()
        for i, pg in enumerate(self.clusters):
            pg.psql(f"CREATE DATABASE {TEMPLATE};")
            pg.psql(TEMPLATE_SQL, TEMPLATE)
            with psycopg.connect(pg.dsn("postgres"), autocommit=True) as conn:
                for n in range(i, targets, len(self.clusters)):
                    name = f"t{n:04d}"
                    conn.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
                    self.dsns[name] = pg.dsn(name)
        self.dsns = dict(sorted(self.dsns.items()))
        return time.perf_counter() - started

    def inventory(self, path: Path, every: float, reviewed: set[str]) -> None:
        nightly = far_slot(datetime.now(UTC))
        lines = ["targets:"]
        for name, dsn in self.dsns.items():
            lines += [
                f"  - name: {name}",
                f"    url: {dsn}",
                f"    window: {WINDOW}",
                f'    schedule: "{nightly}"',
                f"    watch: {{every: {every:g}}}",
            ]
            if name in reviewed:
                lines.append(f"    tags: [{NIGHTLY_TAG}]")
        path.write_text("\n".join(lines) + "\n")

    def sessions(self) -> tuple[float, int]:
        """(the crew's sessions per target, the most on any one target) now, over all clusters."""
        per_db: Counter[str] = Counter()
        for pg in self.clusters:
            with psycopg.connect(pg.dsn("postgres")) as conn:
                for db, n in conn.execute(
                    "SELECT datname, count(*) FROM pg_stat_activity WHERE application_name = %s"
                    " GROUP BY datname",
                    (APP,),
                ):
                    per_db[str(db)] += int(n)
        counted = [per_db.get(name, 0) for name in self.dsns]
        return sum(counted) / len(counted), max(counted)


class Store:
    """The store's tables read directly (one query per figure, not one per target)."""

    def __init__(self, url: str, fleet: Fleet):
        self.url = url
        self.fleet = fleet
        self._ids: dict[str, str] = {}

    def ids(self) -> dict[str, str]:
        """Target name -> its identity in the store (those watched so far)."""
        if len(self._ids) < len(self.fleet.dsns):
            with psycopg.connect(self.url) as conn:
                shown = dict(conn.execute("SELECT display, target FROM watch_targets").fetchall())
            self._ids = {
                name: str(shown[display])
                for name, dsn in self.fleet.dsns.items()
                if (display := parse_target(dsn).display) in shown
            }
        return self._ids

    def passes(self, after: datetime, until: datetime) -> dict[str, list[datetime]]:
        """Target name -> the ends of its raw passes in (after, until]."""
        names = {i: n for n, i in self.ids().items()}
        found: dict[str, list[datetime]] = {n: [] for n in self.fleet.dsns}
        with psycopg.connect(self.url) as conn:
            for target, at in conn.execute(
                "SELECT target, ended_at FROM watch_passes WHERE resolution = 0 AND ended_at > %s"
                " AND ended_at <= %s ORDER BY ended_at",
                (after, until),
            ):
                if target in names:
                    found[names[target]].append(at)
        return found

    def by_two_holders(self, doubled: list[Doubled]) -> int:
        """How many of the `doubled` pairs of passes no one holder's stint (watch_tenures) spans: a handover's
        two workers each sampled the target in that interval, where the rest are one worker's two passes."""
        ids = self.ids()
        slack = timedelta(seconds=1)
        with psycopg.connect(self.url) as conn:
            stints: dict[str, list[tuple[datetime, datetime]]] = {}
            for target, started, ended in conn.execute(
                "SELECT target, started_at, ended_at FROM watch_tenures"
            ):
                stints.setdefault(target, []).append((started, ended))
        return sum(
            not any(
                started <= first + slack and ended >= then - slack
                for started, ended in stints.get(ids.get(name, name), [])
            )
            for name, first, then in doubled
        )

    def scalar(self, sql: str, params: Sequence[object] = ()) -> int:
        with psycopg.connect(self.url) as conn:
            row = conn.execute(sql, params).fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def holders(self) -> dict[str, str]:
        with psycopg.connect(self.url) as conn:
            # as dbcrew.store.leases.lease_holders: a released or lapsed lease is nobody's
            live = "SELECT target, holder FROM watch_leases WHERE expires_at >= now()"
            return {str(t): str(h) for t, h in conn.execute(live)}

    def incidents(self, since: datetime) -> dict[str, list[tuple[datetime, int]]]:
        """Target name -> its incidents started after `since`: (start, diagnoses kept)."""
        names = {i: n for n, i in self.ids().items()}
        found: dict[str, list[tuple[datetime, int]]] = {}
        with psycopg.connect(self.url) as conn:
            for target, started, diagnosed in conn.execute(
                "SELECT i.target, i.started_at, count(d.target) FROM watch_incidents i LEFT JOIN watch_diagnoses d"
                " ON d.target = i.target AND d.started_at = i.started_at WHERE i.started_at > %s"
                " GROUP BY i.target, i.started_at",
                (since,),
            ):
                found.setdefault(names.get(target, target), []).append((started, int(diagnosed)))
        return found


# A target, and two of its passes less than half an interval apart.
Doubled = tuple[str, datetime, datetime]


def coverage(
    passes: dict[str, list[datetime]], start: datetime, end: datetime, every: float
) -> tuple[int, int, list[Doubled]]:
    """(target-intervals, those sampled, the passes less than half an interval after the one before, each with
    that one) over the whole intervals of `every` in (start, end].

    Counted from the gaps between a target's passes, not on a grid: a round's passes land at one phase of the
    interval, and a grid that starts at that phase splits them between two cells by a few milliseconds of jitter
    (in a run at 500 targets, 1,000 cells "twice" and 1,000 "never" where every gap was 60 s). A gap of k
    intervals (rounded) left k - 1 of them unsampled; so does the stretch before the first pass and after the
    last."""
    intervals = int((end - start).total_seconds() // every)
    missed = 0
    doubled: list[Doubled] = []
    for name, ends in passes.items():
        marks = [start, *ends, end]
        gaps = [(b - a).total_seconds() / every for a, b in itertools.pairwise(marks)]
        missed += sum(max(0, round(g) - 1) for g in gaps)
        doubled += [
            (name, a, b) for a, b in itertools.pairwise(ends) if (b - a).total_seconds() < every / 2
        ]
    sampled = max(0, intervals * len(passes) - missed)
    return intervals * len(passes), sampled, doubled


def missed_by_interval(
    passes: dict[str, list[datetime]], start: datetime, end: datetime, every: float
) -> Counter[int]:
    """Where the unsampled target-intervals of `coverage` lie: their count by the interval (0 the first
    after `start`) in which the gap that left them out began. One worker's whole share missing one
    round shows as its targets' count at one interval; the stretch before the first pass at 0."""
    missed = Counter[int]()
    for ends in passes.values():
        marks = [start, *ends, end]
        for a, b in itertools.pairwise(marks):
            lost = max(0, round((b - a).total_seconds() / every) - 1)
            if lost:
                missed[int((a - start).total_seconds() // every)] += lost
    return missed


def worker_of(server: CrewServer) -> psutil.Process:
    (worker,) = [
        p
        for p in family(server.process.pid)[1:]
        if "worker" in p.cmdline() and "start" in p.cmdline()
    ]
    return worker


def prefect_server_of(server: CrewServer) -> psutil.Process:
    (found,) = [
        p
        for p in family(server.process.pid)[1:]
        if {"prefect", "server", "start"} <= set(p.cmdline())
    ]
    return found


def cpu(process: psutil.Process) -> float:
    try:
        return tree_cpu(process.pid)
    except psutil.NoSuchProcess:
        return 0.0


@contextmanager
def own_home_worker(
    api: str, store: str, home: Path, name: str = "second", queues: Sequence[str] = ()
) -> Iterator[subprocess.Popen[bytes]]:
    """`prefect worker start --pool dbcrew` from its own home, as on another machine (all the pool's queues, or
    `queues`)."""
    home.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "PREFECT_API_URL": api,
        "PREFECT_HOME": str(home / "prefect-home"),
        "DBCREW_REPORTS_DIR": str(home / "reports"),
        "DBCREW_MEMORY_PATH": str(home / "memory.duckdb"),
        STORE_ENV: store,
        "PREFECT_WORKER_QUERY_SECONDS": "1",
    }
    with (home / f"{name}.log").open("ab") as log:
        process = subprocess.Popen(
            worker_args("dbcrew", name, queues), env=env, stdout=log, stderr=subprocess.STDOUT
        )
        try:
            yield process
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


@dataclass
class Sampler:
    """Sessions per target and each worker's RSS, read every few seconds in a thread."""

    fleet: Fleet
    workers: dict[str, psutil.Process]
    sessions: list[tuple[float, int]] = field(default_factory=list)
    rss: dict[str, int] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self, every: float) -> None:
        while not self.stop.wait(every):
            try:
                self.sessions.append(self.fleet.sessions())
            except psycopg.OperationalError:  # the clusters stopped: the bench is ending
                return
            for name, p in self.workers.items():
                try:
                    self.rss[name] = max(self.rss.get(name, 0), p.memory_info().rss)
                except psutil.NoSuchProcess:
                    pass


def main(argv: Sequence[str] = ()) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench scale")
    parser.add_argument("--targets", type=int, default=1000)
    parser.add_argument("--every", type=float, default=60.0, help="watching interval, seconds")
    parser.add_argument(
        "--minutes",
        type=float,
        default=30.0,
        help="the watching stretch (at least 11 intervals: 5 quiet, 3 of the anomaly, the kill at the 9th or 2 before the end)",
    )
    parser.add_argument("--clusters", type=int, default=4)
    parser.add_argument(
        "--reviews", type=int, default=0, help="targets of the nightly fleet (0: all)"
    )
    parser.add_argument("--max-reviews", type=int, default=4, help="the pool's reviews at once")
    parser.add_argument(
        "--split",
        action="store_true",
        help="the server's worker reviews and does not watch; two more workers watch and do not review",
    )
    parser.add_argument(
        "--fleet-minutes",
        type=float,
        default=0.0,
        help="measure the nightly fleet's rate over its first minutes, then cancel it (0: until it ends)",
    )
    args = parser.parse_args(list(argv))
    if args.targets < ANOMALIES * 2 or args.clusters < 1 or args.every < 1:
        parser.error(f"--targets at least {ANOMALIES * 2}, --clusters at least 1, --every >= 1")
    reviews = args.reviews or args.targets
    command = (
        f"python -m bench scale --targets {args.targets} --every {args.every:g} --minutes {args.minutes:g}"
        f" --clusters {args.clusters} --reviews {reviews} --max-reviews {args.max_reviews}"
        + (f" --fleet-minutes {args.fleet_minutes:g}" if args.fleet_minutes else "")
        + (" --split" if args.split else "")
    )
    work = Path(tempfile.mkdtemp(prefix="dbcrew-bench-scale-"))
    per_cluster = -(-args.targets // args.clusters)
    fleet = Fleet(
        [
            EmbeddedPostgres(
                work / f"cluster{i}", settings={"max_connections": str(2 * per_cluster + 60)}
            )
            for i in range(args.clusters)
        ]
    )
    try:
        with ExitStack() as stack:
            for pg in fleet.clusters:
                pg.start()
                stack.callback(pg.stop)
            took = fleet.make(args.targets)
            say(
                f"{args.targets} targets on {args.clusters} clusters made in {took:.0f} s (CREATE DATABASE ... TEMPLATE)",
                command,
            )
            run(args, reviews, command, fleet, work, stack)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(
    args: argparse.Namespace,
    reviews: int,
    command: str,
    fleet: Fleet,
    work: Path,
    stack: ExitStack,
) -> None:
    every = float(args.every)
    names = list(fleet.dsns)
    reviewed = set(names[:reviews])
    inventory = work / "targets.yaml"
    fleet.inventory(inventory, every, reviewed)
    # A fleet user sizes the per-worker session cap so one worker can hold every target when the other is lost.
    os.environ["DBCREW_WATCH_SESSIONS"] = str(args.targets)
    (work / "server").mkdir()
    started = time.perf_counter()
    server = stack.enter_context(
        running_crew_server(
            inventory,
            work / "server",
            max_reviews=args.max_reviews,
            # uvicorn's access lines (one a request) in logs/server.log: the API requests per minute
            env={"PREFECT_SERVER_LOGGING_LEVEL": "INFO"},
            options=(
                "--local-postgres",
                str(work / "local-pg"),
                *(REVIEWING if args.split else ()),
            ),
        )
    )
    prefect_url = re.search(r"Prefect database: (\S+)", server.banner)
    store_url = re.search(r"store: (\S+)", server.banner)
    assert prefect_url and store_url, server.banner
    say(f"dbcrew server up in {time.perf_counter() - started:.0f} s", command)
    store = Store(store_url[1], fleet)
    second_home = work / "second"
    # Split (docs/operate.md, "Only some workers watch"): the server's worker reviews; "first" is then a third
    # worker that watches beside the second, as a machine of its own.
    watching = WATCHING if args.split else ()
    second = stack.enter_context(
        own_home_worker(server.api, store.url, second_home, queues=watching)
    )
    if args.split:
        third = stack.enter_context(
            own_home_worker(server.api, store.url, work / "third", "third", watching)
        )
        first = psutil.Process(third.pid)
    else:
        first = worker_of(server)

    def all_watched_by_both() -> bool:
        holders = store.holders() if store_ready(store) else {}
        return len(holders) == len(names) and len({h.split("@")[0] for h in holders.values()}) == 2

    started = time.perf_counter()
    wait_for(all_watched_by_both, "every target leased, shared by both workers", 10 * every + 300)
    wait_for(lambda: len(store.ids()) == len(names), "every target's first pass", 4 * every + 300)
    split = Counter(h.split("/")[0] for h in store.holders().values())
    say(
        f"warm-up: every target held and passed once in {time.perf_counter() - started:.0f} s; shares {dict(split)}",
        command,
    )

    length = max(args.minutes * 60, 11 * every)
    t0 = datetime.now(UTC)
    sampler = Sampler(fleet, {"first": first, "second": psutil.Process(second.pid)})
    watcher = threading.Thread(target=sampler.run, args=(max(every / 2, 5.0),), daemon=True)
    watcher.start()
    cpu0 = {"first": cpu(first), "second": cpu(psutil.Process(second.pid))}
    server_cpu0 = cpu(prefect_server_of(server))
    injected = [names[(i * len(names)) // ANOMALIES] for i in range(ANOMALIES)]
    pause_until(t0, 5 * every)
    with ExitStack() as anomalies:
        for name in injected:
            anomalies.enter_context(injections.injected(fleet.dsns[name], [ANOMALY], warmup=0.0))
        injected_at = datetime.now(UTC)
        pause_until(t0, 8 * every)
    injected_to = datetime.now(UTC)
    pause_until(t0, max(9 * every, length - 2 * every))

    # The kill: the second worker's targets, its CPU until now, then SIGKILL.
    held = [t for t, h in store.holders().items() if h.startswith("second@")]
    cpu1 = {"first": cpu(first), "second": cpu(psutil.Process(second.pid))}
    killed = datetime.now(UTC)
    server_cpu1 = cpu(prefect_server_of(server))
    second.send_signal(signal.SIGKILL)
    second.wait()
    steady = store.passes(t0, killed)
    intervals, sampled, doubled = coverage(steady, t0, killed, every)
    passes = sum(len(p) for p in steady.values())
    overlapping = store.scalar(
        "SELECT count(*) FROM watch_tenures a JOIN watch_tenures b ON a.target = b.target"
        " AND a.holder < b.holder AND a.started_at < b.ended_at AND b.started_at < a.ended_at"
        " WHERE a.ended_at > %s",
        (t0,),
    )
    stretch = (killed - t0).total_seconds()
    say(
        f"watching {len(names)} targets at {every:g} s for {stretch:.0f} s before the kill:"
        f" {sampled}/{intervals} target-intervals sampled = {100 * sampled / intervals:.2f} %"
        f" (goal >= 99.5 %), {len(doubled)} sampled twice in one interval ({store.by_two_holders(doubled)} of them by two"
        f" workers), {overlapping} overlapping stints of two"
        " holders on one target (watch_tenures)"
        + (
            "; unsampled by the interval their gap began in: "
            + ", ".join(f"#{k} {n}" for k, n in sorted(missing.items()))
            if (missing := missed_by_interval(steady, t0, killed, every))
            else ""
        ),
        command,
    )
    worker_cpu = sum(cpu1.values()) - sum(cpu0.values())
    say(
        f"watcher CPU per target-pass: {1000 * worker_cpu / max(passes, 1):.2f} ms ({passes} passes;"
        f" first worker {cpu1['first'] - cpu0['first']:.0f} s, second {cpu1['second'] - cpu0['second']:.0f} s of CPU,"
        f" their diagnosis runs included); the Prefect server's CPU meanwhile {server_cpu1 - server_cpu0:.0f} s"
        f" ({100 * (server_cpu1 - server_cpu0) / stretch:.0f} % of a core)",
        command,
    )
    if sampler.sessions:
        mean = sum(s for s, _ in sampler.sessions) / len(sampler.sessions)
        most = max(m for _, m in sampler.sessions)
        say(
            f"sessions per target (pg_stat_activity, application_name {APP}): {mean:.2f} on average over"
            f" {len(sampler.sessions)} readings, at most {most} on one target (diagnosis reviews included)",
            command,
        )
    say(
        "memory per worker (peak RSS): "
        + ", ".join(f"{n} {b / 2**20:.0f} MiB" for n, b in sampler.rss.items()),
        command,
    )

    # The takeover: each of the killed worker's targets sampled again, and the gap stored.
    def resampled() -> dict[str, datetime]:
        after = store.passes(killed, datetime.now(UTC))
        return {t: after[t][0] for t in held if after.get(t)}

    limit = 6 * every + 120
    try:
        wait_for(lambda: len(resampled()) == len(held), "the takeover", limit)
    except TimeoutError:
        pass  # said below: how many were sampled again within the limit
    firsts = resampled()
    seconds = sorted((at - killed).total_seconds() for at in firsts.values()) or [float("nan")]
    ids = store.ids()
    gapped = (
        store.scalar(
            "SELECT count(DISTINCT target) FROM watch_gaps WHERE ended_at > %s AND started_at <= %s"
            f" AND reason LIKE %s AND target IN ({', '.join(['%s'] * len(held))})",
            (killed, killed, "%not watched%", *[ids[t] for t in held if t in ids]),
        )
        if held
        else 0
    )
    within = sum(1 for s in seconds if s <= 2 * every)
    say(
        f"worker killed (SIGKILL) holding {len(held)} targets: {len(firsts)} sampled again within {limit:.0f} s,"
        f" {within} within two intervals ({2 * every:g} s); after {seconds[len(seconds) // 2]:.0f} s (median),"
        f" {seconds[-1]:.0f} s at most; a gap stored for {gapped} of them",
        command,
    )
    sampler.stop.set()
    pause_until(t0, length)

    incidents = store.incidents(t0 - timedelta(seconds=every))
    found = {n: incidents.get(n, []) for n in injected}
    false = {n: v for n, v in incidents.items() if n not in injected}
    say(
        f"{ANOMALY} injected into {len(injected)} targets from {injected_at:%H:%M:%S} to {injected_to:%H:%M:%S}:"
        f" {sum(1 for v in found.values() if v)} with an incident, {sum(1 for v in found.values() if any(d for _, d in v))}"
        f" with its diagnosis kept; false incidents on the other {len(names) - len(injected)} targets over"
        f" {length / 60:.1f} min: {sum(len(v) for v in false.values())}"
        + (f" ({', '.join(sorted(false)[:10])})" if false else ""),
        command,
    )

    with own_home_worker(server.api, store.url, second_home, "second-again", watching):
        nightly(
            server,
            prefect_url[1],
            reviews,
            len(names),
            command,
            60 * args.fleet_minutes,
            "the server's worker reviewing, two others watching" if args.split else "two workers",
        )

        def diagnosed() -> dict[str, list[tuple[datetime, int]]] | None:
            now = store.incidents(t0 - timedelta(seconds=every))
            return now if all(any(d for _, d in now.get(n, [])) for n in injected) else None

        try:
            incidents = wait_for(diagnosed, "a diagnosis kept for each injected target", 180)
        except TimeoutError:
            incidents = store.incidents(t0 - timedelta(seconds=every))
    with psycopg.connect(prefect_url[1]) as conn:
        runs = Counter(
            f"{name} {state}"
            for name, state in conn.execute(
                "SELECT name, state_type FROM flow_run WHERE tags ? 'incident' ORDER BY name"
            )
        )
    say(
        "after the fleet (up to 3 min more): diagnoses kept with the injected targets' incidents: "
        + ", ".join(f"{n} {sum(d for _, d in incidents.get(n, []))}" for n in injected)
        + "; diagnosis runs: "
        + (", ".join(f"{k} x{v}" for k, v in sorted(runs.items())) or "none"),
        command,
    )


def store_ready(store: Store) -> bool:
    try:
        store.scalar("SELECT count(*) FROM watch_leases")
    except psycopg.errors.UndefinedTable:
        return False
    return True


def rows_of(url: str, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql, params).fetchall()


def fleet_pace(ends: list[float], wall: float) -> str:
    """Where a fleet's wall went, from its reviews' ends (seconds after the fleet began, in order): the first
    review's end, the pace over each quarter of the reviews, and the fleet's own end after its last review (its
    summary). A rate that falls from quarter to quarter is the night slowing down; a long first or last stretch
    is the fan-out's or the summary's."""
    n = len(ends)
    marks = [ends[min(n - 1, n * k // 4)] for k in range(5)]
    quarters = []
    for k in range(4):
        done = n * (k + 1) // 4 - n * k // 4
        span = marks[k + 1] - marks[k]
        quarters.append(f"{60 * done / span:.1f}" if span > 0 else "-")
    return (
        f"the fleet's pace: first review ended after {ends[0]:.0f} s; databases a minute over each quarter of its"
        f" {n} reviews {' / '.join(quarters)}; the last review ended {ends[-1]:.0f} s in, the fleet"
        f" {wall - ends[-1]:.0f} s after it"
    )


def pause_until(t0: datetime, seconds: float) -> None:
    left = (t0 + timedelta(seconds=seconds) - datetime.now(UTC)).total_seconds()
    if left > 0:
        time.sleep(left)


def nightly(
    server: CrewServer,
    prefect_url: str,
    reviews: int,
    targets: int,
    command: str,
    cut: float,
    workers: str,
) -> None:
    """The nightly fleet started on demand: the schedule's own fan-out when it reviews every target. With `cut`
    (seconds, > 0), its rate is taken over that first stretch and the fleet is cancelled there (a full fleet of
    1,000 at 20 a minute is most of an hour of the host)."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from prefect.states import Cancelling

    def count(sql: str, params: Sequence[object] = ()) -> int:
        rows = rows_of(prefect_url, sql, params)
        return int(rows[0][0]) if rows else 0

    deployments = count("SELECT count(*) FROM deployment")
    schedules = count("SELECT count(*) FROM deployment_schedule")
    scheduled = count("SELECT count(*) FROM flow_run WHERE state_type = 'SCHEDULED'")
    say(
        f"the Prefect server holds {deployments} deployments, {schedules} schedules and {scheduled} scheduled runs"
        f" for {targets} targets on one cron schedule",
        command,
    )
    access = server.logs / "server.log"
    lines_before = access.read_bytes().count(b'HTTP/1.1"') if access.exists() else 0
    prefect = prefect_server_of(server)
    with (
        temporary_settings(updates={PREFECT_API_URL: server.api}),
        get_client(sync_client=True) as client,
    ):
        if reviews >= targets:
            (name,) = [
                d.name
                for d in client.read_deployments()
                if d.entrypoint == "dbcrew.flows.fleet.scheduled_reviews"
            ]
            deployment = client.read_deployment_by_name(f"scheduled_reviews/{name}")
            parameters: dict[str, object] = {}
        else:
            deployment = client.read_deployment_by_name("fleet_review/fleet")
            parameters = {"tag": NIGHTLY_TAG}
        on_demand = client.read_deployment_by_name("review_target/on-demand").id
        began, cpu0 = datetime.now(UTC), cpu(prefect)
        clock = time.perf_counter()
        run = client.create_flow_run_from_deployment(deployment.id, parameters=parameters)
        while not (state := client.read_flow_run(run.id).state) or not state.is_final():
            if cut > 0 and time.perf_counter() - clock >= cut:
                break
            time.sleep(2.0)
        wall, server_cpu = time.perf_counter() - clock, cpu(prefect) - cpu0
        completed = count(
            "SELECT count(*) FROM flow_run WHERE deployment_id = %s AND created >= %s"
            " AND state_type = 'COMPLETED' AND NOT tags ? 'incident'",
            (on_demand, began),
        )
        requests = (
            (access.read_bytes().count(b'HTTP/1.1"') - lines_before) if access.exists() else 0
        )
        ends = [
            float(row[0])
            for row in rows_of(
                prefect_url,
                "SELECT extract(epoch FROM end_time - %s) FROM flow_run WHERE deployment_id = %s"
                " AND created >= %s AND state_type = 'COMPLETED' AND NOT tags ? 'incident'"
                " ORDER BY end_time",
                (began, on_demand, began),
            )
        ]
        outcome = state.type.value if state else "no state"
        if not (state and state.is_final()):
            client.set_flow_run_state(run.id, Cancelling(), force=True)
            outcome = f"cancelled after {wall / 60:.1f} min as asked (--fleet-minutes)"
    say(
        f"nightly fleet of {reviews} (window {WINDOW} s, {workers}): {outcome}, {completed} reviews completed"
        f" in {wall:.0f} s = {60 * completed / wall:.1f} databases per minute (goal >= 60 at 1,000);"
        f" the Prefect server's CPU {server_cpu:.0f} s ({100 * server_cpu / wall:.0f} % of a core); API requests per"
        " minute: "
        + (
            f"{60 * requests / wall:.0f}"
            if requests
            else "not measured (the server logs no access lines)"
        ),
        command,
    )
    if ends:
        say(fleet_pace(ends, wall), command)
