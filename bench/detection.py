"""Incident detection: recall and delay on injections, false incidents over healthy hours (`python -m bench watch --suite detection`).

One embedded PostgreSQL (bench/diagnose.py's server: durable commits) with pgbench's tables (scale 5)
and the injection tables of bench/injections.py, watched by the real Watcher (dbcrew/roles/watching.py) and
its incident detector.

Injections. Under a steady pgbench load, each case runs one cause of bench/injections.py at one
intensity (the recipe's client counts halved, or doubled for a one-client recipe; the recipes were
written for the diagnosis benchmark, not for this detector) for `--duration` seconds, watched every
`--every` second(s) live. Between cases the watch goes on until no incident is open. A case is
detected when an incident opens between its start and two intervals after its end; its delay is
from its start to the end of the pass that opened the incident, in sampling intervals. A recipe's
reset (refilling the tables it consumes) is injection machinery, not load: incidents opening while
it runs and until the watch is calm again are set aside (printed, not scored).

Healthy hours. pgbench processes (each CLIENTS clients at RATE transactions a second) come and go
along LEVELS, one level per 60 passes, and a nightly batch (bench/pgbench/nightly_batch.sql,
ordinary reporting work, unthrottled) runs BATCH_PASSES passes from the synthetic 02:00. The real
Watcher records passes of it every `--healthy-every` second(s) (a second is the floor: backends
publish their counters at most once a second), then those recorded passes are replayed through a
detector with synthetic timestamps 15 s apart, from 01:00, as a watcher at its default interval
would have stored them: 240 passes are an hour. A day of `--healthy-hours` (24 by default) is not
all recorded in place (5,760 passes, 1.6 h of wall at 1 s): its first `--recorded-hours` (3: one
cycle of LEVELS, through the batch) are; each later block of 60 passes replays a recorded block of
the same level, never the batch's, drawn at random (seeded) and never the same block twice in a
row for its level; a level the recorded hours hold only in the batch's block (6) gets one block
recorded apart. So every replayed pass is one the target produced under that load; what is
synthetic is the timestamps, the order of the blocks after the recorded hours, and the junctions
between them (a block's first pass was recorded after its own predecessor's level, not the one it
follows in the day). Printed: the distinct real passes and how often each is replayed on average.
Three earlier nights are recorded the same way (48 passes each, the batch at the same synthetic
02:00), stored with synthetic timestamps in a real store and downsampled by the watcher's
retention policy into the minute buckets the detector reads for its same-hour baseline
(seeded_detector, as the watcher does). Every incident in the healthy hours is a false one,
printed with the detector's view of the passes that opened it (each signal's value, the recent
median and z, the same hour's range, the score); the same replay without the earlier nights shows
what the same-hour baseline changes. A 1 s pass is noisier than a 15 s one (fewer transactions per
pass), so the replay is no easier than the real thing. The day's passes, stored 15 s apart in a
real store and downsampled by the retention policy, give the store's bytes per target-day, with the
session time attribution's part (bench/watch.py's measure; a 1 s pass holds fewer session samples
than a 15 s one, so that part is a lower bound here: the cost suite measures it at 15 s).

A missed injection is printed with the detector's view of each pass from its start to two intervals
after its end (the live passes replayed through a detector as the watcher's was: the same decisions).
"""

from __future__ import annotations

import argparse
import math
import random
import re
import subprocess
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psutil

from bench import injections
from bench.diagnose import DiagnosisServer
from bench.watch import PASSES_PER_DAY_AT_15S, active_backends, session_json
from dbcrew.lab.embedded import POSTGRES_BIN_PATH
from dbcrew.operators.window.evidence import statement_identity
from dbcrew.operators.window.incidents import HISTORY, OPEN_AFTER, Detector, SignalJudgement
from dbcrew.operators.window.passes import PassBody, as_stored, bodies
from dbcrew.roles.watching import (
    TIERS,
    RoundReport,
    Watcher,
    apply_retention,
    seeded_detector,
)
from dbcrew.store.samples import Incident, SampleStore, StoredPass, open_samples
from dbcrew.targets import parse_target

SCALE = 5
CLIENTS, RATE = 2, 15  # per pgbench process of the steady load
LEVELS = (2, 3, 4, 5, 6, 5, 4, 3, 3, 4, 5, 4)  # processes, one level per 60 passes (15 min at 15 s)
LEVEL_PASSES = 60
INJECTION_LEVEL = 3
BATCH_CLIENTS = 2
BATCH_AT = 240  # passes after the start of the healthy day (01:00): 02:00
BATCH_PASSES = 32  # 8 minutes at 15 s
NIGHTS = 3  # earlier nights recorded for the same-hour baseline
NIGHT_BEFORE = 8  # passes recorded before the batch on an earlier night (and as many after)
SYNTHETIC = 15.0  # seconds between two replayed passes: the watcher's default interval
DAY = datetime(2026, 1, 8, 1, 0, tzinfo=UTC)  # the healthy day's synthetic start
WARM_PASSES = 60  # passes the live watch learns before the first injection
CALM_PASSES = 3
DEFAULT_CAUSES = (
    "lock_contention",
    "workload_many_inserts",
    "workload_high_updates",
    "workload_large_insert",
    "workload_large_fetch",
    "index_missing",
    "query_poor_join",
    "cpu_contention",
    "io_contention",
    "sync_commit_pressure",
)


def scaled(recipe: injections.Recipe, factor: float, name: str) -> injections.Recipe:
    """The recipe with its client counts (and its program's -c) times `factor`, at least one; no reset (run apart)."""
    command = list(recipe.command)
    if "-c" in command:
        i = command.index("-c") + 1
        clients = max(1, math.ceil(int(command[i]) * factor))
        command[i] = str(clients)
        command[command.index("-j") + 1] = str(min(clients, 2))
    return replace(
        recipe,
        cause=name,
        clients=tuple((c, max(1, math.ceil(n * factor))) for c, n in recipe.clients),
        command=tuple(command),
        reset="",
    )


def factors(recipe: injections.Recipe) -> tuple[float, float]:
    """Two intensities: half and all of the recipe's clients, or all and twice for a one-client recipe."""
    counts = [n for _c, n in recipe.clients]
    if recipe.command:
        counts.append(int(recipe.command[recipe.command.index("-c") + 1]))
    return (0.5, 1.0) if max(counts) >= 2 else (1.0, 2.0)


RECIPES: dict[str, injections.Recipe] = {
    f"{cause}@x{f:g}": scaled(recipe, f, f"{cause}@x{f:g}")
    for cause, recipe in injections.RECIPES.items()
    for f in factors(recipe)
}


def clients_of(recipe: injections.Recipe) -> str:
    counts = [str(n) for _c, n in recipe.clients]
    if recipe.command:
        counts.append(recipe.command[recipe.command.index("-c") + 1])
    return "+".join(counts)


class Load:
    """The healthy load's pgbench processes: `level` steady ones and, while `batch`, the nightly batch."""

    def __init__(self, dsn: str):
        self.dsn = dsn
        self.steady: list[subprocess.Popen[bytes]] = []
        self.batch: list[subprocess.Popen[bytes]] = []
        self.script = injections.PGBENCH_SCRIPTS / "nightly_batch.sql"

    def _start(self, *args: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [str(POSTGRES_BIN_PATH / "pgbench"), "-n", "-T", "36000", *args, self.dsn],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def set(self, level: int, batch: bool) -> None:
        while len(self.steady) < level:
            self.steady.append(self._start("-c", str(CLIENTS), "-j", "1", "-R", str(RATE)))
        while len(self.steady) > level:
            _end(self.steady.pop())
        if batch and not self.batch:
            self.batch.append(
                self._start("-c", str(BATCH_CLIENTS), "-j", "1", "-f", str(self.script))
            )
        while not batch and self.batch:
            _end(self.batch.pop())

    def stop(self) -> None:
        self.set(0, False)


def _end(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    process.wait(timeout=30)


def prepare(dsn: str) -> None:
    injections.prepare_schema(dsn)
    subprocess.run(
        [str(POSTGRES_BIN_PATH / "pgbench"), "-i", "-s", str(SCALE), "-q", dsn],
        check=True,
        capture_output=True,
    )
    with injections.connect(dsn) as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS nightly_totals (bid int, total bigint, accounts bigint, at timestamptz)"
        )


# -- healthy hours ----------------------------------------------------------------------------------------------------


def record(
    server: DiagnosisServer, load: Load, schedule: list[tuple[int, bool]], every: float, out: Path
) -> list[StoredPass]:
    """Watch the server while the load follows `schedule` (a level and batch per pass); the passes stored, in order."""
    store = open_samples(str(out))
    stored: list[RoundReport] = []
    done = threading.Event()

    def on_round(report: RoundReport) -> None:
        if report.outcomes[0].stored:
            stored.append(report)
        if len(stored) >= len(schedule):
            done.set()
            return
        load.set(*schedule[len(stored)])  # the load of the next pass

    load.set(*schedule[0])
    Watcher([parse_target(server.dsn)], store, every=every).run(
        on_round, pause=lambda s: done.wait(s)
    )
    identity = stored[-1].outcomes[0].identity
    return store.passes(identity, 0, stored[0].at - timedelta(seconds=1), stored[-1].at)[
        : len(schedule)
    ]


def schedule(n: int) -> list[tuple[int, bool]]:
    """The healthy day's load per pass: its level of LEVELS, and whether the nightly batch runs."""
    return [(level(i // LEVEL_PASSES), BATCH_AT <= i < BATCH_AT + BATCH_PASSES) for i in range(n)]


def level(block: int) -> int:
    return LEVELS[block % len(LEVELS)]


def holds_batch(block: int) -> bool:
    return block * LEVEL_PASSES < BATCH_AT + BATCH_PASSES and BATCH_AT < (block + 1) * LEVEL_PASSES


@dataclass
class Day:
    """The replayed healthy day: its passes, and which recorded pass each one is (its own index while recorded in
    place; the extra blocks' passes are indexed past them)."""

    passes: list[StoredPass]
    sources: list[int]
    recorded: int  # passes recorded in place, from the day's start
    extra: int  # passes recorded apart, for a level the recorded hours held only with the batch

    def distinct(self) -> int:
        """The distinct real passes the day replays."""
        return len(set(self.sources))

    def composed(self) -> int:
        """The blocks of the day past the ones recorded in place (each a recorded block replayed)."""
        return (len(self.passes) - self.recorded + LEVEL_PASSES - 1) // LEVEL_PASSES


@dataclass(frozen=True)
class DayPlan:
    """What to record for a healthy day of `n` passes: its first `real` in place (`load`: their load), then one block of
    LEVEL_PASSES for each level the day needs that those hold only with the batch (its level in `load`)."""

    n: int
    real: int
    load: list[tuple[int, bool]]

    @classmethod
    def of(cls, hours: float, recorded_hours: float) -> DayPlan:
        n = int(hours * HISTORY)
        through_batch = -(-(BATCH_AT + BATCH_PASSES) // LEVEL_PASSES)  # the batch: always in place
        blocks = max(through_batch, round(recorded_hours * HISTORY / LEVEL_PASSES))
        real = min(n, blocks * LEVEL_PASSES)
        held = {level(b) for b in range(real // LEVEL_PASSES) if not holds_batch(b)}
        needed = {level(b) for b in range(real // LEVEL_PASSES, -(-n // LEVEL_PASSES))}
        missing = sorted(needed - held)
        return cls(
            n, real, schedule(real) + [(lv, False) for lv in missing for _ in range(LEVEL_PASSES)]
        )

    def compose(self, recorded: list[StoredPass]) -> Day:
        """The day from the recorded passes: the first `real` in place; each later block of LEVEL_PASSES a recorded block
        of its level (never one holding the batch), drawn at random (seeded), never the same one twice in a row for its
        level when there is another."""
        pool: dict[int, list[int]] = {}
        for b in range(len(self.load) // LEVEL_PASSES):
            if b >= self.real // LEVEL_PASSES or not holds_batch(b):
                pool.setdefault(self.load[b * LEVEL_PASSES][0], []).append(b)
        passes, sources = recorded[: self.real], list(range(self.real))
        rng, last = random.Random(0), dict[int, int]()
        while len(passes) < self.n:
            lv = level(len(passes) // LEVEL_PASSES)
            choices = [b for b in pool[lv] if b != last.get(lv)] or pool[lv]
            last[lv] = b = rng.choice(choices)
            take = min(LEVEL_PASSES, self.n - len(passes))
            passes += recorded[b * LEVEL_PASSES : b * LEVEL_PASSES + take]
            sources += range(b * LEVEL_PASSES, b * LEVEL_PASSES + take)
        return Day(
            passes=passes, sources=sources, recorded=self.real, extra=len(self.load) - self.real
        )


@dataclass
class Healthy:
    day: Day
    hours: float
    false_incidents: list[Opening]
    without_same_hour: list[Opening]
    nights: int
    wall: float
    bytes: str


@dataclass
class Recording:
    """The healthy hours' real passes, in order: each earlier night's, and those of the day's plan. Kept (`--keep`), a
    recording is replayed again (`--replay`) through the detector of another commit: the same real passes judged
    anew, with no server and no load."""

    nights: list[list[StoredPass]]
    today: list[StoredPass]

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        for name, passes in [
            *((f"night{k}", n) for k, n in enumerate(self.nights)),
            ("today", self.today),
        ]:
            (folder / f"{name}.jsonl").write_text(
                "".join(p.model_dump_json() + "\n" for p in passes)
            )

    @classmethod
    def load(cls, folder: Path) -> Recording:
        def read(path: Path) -> list[StoredPass]:
            return [StoredPass.model_validate_json(line) for line in path.read_text().splitlines()]

        nights = sorted(
            folder.glob("night*.jsonl"), key=lambda p: int(p.stem.removeprefix("night"))
        )
        return cls(nights=[read(n) for n in nights], today=read(folder / "today.jsonl"))


def record_healthy(
    server: DiagnosisServer, plan: DayPlan, every: float, workdir: Path, nights: int
) -> Recording:
    load = Load(server.dsn)
    try:
        night = [
            (level(BATCH_AT // LEVEL_PASSES), NIGHT_BEFORE <= i < NIGHT_BEFORE + BATCH_PASSES)
            for i in range(2 * NIGHT_BEFORE + BATCH_PASSES)
        ]
        return Recording(
            nights=[
                record(server, load, night, every, workdir / f"night{k}.duckdb")
                for k in range(nights)
            ],
            today=record(server, load, plan.load, every, workdir / "today.duckdb"),
        )
    finally:
        load.stop()


def healthy(recording: Recording, plan: DayPlan, workdir: Path, wall: float) -> Healthy:
    """The day composed from the recording, replayed with the earlier nights as its same hour and without them."""
    day = plan.compose(recording.today)
    synthetic = open_samples(str(workdir / "synthetic.duckdb"))
    batch = DAY + timedelta(seconds=SYNTHETIC * BATCH_AT)
    for back, passes in enumerate(recording.nights, start=1):
        first = batch - timedelta(days=back, seconds=SYNTHETIC * NIGHT_BEFORE)
        synthetic.record(
            StoredPass(
                target="healthy",
                at=first + timedelta(seconds=SYNTHETIC * (i + 1)),
                seconds=SYNTHETIC,
                body=p.body,
            )
            for i, p in enumerate(passes)
        )
    apply_retention(synthetic, "healthy", DAY)
    return Healthy(
        day=day,
        hours=len(day.passes) * SYNTHETIC / 3600,
        false_incidents=replay(seeded_detector(synthetic, "healthy", DAY), day.passes),
        without_same_hour=replay(Detector("healthy"), day.passes),
        nights=len(recording.nights),
        wall=wall,
        bytes=day_bytes(day.passes, workdir / "day.duckdb"),
    )


@dataclass
class Opening:
    """An incident as it opened, and the detector's view of the passes that opened it (theirs, oldest first)."""

    incident: Incident
    views: list[tuple[datetime, dict[str, SignalJudgement]]]


def replay(detector: Detector, passes: list[StoredPass]) -> list[Opening]:
    """The incidents the recorded passes open, replayed 15 s apart from DAY, each with the detector's view of the passes
    that opened it."""
    opened, views = [], deque[tuple[datetime, dict[str, SignalJudgement]]](maxlen=OPEN_AFTER + 1)
    for i, p in enumerate(passes):
        was_open = detector.incident is not None
        ended = DAY + timedelta(seconds=SYNTHETIC * (i + 1))
        rates = PassBody.model_validate_json(p.body).rates
        views.append((ended, detector.judge(rates, ended - timedelta(seconds=SYNTHETIC / 2))))
        found = detector.observe(ended, SYNTHETIC, rates)
        if found is not None and not was_open:
            began = found.started_at
            opened.append(Opening(found.model_copy(deep=True), [v for v in views if v[0] > began]))
    return opened


def view_line(at: datetime, judged: dict[str, SignalJudgement], top: int = 3) -> str:
    """One pass as the detector judged it: its `top` signals by score (then by the recent z), each with its value, the
    recent median and z, the same hour's range where known, and the score."""
    ranked = sorted(judged.items(), key=lambda kv: (-abs(kv[1].score), -abs(kv[1].recent)))[:top]
    parts = []
    for name, j in ranked:
        hour = "" if j.band is None else f", hour {j.band[0]:.4g}-{j.band[1]:.4g}"
        parts.append(
            f"{name} {j.value:.4g} (median {j.median:.4g}, z {j.recent:+.1f}{hour}; score {j.score:+.1f})"
        )
    return f"{at:%H:%M:%S}: " + "; ".join(parts)


def day_bytes(passes: list[StoredPass], path: Path) -> str:
    """The store's bytes per target-day for the day's passes: stored 15 s apart from DAY in a real store, downsampled by
    the watcher's retention policy (its minute and hour buckets), each tier's mean body times its rows a day; with the
    session time attribution's part (bench/watch.py's measure) and the passes' range the minute buckets keep."""
    store = open_samples(str(path))
    store.record(
        StoredPass(
            target="day",
            at=DAY + timedelta(seconds=SYNTHETIC * (i + 1)),
            seconds=SYNTHETIC,
            body=p.body,
        )
        for i, p in enumerate(passes)
    )
    end = DAY + timedelta(seconds=SYNTHETIC * len(passes))
    apply_retention(store, "day", end)
    tiers = {t.resolution: store.passes("day", t.resolution, DAY, end) for t in TIERS}
    per_day = {0: PASSES_PER_DAY_AT_15S, 60: 1440, 3600: 24}

    def mean(rows: list[StoredPass], size: Callable[[StoredPass], int]) -> float:
        return sum(size(r) for r in rows) / max(len(rows), 1)

    def session(r: StoredPass) -> int:
        return len(session_json(PassBody.model_validate_json(r.body)))

    def extremes(r: StoredPass) -> int:
        body = PassBody.model_validate_json(r.body)
        return len(r.body) - len(as_stored(body.model_copy(update={"lows": {}, "highs": {}})))

    whole = {k: mean(rows, lambda r: len(r.body)) for k, rows in tiers.items()}
    sampled = {k: mean(rows, session) for k, rows in tiers.items()}
    mb = 2**20
    buckets = sum(whole[k] * per_day[k] for k in (60, 3600)) / mb
    session_buckets = sum(sampled[k] * per_day[k] for k in (60, 3600)) / mb
    active = active_backends(tiers[0])
    per_backend = f" ({buckets / active:.2f} MB per active backend)" if active else ""
    return (
        f"store per target-day (the day's passes stored 15 s apart in DuckDB and downsampled by the watcher's"
        f" retention: {len(tiers[0])} raw, {len(tiers[60])} minute, {len(tiers[3600])} hour rows): {whole[0]:.0f} B a"
        f" raw pass, {whole[60]:.0f} B a minute bucket (of which the passes' range {mean(tiers[60], extremes):.0f} B),"
        f" {whole[3600]:.0f} B an hour bucket; after downsampling {buckets:.2f} MB a target-day{per_backend}, raw"
        f" passes {whole[0] * per_day[0] / mb:.2f} MB a day (kept {TIERS[0].keep.days} days); session time attribution"
        f" {sampled[0]:.0f} B a raw pass, {sampled[60]:.0f} B a minute bucket: {session_buckets:.2f} MB a target-day"
        f" after downsampling, raw {sampled[0] * per_day[0] / mb:.2f} MB a day; {active:.2f} active backends per"
        f" session sample on average"
    )


# -- injections -------------------------------------------------------------------------------------------------------


@dataclass
class Case:
    name: str
    start: datetime
    end: datetime
    effect: datetime | None = (
        None  # the end of the first pass its statements appear in (first_effects)
    )


@dataclass
class Live:
    """The live watch of the injection phase: every incident opening (when, which) as the rounds report them."""

    openings: list[tuple[datetime, Incident]] = field(default_factory=list)
    identity: str = ""  # the target's identity in the store
    ends: list[datetime] = field(default_factory=list)  # the end of every stored pass
    rounds: int = 0
    open: bool = False
    views: list[tuple[datetime, dict[str, SignalJudgement]]] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)

    def on_round(self, report: RoundReport) -> None:
        with self.changed:
            self.rounds += 1
            self.identity = report.outcomes[0].identity
            if report.outcomes[0].stored:
                self.ends.append(report.at)
            incident = report.outcomes[0].incident
            if incident is not None and not self.open:
                self.openings.append((report.at, incident))
            self.open = incident is not None and not incident.closed if incident else self.open
            self.changed.notify_all()

    def calm(self, passes: int, limit: float) -> None:
        """Wait until no incident is open and `passes` more rounds went by (at most `limit` seconds)."""
        with self.changed:
            mark = self.rounds
            self.changed.wait_for(
                lambda: not self.open and self.rounds - mark >= passes, timeout=limit
            )


def inject(
    server: DiagnosisServer, names: list[str], every: float, duration: float, workdir: Path
) -> tuple[list[Case], Live, list[tuple[datetime, datetime]]]:
    live, stop = Live(), threading.Event()
    load = Load(server.dsn)
    load.set(INJECTION_LEVEL, False)
    store = open_samples(str(workdir / "live.duckdb"))
    watcher = threading.Thread(
        target=Watcher([parse_target(server.dsn)], store, every=every).run,
        kwargs={"on_round": live.on_round, "pause": stop.wait},
        daemon=True,
    )
    watcher.start()
    cases, set_aside = [], []
    try:
        with live.changed:
            live.changed.wait_for(
                lambda: live.rounds >= WARM_PASSES, timeout=WARM_PASSES * every + 120
            )
        for name in names:
            reset = injections.RECIPES[name.split("@")[0]].reset
            if reset:
                began = datetime.now(UTC)
                with injections.connect(server.dsn) as conn:
                    conn.execute(reset)
                live.calm(CALM_PASSES, 120)
                set_aside.append((began, datetime.now(UTC)))
            live.calm(CALM_PASSES, 120)
            with injections.injected(server.dsn, [name], warmup=0.0, catalogue=__name__):
                start = datetime.now(UTC)
                time.sleep(duration)
                end = datetime.now(UTC)
            cases.append(Case(name, start, end))
            live.calm(CALM_PASSES, 120)
    finally:
        stop.set()
        watcher.join(timeout=60)
        load.stop()
    first_effects(store, live.identity, cases)
    live.views = judged_passes(store, live.identity)
    return cases, live, set_aside


def judged_passes(
    store: SampleStore, identity: str
) -> list[tuple[datetime, dict[str, SignalJudgement]]]:
    """Every stored pass of the live watch as its detector judged it: the passes replayed in order through a detector
    as the watcher's was (no earlier days; its first history the store's, empty), which takes the same decisions."""
    detector, views = Detector(identity), []
    for p in store.passes(identity, 0, datetime(2000, 1, 1, tzinfo=UTC), datetime.now(UTC)):
        rates = PassBody.model_validate_json(p.body).rates
        views.append((p.at, detector.judge(rates, p.at - timedelta(seconds=p.seconds / 2))))
        detector.observe(p.at, p.seconds, rates)
    return views


# -- the first effect -------------------------------------------------------------------------------------------------


def recipe_keys(recipe: injections.Recipe) -> frozenset[str]:
    """The statements an injection runs, by key (pglast's fingerprint: its literals and parameters left out, as in
    pg_stat_statements' texts and the sampled ones): its clients' statements and transactions, its pgbench script's."""
    rng = random.Random(0)
    texts = []
    for client, _n in recipe.clients:
        steps = client.transaction or (client.statement,)
        texts += [step if isinstance(step, str) else step(rng)[0] for step in steps]
    if "-f" in recipe.command:
        script = Path(recipe.command[recipe.command.index("-f") + 1]).read_text()
        lines = [line for line in script.splitlines() if not line.lstrip().startswith(("\\", "--"))]
        texts += "\n".join(lines).split(";")
    placeholders = re.compile(r"%s|(?<!:):[A-Za-z_]\w*")  # psycopg's and pgbench's, not a ::cast
    keys = [statement_identity(placeholders.sub("1", t).strip()) for t in texts if t.strip()]
    return frozenset(k.key for k in keys if k.kind not in ("begin", "commit", "transaction", ""))


def pass_keys(body: PassBody, texts: dict[str, str]) -> set[str]:
    """The statements a stored pass saw: finished (pg_stat_statements), running, or in its session time."""
    sampled = {s[0] for s in body.session_time.statements} if body.session_time else set()
    digests = [s.digest for s in body.statements] + list(body.running)
    return sampled | {statement_identity(texts[d]).key for d in digests if d in texts}


def passes_between(ends: list[datetime], effect: datetime, opened: datetime) -> int:
    """The passes from the first effect's to the opening one (negative: the incident opened before it)."""
    if effect <= opened:
        return sum(effect < t <= opened for t in ends)
    return -sum(opened < t <= effect for t in ends)


def first_effects(store: SampleStore, identity: str, cases: list[Case]) -> None:
    """Each case's first effect on the target: the end of the first stored pass after its start that saw one of its
    statements (None when none did)."""
    if not cases:
        return
    passes = store.passes(identity, 0, cases[0].start, datetime.now(UTC))
    parts = bodies(passes)
    texts = store.texts(
        identity,
        {d for _s, b in parts for d in [s.digest for s in b.statements] + list(b.running)},
    )
    seen = [(p.at, pass_keys(b, texts)) for p, (_s, b) in zip(passes, parts, strict=True)]
    for case in cases:
        keys = recipe_keys(RECIPES[case.name])
        case.effect = next((at for at, got in seen if at > case.start and got & keys), None)


# -- the suite --------------------------------------------------------------------------------------------------------


def main(argv: Sequence[str] = ()) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench watch --suite detection")
    parser.add_argument(
        "--causes",
        default=",".join(DEFAULT_CAUSES),
        help="causes of bench/injections.py, each at two intensities (empty: the healthy day alone)",
    )
    parser.add_argument(
        "--every", type=float, default=1.0, help="the live watch's interval during injections"
    )
    parser.add_argument("--duration", type=float, default=5.0, help="seconds each injection runs")
    parser.add_argument(
        "--healthy-hours", type=float, default=24.0, help="the healthy day replayed at 15 s"
    )
    parser.add_argument(
        "--recorded-hours",
        type=float,
        default=3.0,
        help="of it, recorded in place (the rest replays recorded blocks at their levels)",
    )
    parser.add_argument(
        "--nights", type=int, default=NIGHTS, help="earlier nights recorded for the same hour"
    )
    parser.add_argument(
        "--keep",
        type=Path,
        help="a folder to keep the healthy hours' recorded passes in (JSON lines)",
    )
    parser.add_argument(
        "--replay",
        type=Path,
        help="replay the healthy hours kept in this folder (no recording; with the day's options it was kept with)",
    )
    parser.add_argument(
        "--healthy-every",
        type=float,
        default=1.0,
        help="the recording's interval (replayed as 15 s)",
    )
    args = parser.parse_args(list(argv))
    causes = [c for c in args.causes.split(",") if c]
    unknown = [c for c in causes if c not in injections.RECIPES]
    if unknown:
        parser.error(f"unknown cause(s) {', '.join(unknown)}")
    names = [n for n in RECIPES if n.split("@")[0] in causes]
    plan = DayPlan.of(args.healthy_hours, args.recorded_hours)
    if args.replay and not (args.replay / "today.jsonl").is_file():
        parser.error(f"{args.replay} holds no kept recording (today.jsonl): keep one with --keep")
    kept = Recording.load(args.replay) if args.replay else None
    if kept is not None and len(kept.today) != len(plan.load):
        parser.error(
            f"{args.replay} holds {len(kept.today)} passes of the day; --healthy-hours {args.healthy_hours:g}"
            f" --recorded-hours {args.recorded_hours:g} record {len(plan.load)}: give the ones it was recorded with"
        )
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="dbcrew-bench-detection-") as tmp:
        workdir = Path(tmp)
        server = (
            DiagnosisServer.start(
                workdir, baseline_seconds=1.0, prepare=prepare, catalogue=__name__
            )
            if names or kept is None
            else None
        )
        try:
            if kept is None:
                assert server is not None
                kept = record_healthy(server, plan, args.healthy_every, workdir, args.nights)
                if args.keep:
                    kept.save(args.keep)
            recorded_in = time.monotonic() - began
            cases, live, set_aside = (
                inject(server, names, args.every, args.duration, workdir)
                if names and server is not None
                else ([], Live(), [])
            )
            calm = healthy(kept, plan, workdir, recorded_in)
        finally:
            if server is not None:
                server.stop()
    every = args.every
    print(
        f"injections: {len(cases)} ({len(causes)} causes x 2 intensities) of {args.duration:g} s each, under pgbench"
        f" ({INJECTION_LEVEL} x {CLIENTS} clients at {RATE} tps), watched live every {every:g} s"
    )
    print(
        f"{'cause@intensity':34} {'clients':8} {'detected':9} {'first effect':13} {'opened after':14}"
        f" {'after effect':13} {'incident from':14} signals"
    )
    matched: set[int] = set()
    within = within_effect = 0
    for case in cases:
        hit = next(
            (
                (at, inc)
                for at, inc in live.openings
                if case.start <= at <= case.end + timedelta(seconds=2 * every)
            ),
            None,
        )
        effect = (
            f"{(case.effect - case.start).total_seconds() / every:5.1f} interv."
            if case.effect
            else "  none seen"
        )
        if hit is None:
            print(f"{case.name:34} {clients_of(RECIPES[case.name]):8} {'no':9} {effect:13}")
            for at, judged in live.views:
                if case.start < at <= case.end + timedelta(seconds=2 * every):
                    print(f"    the detector's view of the pass ending {view_line(at, judged)}")
            continue
        at, incident = hit
        matched |= {
            j
            for j, (t, _inc) in enumerate(live.openings)
            if case.start <= t <= case.end + timedelta(seconds=2 * every)
        }
        delay = (at - case.start).total_seconds() / every
        within += delay <= 2
        # Counted in passes from the first effect's to the opening one: a pass that took longer than the interval on
        # a loaded host is one interval of the watch, not two.
        since = None if case.effect is None else passes_between(live.ends, case.effect, at)
        within_effect += since is not None and since <= 2
        after = f"{since:3d} passes" if since is not None else "-"
        print(
            f"{case.name:34} {clients_of(RECIPES[case.name]):8} {'yes':9} {effect:13} {delay:5.1f} interv.  "
            f"{after:13} "
            f"{(incident.started_at - case.start).total_seconds() / every:+5.1f} interv.  "
            + ", ".join(s.name for s in incident.signals[:4])
        )
    aside = {
        j for j, (t, _inc) in enumerate(live.openings) if any(a <= t <= b for a, b in set_aside)
    }
    stray = [
        (t, inc) for j, (t, inc) in enumerate(live.openings) if j not in matched and j not in aside
    ]
    for t, inc in stray:
        print(
            f"  false incident during the injection phase at {t:%H:%M:%S}: {', '.join(s.name for s in inc.signals[:4])}"
        )
        for at, judged in live.views:
            if inc.started_at < at <= t:
                print(f"    the detector's view of the pass ending {view_line(at, judged)}")
    detected = sum(
        any(c.start <= t <= c.end + timedelta(seconds=2 * every) for t, _inc in live.openings)
        for c in cases
    )
    day = calm.day
    recorded = (
        f"replayed from {args.replay}" if args.replay else f"{calm.wall / 60:.1f} min of wall time"
    )
    composed = (
        f"; from {day.recorded} on, {day.composed()} blocks of {LEVEL_PASSES} replay recorded blocks of their level"
        f" (none with the batch; {day.extra} passes recorded apart for a level the recorded hours held only with the"
        f" batch), drawn at random: {day.distinct()} distinct real passes, each replayed"
        f" {len(day.passes) / max(day.distinct(), 1):.1f} times on average"
        if day.composed()
        else ""
    )
    print(
        f"healthy: {len(day.passes)} passes replayed 15 s apart = {calm.hours:.1f} h at the default interval, every one"
        f" really recorded every {args.healthy_every:g} s ({recorded}, with {calm.nights} earlier nights of"
        f" {2 * NIGHT_BEFORE + BATCH_PASSES} passes): the first {day.recorded} in place{composed};"
        f" pgbench at {min(LEVELS) * RATE}-{max(LEVELS) * RATE} tps changing every {LEVEL_PASSES} passes, a nightly"
        f" batch for {BATCH_PASSES} passes at 02:00 (also on the earlier nights)"
    )
    for opening in calm.false_incidents:
        inc = opening.incident
        print(
            f"  false incident at {inc.started_at:%H:%M:%S} (synthetic): {', '.join(s.name for s in inc.signals[:4])}"
        )
        for at, judged in opening.views:
            print(f"    the detector's view of the pass ending {view_line(at, judged)}")
    for opening in calm.without_same_hour:
        print(
            f"  without the same hour, at {opening.incident.started_at:%H:%M:%S} (synthetic):"
            f" {', '.join(s.name for s in opening.incident.signals[:4])}"
        )
    print(calm.bytes)
    false = len(calm.false_incidents) + len(stray)
    true = len(matched)
    print(
        f"false incidents: {len(calm.false_incidents)} in the healthy hours (without the same-hour baseline:"
        f" {len(calm.without_same_hour)}), {len(stray)} beside the injections; {len(aside)} set aside while a recipe's"
        f" tables were refilled"
    )
    print(
        f"precision {true / max(true + false, 1):.2f} ({true} incidents during injections, {false} false);"
        f" recall {detected / max(len(cases), 1):.2f} ({detected} of {len(cases)});"
        f" within two intervals of the first effect: {within_effect} of {len(cases)} (of the start: {within});"
        f" load average {' '.join(f'{x:.1f}' for x in psutil.getloadavg())} (1, 5, 15 min) on {psutil.cpu_count()} cores;"
        f" wall {(time.monotonic() - began) / 60:.1f} min"
    )
    print(
        f"reproduce: python -m bench watch --suite detection --causes {','.join(causes)} --every {every:g}"
        f" --duration {args.duration:g} --healthy-hours {args.healthy_hours:g} --recorded-hours {args.recorded_hours:g}"
        f" --healthy-every {args.healthy_every:g} --nights {args.nights}"
    )
