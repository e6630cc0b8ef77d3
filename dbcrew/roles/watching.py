"""The watcher: every N seconds, one sampling pass over many targets into the store, in one long-lived loop.

Between reviews nothing else looks at a database, so an anomaly that starts and ends on its own
leaves no trace unless something samples it while it runs. The watcher samples each target's cheap
read-only counters (dbcrew/operators/watch/sampling.py) every `every` seconds (15 by default), all targets
of a round at once on a bounded thread pool, and stores each pass as per-second rates in the shared
store (dbcrew/store/samples.py), where a diagnosis of a past interval reads them. It is one plain
loop: no Prefect flow run or task run per sample, so the orchestrator's load does not grow with the
sampling rate (a deployment runs the loop as one long-lived flow run).

A target that does not answer is a gap, not a crash: the gap (from the last pass to the next one,
with the reason) is stored and logged once when it opens and once when it closes, and the loop
goes on with the other targets, connecting again at the next round. A server that restarted
between two passes is a gap too (its counters started again: no rate spans it); a session the
server ended (pg_terminate_backend) is resumed within the pass on a new one, and the pass says so.

Each stored pass also goes to the target's incident detector (dbcrew/operators/window/incidents.py: robust
z-scores against the target's own last hour and, once the store holds minute buckets of at least
three earlier days, against the same hour on those days, so a nightly batch is not an incident
every night; with hysteresis); an incident is stored when it opens,
while it grows and when it closes, and logged when it opens and closes.

Retention and downsampling, applied by the watcher once a minute, so a target's rows are bounded
whatever runs for how long:
- raw passes (one per round) are kept for 2 days;
- 1-minute buckets (the minute's passes merged: rates weighted by the seconds they span, session
  tallies and the session time's slices summed, the heaviest statements, slices and busiest tables
  kept) for 14 days;
- 1-hour buckets (merged from the minutes) for 90 days, and the gaps as long.
A bucket is written once its period is over; a diagnosis reads the finest resolution that still
covers the start of its interval.
"""

from __future__ import annotations

import itertools
import time
import traceback
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import psycopg
from pydantic import BaseModel, Field

from dbcrew import stopping
from dbcrew.errors import TargetError
from dbcrew.logs import data_logger
from dbcrew.operators.watch.sampling import Connected, Sampled, TargetWatch
from dbcrew.operators.watch.session_sampler import SamplePace, session_step
from dbcrew.operators.window.incidents import Detector, Minute, Minutes, Recall
from dbcrew.operators.window.passes import PassBody, as_stored, bodies, merge
from dbcrew.operators.window.picture import HISTORY_SPAN, normal_passes
from dbcrew.redact import redact
from dbcrew.settings.environment import environment
from dbcrew.store.backends import Session
from dbcrew.store.samples import Gap, Incident, SampleStore, StoredPass, WatchedTarget
from dbcrew.targets import PostgresTarget
from dbcrew.targets.postgres import first_line

log = data_logger(__name__)

DEFAULT_EVERY = 15.0
DEFAULT_CONCURRENCY = (
    8  # targets sampled at once: each pass is a few milliseconds of the target's time and of ours
)


@dataclass(frozen=True)
class Tier:
    """One resolution of the stored passes (0: raw) and how long it is kept."""

    resolution: int
    keep: timedelta


TIERS = (Tier(0, timedelta(days=2)), Tier(60, timedelta(days=14)), Tier(3600, timedelta(days=90)))
GAPS_KEPT = timedelta(days=90)
MAINTENANCE_EVERY = 60.0  # seconds between two applications of the retention policy
# An open incident an earlier watcher left is carried on when its last abnormal pass is this recent (the
# detector's recent history, dbcrew/operators/window/picture.py); older, it is closed as it stood.
CARRY_WITHIN = HISTORY_SPAN
INCIDENTS_LOOKED_BACK = (
    GAPS_KEPT  # how far back an incident left open is looked for (kept as long as the gaps)
)


class TargetOutcome(BaseModel):
    """What one round did for one target."""

    display: str
    identity: str
    key: str = Field(
        "",
        description="the target's key in the watcher (its inventory name when shared; else its display)",
    )
    stored: bool = Field(
        False,
        description="a pass was stored (False on the first readings after connecting, a restart or a gap)",
    )
    gap: str = Field(
        "", description="why the target could not be sampled this round; empty when it was"
    )
    rates: dict[str, float] = Field(default_factory=dict)
    reconnects: int = 0
    incident: Incident | None = Field(
        None, description="the incident this round opened, extended or closed"
    )
    left: list[Incident] = Field(
        default_factory=list,
        description="open incidents an earlier watcher left that were too old to carry on: closed as they stood",
    )

    def incidents(self) -> list[Incident]:
        """Every incident this round stored for the target: those closed as they stood, then its own."""
        return [*self.left, *([] if self.incident is None else [self.incident])]


class RoundReport(BaseModel):
    at: datetime
    took_seconds: float
    outcomes: list[TargetOutcome]


@dataclass
class Watched:
    """One target's watch between rounds: its sampling state, its identity in the store, its open gap."""

    watch: TargetWatch
    identity: str
    last_stored: datetime | None = None
    gap: Gap | None = None
    recorded_for: Connected | None = (
        None  # the connection whose facts (settings, cores) the store holds
    )
    detector: Detector | None = None
    unwatched_since: datetime | None = (
        None  # the last pass stored before this watcher started: a longer pause is a gap
    )
    key: str = ""  # how the watcher's owner names it (an inventory name; by default its display)
    unwatched_reason: str = "not watched: no watcher was running"
    # a longer stretch before its first pass is a gap; None: two rounds
    unwatched_after: timedelta | None = None
    # open incidents an earlier watcher left, closed as they stood when this one took the target (stored then),
    # reported with its first stored pass: a share's first readings are taken outside its reported rounds
    left: list[Incident] = field(default_factory=list)


class Watcher:
    """Samples `targets` every `every` seconds into `store` until asked to stop (dbcrew.stopping)."""

    def __init__(
        self,
        targets: list[PostgresTarget],
        store: SampleStore,
        every: float = DEFAULT_EVERY,
        concurrency: int = DEFAULT_CONCURRENCY,
    ):
        self.store = store
        self.every = every
        self.concurrency = max(1, min(concurrency, len(targets) or concurrency))
        self.watched: list[Watched] = []
        # One pace for all its targets' session samples: their sum a second is bounded, however many it watches.
        env = environment()
        self.session_pace = SamplePace(
            session_step(every, env.watch_session_step), env.watch_session_samples
        )
        for t in targets:
            self.adopt(t.display, t)
        # When the last cycle of maintenance began (time.monotonic()): the first is due at once.
        self._maintained = -MAINTENANCE_EVERY
        # The identities the current cycle has still to maintain.
        self._unmaintained: deque[str] = deque()

    def adopt(
        self,
        key: str,
        target: PostgresTarget,
        unwatched_reason: str | None = None,
        unwatched_after: timedelta | None = None,
    ) -> None:
        """Watch one more target under `key` (a key already watched is left as it is: one session per target).
        At its first stored pass, the stretch since the last pass any watcher stored is a gap when longer than
        `unwatched_after` (default two rounds), with `unwatched_reason`."""
        self.adopt_all({key: target}, unwatched_reason, unwatched_after)

    def adopt_all(
        self,
        targets: dict[str, PostgresTarget],
        unwatched_reason: str | None = None,
        unwatched_after: timedelta | None = None,
    ) -> None:
        """`adopt` for many targets at once: what the store knows of them read in one transaction."""
        new = {k: t for k, t in targets.items() if k not in set(self.watching())}
        known = self.store.last_watched(t.display for t in new.values())
        for key, target in new.items():
            identity, since = known.get(target.display, (target.display, None))
            self.watched.append(
                Watched(
                    watch=TargetWatch(target, session_pace=self.session_pace),
                    identity=identity,
                    unwatched_since=since,
                    key=key,
                    unwatched_reason=unwatched_reason or Watched.unwatched_reason,
                    unwatched_after=unwatched_after,
                )
            )

    def drop(self, keys: set[str]) -> None:
        """Stop watching the targets under `keys`: their sessions closed now."""
        for w in [w for w in self.watched if w.key in keys]:
            w.watch.close()
            self.watched.remove(w)

    def watching(self) -> list[str]:
        """The keys of the targets watched, in order."""
        return [w.key for w in self.watched]

    def run(
        self,
        on_round: Callable[[RoundReport], None] = lambda _r: None,
        rounds: int | None = None,
        pause: Callable[[float], bool] = stopping.pause,
    ) -> None:
        """Round after round, one every `every` seconds (a round that overruns skips the ticks it missed), until `rounds`
        are done or `pause` (how the loop waits for the next round) returns True: by default, when the process is asked to stop."""
        with ThreadPoolExecutor(
            max_workers=self.concurrency, thread_name_prefix="dbcrew-watch"
        ) as pool:
            started = time.monotonic()
            done = 0
            try:
                while rounds is None or done < rounds:
                    on_round(self.sample_round(pool))
                    done += 1
                    ticks = int((time.monotonic() - started) / self.every) + 1
                    self.maintain(datetime.now(UTC), until=started + ticks * self.every)
                    if (rounds is not None and done >= rounds) or pause(
                        started + ticks * self.every - time.monotonic()
                    ):
                        return
            finally:
                for w in self.watched:
                    w.watch.close()

    def sample_round(
        self,
        pool: ThreadPoolExecutor,
        may: Callable[[str], bool] | None = None,
        stored: Callable[[Session, dict[str, datetime], datetime], None] | None = None,
        only: set[str] | None = None,
    ) -> RoundReport:
        """One pass over every target at once (at most `concurrency` in flight); everything it learned stored in one
        transaction. With `may` (a target's key -> whether this watcher may sample it now: its lease), a target is
        sampled only if `may` holds when its pass starts, and its pass stored only if it still holds once the round
        is over; one that misses either is left out of the round (no pass, no gap: it is another watcher's now).
        `stored` is told, in the round's own transaction, the keys of the passes stored (with the round's start) and
        when. With `only`, the round covers the targets of those keys alone (a target just taken over, read at once)."""
        began, started = time.monotonic(), datetime.now(UTC)
        allowed = may or (lambda _key: True)
        watched = [w for w in self.watched if only is None or w.key in only]
        results = list(pool.map(lambda w: _sample(w.watch) if allowed(w.key) else None, watched))
        at = datetime.now(UTC)
        kept = [
            (w, r)
            for w, r in zip(watched, results, strict=True)
            if r is not None and allowed(w.key)
        ]
        passes, gaps, texts, facts, outcomes, incidents = [], [], {}, [], [], []
        for w, result in kept:
            connected = w.watch.connected
            if (
                isinstance(result, Sampled)
                and connected is not None
                and connected is not w.recorded_for
            ):
                w.identity, w.recorded_for = (
                    connected.brief.identity(w.watch.target.address),
                    connected,
                )
                facts.append(
                    WatchedTarget(
                        target=w.identity,
                        display=w.watch.target.display,
                        facts=connected.facts.model_dump_json(),
                        updated_at=at,
                    )
                )
                if w.detector is None or w.detector.target != w.identity:
                    w.detector, left = self._detector(w.identity, at)
                    incidents.extend(left)  # stored closed now, reported with its first stored pass
                    w.left.extend(left)
                    for closed in left:
                        log.warning(
                            "watch: %s: its incident since %s, left open by its last watcher at %s, is too old to"
                            " carry on: closed as it stood",
                            w.watch.target.display,
                            f"{closed.started_at:%Y-%m-%d %H:%M:%S}",
                            f"{closed.ended_at:%Y-%m-%d %H:%M:%S}",
                        )
            outcome = TargetOutcome(display=w.watch.target.display, identity=w.identity, key=w.key)
            gap = self._gap_after(w, result, at)
            if gap is not None:
                gaps.append(gap)
            if isinstance(result, Sampled) and result.body is not None:
                passes.append(
                    StoredPass(
                        target=w.identity,
                        at=at,
                        seconds=result.seconds,
                        body=as_stored(result.body),
                    )
                )
                texts.update({(w.identity, d): q for d, q in result.texts.items()})
                outcome = outcome.model_copy(
                    update={
                        "stored": True,
                        "rates": result.body.rates,
                        "reconnects": result.body.reconnects,
                        "left": w.left,
                    }
                )
                w.left = []
                w.last_stored = at
                unwatched = self._unwatched(w, at)
                if unwatched is not None:
                    gaps.append(unwatched)
                if w.detector is not None:
                    was_open = w.detector.incident is not None
                    found = w.detector.observe(at, result.seconds, result.body.rates)
                    if found is not None:
                        incidents.append(found.model_copy(deep=True))
                        outcome = outcome.model_copy(update={"incident": incidents[-1]})
                        _log_incident(w.watch.target.display, incidents[-1], opened=not was_open)
            elif not isinstance(result, Sampled):
                outcome = outcome.model_copy(update={"gap": result})
            outcomes.append(outcome)
        keys = {w.key: started for w, r in kept if isinstance(r, Sampled) and r.body is not None}
        self.store.record(
            passes,
            gaps,
            texts,
            facts,
            incidents,
            also=None if stored is None else lambda session: stored(session, keys, at),
        )
        for w, result in kept:
            if isinstance(result, Sampled):
                w.watch.stored_texts(result.texts)
        return RoundReport(at=at, took_seconds=time.monotonic() - began, outcomes=outcomes)

    def _detector(self, identity: str, now: datetime) -> tuple[Detector, list[Incident]]:
        """A detector for the target, knowing its recent passes from the store (a restarted watcher need not learn again)
        and reading the same hour of its earlier days from the store's 1-minute buckets, carrying on the incident an
        earlier watcher left open; with the open incidents too old to carry on, closed as they stood."""
        detector = seeded_detector(self.store, identity, now)
        return detector, carry_open_incidents(self.store, detector, now)

    def _gap_after(self, w: Watched, result: Sampled | str, at: datetime) -> Gap | None:
        """The gap to store after this round, if any: opened (or extended) by a failure or a restart, closed by a stored pass."""
        if isinstance(result, str) or result.restarted:
            reason = (
                result
                if isinstance(result, str)
                else "the server restarted: its counters started again"
            )
            if w.gap is None:
                w.gap = Gap(
                    target=w.identity, started_at=w.last_stored or at, ended_at=at, reason=reason
                )
                log.warning(
                    "watch: %s: no samples since %s: %s",
                    w.watch.target.display,
                    f"{w.gap.started_at:%H:%M:%S}",
                    reason,
                )
            else:
                w.gap = w.gap.model_copy(update={"ended_at": at})
            return w.gap
        if w.gap is not None and not isinstance(result, str) and result.body is not None:
            closed, w.gap = w.gap.model_copy(update={"ended_at": at}), None
            log.warning(
                "watch: %s: samples resumed after %.0f s",
                w.watch.target.display,
                (at - closed.started_at).total_seconds(),
            )
            return closed
        return None

    def _unwatched(self, w: Watched, at: datetime) -> Gap | None:
        """At a target's first stored pass, the time since the last pass an earlier watcher stored, when longer than
        two rounds (or the target's own `unwatched_after`): nobody watched then (a stopped watcher or worker), a gap
        in the series like any other."""
        since, w.unwatched_since = w.unwatched_since, None
        after = w.unwatched_after or timedelta(seconds=2 * self.every + 1)
        if since is None or at - since <= after:
            return None
        log.warning(
            "watch: %s: not watched from %s to %s",
            w.watch.target.display,
            f"{since:%H:%M:%S}",
            f"{at:%H:%M:%S}",
        )
        return Gap(
            target=w.identity,
            started_at=since,
            ended_at=at,
            reason=w.unwatched_reason,
        )

    def maintain(self, now: datetime, until: float | None = None) -> None:
        """The retention policy for every watched target, a cycle over all of them begun at most once a
        MAINTENANCE_EVERY. With `until` (time.monotonic()), it stops there, after one target at least, and the
        next call goes on where it stopped: maintenance takes the loop's spare time and never its next round.

        It costs each target about ten store statements (26 ms of wall a target on the PostgreSQL store of
        `bench scale`'s 1,000 targets, at load 2), so a worker holding 500 targets spent about 13 s of a minute
        on it, on the loop's own thread after a round; the share loop counted its next tick after it, so a
        round and its maintenance past the next round's slot skipped that round. In that bench both workers
        once missed a round of 60 s (whether maintenance made that round late was not measured)."""
        if not self._unmaintained:
            if time.monotonic() - self._maintained < MAINTENANCE_EVERY:
                return
            self._maintained = time.monotonic()
            self._unmaintained = deque(dict.fromkeys(w.identity for w in self.watched))
        while self._unmaintained:
            apply_retention(self.store, self._unmaintained.popleft(), now)
            if until is not None and time.monotonic() >= until:
                return


def seeded_detector(store: SampleStore, identity: str, now: datetime) -> Detector:
    """The target's detector as of `now`: its last hour of raw passes as the recent history, its minute buckets as
    the earlier days' same hour (dbcrew/operators/window/incidents.py)."""
    detector = Detector(identity, recall=minutes_of(store, identity))
    detector.history.extend(
        body.rates for _seconds, body in bodies(normal_passes(store, identity, now))
    )
    return detector


def carry_open_incidents(store: SampleStore, detector: Detector, now: datetime) -> list[Incident]:
    """Hand `detector` the target's incident that an earlier watcher left open (it died, or gave the target up while
    the incident was open), so that it is extended and closed here, and diagnosed at its close, once: the store holds
    one record per incident (target, start), and only the target's one holder writes it. An open incident whose last
    abnormal pass is more than CARRY_WITHIN old (the detector's recent history: nothing left to judge its end
    against) is not carried on but closed as it stood, never left open for ever: returned, for the caller to store
    and diagnose."""
    left = [
        i for i in store.incidents(detector.target, now - INCIDENTS_LOOKED_BACK) if not i.closed
    ]
    recent = [i for i in left if now - i.ended_at <= CARRY_WITHIN]
    if recent:
        carried = recent[-1]
        detector.carry(carried)
        log.warning(
            "watch: %s: carrying on its incident open since %s (left by its last watcher)",
            detector.target,
            f"{carried.started_at:%H:%M:%S}",
        )
    return [
        i.model_copy(update={"closed": True})
        for i in left
        if not recent or i.started_at != recent[-1].started_at
    ]


def minutes_of(store: SampleStore, identity: str) -> Recall:
    """The target's 1-minute buckets in an interval, as the detector reads its earlier days."""
    minute = TIERS[1].resolution

    def recall(after: datetime, until: datetime) -> Minutes:
        found = []
        for p in store.passes(identity, minute, after, until):
            body = PassBody.model_validate_json(p.body)
            names = body.rates.keys() | body.lows.keys() | body.highs.keys()
            found.append(
                Minute(
                    p.at,
                    low={n: body.lowest(n) for n in names},
                    high={n: body.highest(n) for n in names},
                )
            )
        return found

    return recall


def apply_retention(store: SampleStore, target: str, now: datetime) -> None:
    """Merge the complete buckets from the next finer resolution, then drop what outlived its tier."""
    downsample(store, target, now)
    for tier in TIERS:
        store.prune(target, tier.resolution, now - tier.keep)
    store.prune_gaps(target, now - GAPS_KEPT)


def downsample(store: SampleStore, target: str, now: datetime) -> None:
    """For each tier after the first: the buckets that ended since its latest one, merged from the finer tier's passes."""
    for fine, coarse in itertools.pairwise(TIERS):
        size = coarse.resolution
        # From the end of the latest bucket; with none yet, from the start of the bucket holding the oldest pass.
        first = store.latest(target, size)
        if first is None:
            earliest = store.earliest(target, fine.resolution)
            if earliest is None:
                continue
            first = _ceil(earliest, size) - timedelta(seconds=size)
        until = _floor(now, size)
        if until <= first:
            continue
        buckets: dict[datetime, list[StoredPass]] = {}
        for p in store.passes(target, fine.resolution, first, until):
            buckets.setdefault(_ceil(p.at, size), []).append(p)
        merged = [
            StoredPass(
                target=target,
                resolution=size,
                at=end,
                seconds=sum(p.seconds for p in group),
                body=as_stored(merge(bodies(group))),
            )
            for end, group in sorted(buckets.items())
        ]
        store.replace(target, size, first, until, merged)


def _floor(moment: datetime, size: int) -> datetime:
    return datetime.fromtimestamp(moment.timestamp() // size * size, UTC)


def _ceil(moment: datetime, size: int) -> datetime:
    floor = _floor(moment, size)
    return floor if floor == moment else floor + timedelta(seconds=size)


def _log_incident(display: str, incident: Incident, opened: bool) -> None:
    """One line when an incident opens and one when it closes (none for the passes in between)."""
    signals = ", ".join(
        f"{s.name} {s.baseline_median:.4g} -> {s.peak:.4g}" for s in incident.signals[:3]
    )
    if opened:
        log.warning(
            "watch: %s: incident since %s: %s", display, f"{incident.started_at:%H:%M:%S}", signals
        )
    elif incident.closed:
        log.warning(
            "watch: %s: incident from %s to %s over: %s",
            display,
            f"{incident.started_at:%H:%M:%S}",
            f"{incident.ended_at:%H:%M:%S}",
            signals,
        )


def _sample(watch: TargetWatch) -> Sampled | str:
    """One target's pass, or why it could not be read (its session is then dropped: the next round connects anew).

    A fault of dbcrew's own on one target's data (what its readers did not foresee) loses that target's pass, as
    an outage would: stored as a gap with its kind, its traceback logged (redacted: the message may quote the
    target's text), and never the round of the targets watched beside it."""
    try:
        return watch.sample()
    except (TargetError, psycopg.Error) as exc:
        watch.close()
        return redact(first_line(exc))
    except Exception as exc:  # noqa: BLE001 - one target's fault loses its pass, not its neighbours' round
        watch.close()
        log.error(
            "watch: %s: a fault of dbcrew's own on this target's pass:\n%s",
            watch.target.display,
            redact("".join(traceback.format_exception(exc))),
        )
        return f"a fault of dbcrew's own ({type(exc).__name__}; the watcher's log has it)"
