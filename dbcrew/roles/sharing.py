"""Watching shared over the pool: each watcher samples the share of the watched targets it holds leases on.

Every worker of the `watch` queue runs one share loop per watching interval (dbcrew/flows/watching.py).
Beside it, a thread of its own heartbeats in the store and renews the leases the loop holds
(dbcrew/store/leases.py) four times a lease, whatever the loop is doing: a round slowed past its
lease, or a tick adopting many targets, loses none. The loop ticks twice a round. At each tick it
heartbeats and renews too, and plans its share (`plan_share`): at most ceil(targets / live
holders) targets, and at most `cap` (each watched target holds one session of this watcher). It
gives up what is above its share or left the inventory, and takes free targets (no lease, or an
expired one) up to its share, preferring its own by rendezvous hashing so that watchers joining
at once do not all reach for the same targets. It takes them in waves of `concurrency` (first
readings run that many at once): one wave, then as many as fit the rest of the tick's adoption
time at the pace this tick's waves took, measured as it goes; each batch's leases claimed, then
its targets adopted and read a first time (a pass needs two readings). The adoption time
(`adoption_end`) is ADOPTION_SHARE of an interval, or, at a tick between rounds, until the next
round is due, since the loop would only wait for it. No wave is begun that would end past that
(one wave a tick at least), and a tick between rounds that runs over is followed by its round,
late, not by the tick after (`_next_tick`): the adoptions never make the taker's own targets miss
their round. The rest of its share stays free, for any holder with room, and comes at the next
ticks: a lease is claimed only to be adopted at once, so no holder keeps a lease on a target it
does not sample (one claimed and never adopted, the store failing in between, is released at the
next tick). At each round tick it samples
the targets it holds (dbcrew/roles/watching.py Watcher), each only while its lease is surely still
its own; those adopted since the last round first, in a transaction of their own, so their first
pass is stored once they alone are read, not after the whole round.

So, with a round of `every` seconds, a tick every half round and a lease of half a round
(`lease_for`, at least MIN_LEASE):
- a watcher that joins is seen by the others at their next tick, which gives up the excess; it
  claims the freed targets at its following tick: its share within two ticks (one round);
- a watcher that dies stops renewing: its heartbeat and its leases end at most half a round after
  its last renewal (the moment of its death at the latest). The others take them at their next
  tick (half a round later at most; later only when their own round overran its tick), reading
  each once, and store the first pass at their next round: that tick itself when it is a round
  tick (after at most ADOPTION_SHARE of adoptions), else the round due half a round later, which
  those adoptions never delay. Worst case, claimed at a tick between rounds: one and a half rounds
  after the death, plus the round tick's own adoptions of what the claiming tick left (none when
  the dead watcher's share fits that tick's half round; at most ADOPTION_SHARE) and the reading of
  the targets just adopted (not the taker's whole round). A share larger than a tick adopts comes
  over the next ticks. The stretch from its last pass to the taker's first is stored as a gap
  ("not watched: its watcher X stopped renewing its lease");
- a watcher that stops as planned releases its leases and heartbeat at once (LeaseBook.leave).
Targets added to or removed from the inventory are met at the next reading of it (`refresh`).
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from dbcrew import stopping
from dbcrew.errors import TargetError
from dbcrew.logs import data_logger
from dbcrew.roles.watching import DEFAULT_CONCURRENCY, RoundReport, Watcher
from dbcrew.settings.environment import environment
from dbcrew.store.backends import Session, StoreUnavailable
from dbcrew.store.leases import LeaseBook
from dbcrew.store.samples import SampleStore
from dbcrew.targets import PostgresTarget

log = data_logger(__name__)

TICKS_PER_ROUND = 2  # ticks (plan, release, claim) per sampling round
# A lease lasts half an interval (at least MIN_LEASE seconds) and a thread of its own renews it
# RENEWALS_PER_LEASE times a lease, whatever the rounds and the ticks are doing: three renewals in a row
# may fail or come late before a lease lapses. Renewed by the loop's thread between rounds, a round slowed
# past its lease (a starved CPU, reviews in the same process) lost every lease of its worker (bench scale,
# 2026-11-28). Half an interval keeps a dead watcher's targets within two intervals of its death: its
# leases end at most a lease after its last renewal, the others claim them at their next tick (half an
# interval later at most) and store their first pass at their next round (half an interval after that):
# 1.5 intervals, and what remains of the second is for the reading of the targets it adopted (its round reads
# them first). A quarter interval would take a quarter interval off that, at the price of twice the renewals:
# at 60 s rounds one every 3.75 s, 8 more a minute per worker, each a heartbeat and an UPDATE of every lease
# it holds (at 1,000 targets and two workers, about 8,000 more lease rows written a minute); at 15 s rounds
# one every 0.94 s, and a stall of 3.75 s would lose every lease. Left at half an interval.
LEASE_SHARE = 0.5
MIN_LEASE = 2.0  # seconds: under this, a renewal is a store transaction every half second or less
RENEWALS_PER_LEASE = 4
# A tick's adoptions (claiming a wave of targets, connecting to them, their first readings) run on the loop's
# thread, before the round at a round tick: there they may delay the round by this share of an interval at most,
# so the taker's own targets keep their round (the round ends within the interval while it takes less than the
# rest); a tick between rounds adopts until the next round is due, when that is later. Until 2026-11-29 a tick
# claimed as many targets as the loop's last adoptions predicted it could adopt in that time, and a loop whose last
# adoptions were its cold start's (every target new at once) predicted few: a worker killed holding 500 of 1,000
# targets had 160 of them sampled again within two intervals, the last after four (bench scale, 60 s rounds).
ADOPTION_SHARE = 0.25


def lease_for(every: float) -> timedelta:
    """The lease of a target watched every `every` seconds: half an interval, at least MIN_LEASE."""
    return timedelta(seconds=max(MIN_LEASE, LEASE_SHARE * every))


def fair_share(targets: int, live: int, cap: int) -> int:
    """What one of `live` watchers takes of `targets`: ceil(targets / live), at most `cap`."""
    return min(cap, math.ceil(targets / max(1, live)))


def affinity(holder: str, target: str) -> int:
    """The holder's preference for the target (rendezvous hashing): watchers rank the targets differently."""
    return int.from_bytes(hashlib.sha256(f"{holder}\x1f{target}".encode()).digest()[:8], "big")


@dataclass(frozen=True)
class SharePlan:
    """One tick's decision for one holder."""

    keep: list[str]
    release: list[str]  # above its share, or no longer watched
    claim: int  # how many free targets to take
    share: int  # its fair share now


def plan_share(
    watched: Sequence[str], held: Iterable[str], live: int, cap: int, holder: str
) -> SharePlan:
    """Keep what is still watched up to the fair share (those the holder prefers), release the rest, claim up to it."""
    names = set(watched)
    share = fair_share(len(names), live, cap)
    mine = sorted((t for t in set(held) if t in names), key=lambda t: -affinity(holder, t))
    gone = sorted(t for t in set(held) if t not in names)
    keep, excess = mine[:share], mine[share:]
    return SharePlan(
        keep=sorted(keep), release=sorted([*excess, *gone]), claim=share - len(keep), share=share
    )


class SessionBudget:
    """The sessions one worker holds over all its share loops (one per watching interval), at most `cap`
    (DBCREW_WATCH_SESSIONS): a loop reserves what it may hold before it claims, so two loops claiming at once never
    hold more than the cap between them."""

    def __init__(self, cap: int):
        self.cap = cap
        self._held: dict[int, int] = {}  # loop -> the targets it holds or has reserved
        self._lock = threading.Lock()

    def grant(self, loop: int, wanted: int) -> int:
        """Reserve up to `wanted` targets in all for `loop`, with the other loops' as they are; what it may hold."""
        with self._lock:
            others = sum(n for k, n in self._held.items() if k != loop)
            granted = max(0, min(wanted, self.cap - others))
            self._held[loop] = granted
            return granted

    def hold(self, loop: int, held: int) -> None:
        """What `loop` holds now (at most what it was granted); 0 when it ended."""
        with self._lock:
            self._held[loop] = held


class ShareLoop:
    """One watcher's share of one scope's targets, kept and sampled until asked to stop.

    `inventory` names the scope's watched targets (read again every `refresh` seconds); `connect`
    gives a target to sample by name (TargetError when this machine cannot: its password missing).
    `on_round` sees each round's report (outcomes keyed by target name)."""

    def __init__(
        self,
        book: LeaseBook,
        store: SampleStore,
        every: float,
        inventory: Callable[[], Sequence[str]],
        connect: Callable[[str], PostgresTarget],
        cap: int | None = None,
        refresh: float = 30.0,
        concurrency: int = DEFAULT_CONCURRENCY,
        budget: SessionBudget | None = None,
    ):
        self.book = book
        self.every = every
        self.inventory = inventory
        self.connect = connect
        self.cap = cap or environment().watch_sessions  # DBCREW_WATCH_SESSIONS
        self.budget = (
            budget  # the worker's, shared with its other loops; None: this loop's cap alone
        )
        self.refresh = refresh
        self.watcher = Watcher([], store, every=every, concurrency=concurrency)
        self.names: list[str] = []
        # name -> why this watcher cannot sample it (left to the others)
        self.unusable: dict[str, str] = {}
        # name -> the start of this holder's stint of it (its tenure)
        self._since: dict[str, datetime] = {}
        self._read_at = -math.inf
        self._said_short = 0
        # adopted since the last round (first readings taken, no pass yet): read first at the next round
        self._fresh: set[str] = set()

    def run(
        self,
        on_round: Callable[[RoundReport], None] = lambda _r: None,
        pause: Callable[[float], bool] = stopping.pause,
    ) -> None:
        """Tick after tick (TICKS_PER_ROUND a round; a tick that overruns skips those it missed, never a round:
        `_next_tick`), a round at every TICKS_PER_ROUND-th, until `pause` returns True; then every lease is
        released. The leases are renewed meanwhile by a thread of their own (`_renew_until`), however long a
        round or a tick takes."""
        step = self.every / TICKS_PER_ROUND
        renewal_stop = threading.Event()
        renewal = threading.Thread(
            target=self._renew_until,
            args=(renewal_stop,),
            name=f"dbcrew-renew-{self.book.scope}",
            daemon=True,
        )
        renewal.start()
        with ThreadPoolExecutor(
            max_workers=self.watcher.concurrency, thread_name_prefix="dbcrew-share"
        ) as pool:
            started = time.monotonic()
            tick = 0
            try:
                while True:
                    self.tick(pool, until=self.adoption_end(started, tick))
                    if tick % TICKS_PER_ROUND == 0:
                        try:
                            report = self.sample(pool)
                        except (
                            StoreUnavailable
                        ) as exc:  # the leases lapse if it lasts: others take over
                            log.warning("watch share: the round could not be stored: %s", exc)
                        else:
                            on_round(report)
                    tick = self._next_tick(tick, int((time.monotonic() - started) / step) + 1)
                    try:
                        self.watcher.maintain(datetime.now(UTC), until=started + tick * step)
                    except (
                        StoreUnavailable
                    ) as exc:  # as a round's: the next call goes on from there
                        log.warning("watch share: retention could not run: %s", exc)
                    if pause(started + tick * step - time.monotonic()):
                        return
            finally:
                renewal_stop.set()  # before leaving: a heartbeat after it would count this holder alive
                renewal.join()
                self.watcher.drop(set(self.watcher.watching()))
                if self.budget is not None:
                    self.budget.hold(id(self), 0)
                try:
                    self.book.leave()
                except (
                    StoreUnavailable
                ) as exc:  # the leases then expire on their own, a lease later
                    log.warning("watch share: could not release the leases: %s", exc)

    @staticmethod
    def _next_tick(tick: int, due: int) -> int:
        """The tick after `tick`, `due` being the first whose time has not come: the ticks missed are skipped, but a
        tick between rounds that ran past the next round's time (its adoptions' last wave slower than the slowest
        before it) is followed by that round, late, not by the tick after it: its adoptions never cost the
        holder's own targets a round."""
        if tick % TICKS_PER_ROUND == 0:
            return due
        return min(due, (tick // TICKS_PER_ROUND + 1) * TICKS_PER_ROUND)

    def _renew_until(self, stop: threading.Event) -> None:
        """Heartbeat and renew every lease held, RENEWALS_PER_LEASE times a lease, until `stop`. A lease lost here
        (another holder took it after it lapsed) ends its sampling at once (`LeaseBook.valid`, checked before and
        after each pass) and its watch at the next tick."""
        period = self.book.seconds / RENEWALS_PER_LEASE
        while not stop.wait(period):
            try:
                self.book.heartbeat()
                lost = self.book.renew_all()
            except StoreUnavailable as exc:  # the leases lapse if it lasts: others take over
                log.warning("watch share: the leases could not be renewed: %s", exc)
                continue
            if lost:
                log.warning(
                    "watch share: lost the leases of %d targets (taken after they lapsed): %s",
                    len(lost),
                    ", ".join(lost[:10]),
                )

    def adoption_end(self, started: float, tick: int) -> float:
        """When the adoptions of tick number `tick` of a loop started at `started` (time.monotonic()) must end:
        ADOPTION_SHARE of an interval from now, or, at a tick between rounds, the next round's due time when that
        is later (the loop would only wait for it)."""
        end = time.monotonic() + ADOPTION_SHARE * self.every
        if tick % TICKS_PER_ROUND == 0:
            return end
        step = self.every / TICKS_PER_ROUND
        return max(end, started + (tick // TICKS_PER_ROUND + 1) * TICKS_PER_ROUND * step)

    def sample(self, pool: ThreadPoolExecutor) -> RoundReport:
        """One round over the targets held; the tenure of each stored pass recorded. Those adopted since the last
        round are read first and stored in a transaction of their own: their first pass (a takeover's) waits for
        their own readings, not for the whole round's."""
        fresh, self._fresh = self._fresh & set(self.watcher.watching()), set()
        if not fresh:
            return self.watcher.sample_round(pool, may=self.book.valid, stored=self._tenures)
        first = self.watcher.sample_round(
            pool, may=self.book.valid, stored=self._tenures, only=fresh
        )
        rest = set(self.watcher.watching()) - fresh
        if not rest:
            return first
        then = self.watcher.sample_round(pool, may=self.book.valid, stored=self._tenures, only=rest)
        return RoundReport(
            at=then.at,
            took_seconds=first.took_seconds + then.took_seconds,
            outcomes=[*first.outcomes, *then.outcomes],
        )

    def _tenures(self, session: Session, stored: dict[str, datetime], at: datetime) -> None:
        """The round's passes are being stored: this holder's stint of each target now ends at `at`."""
        for key, began in stored.items():
            self._since.setdefault(key, began)
        self.book.record_tenure(session, {k: self._since[k] for k in stored}, at)

    def tick(self, pool: ThreadPoolExecutor | None = None, until: float | None = None) -> None:
        """Heartbeat, renew, plan, release; then take free targets up to the share, a wave at a time (`_take`),
        until `until` (time.monotonic(); by default ADOPTION_SHARE of an interval from now); then watch exactly
        what is held. With `pool`, the targets just taken are read at once (a pass needs two readings): their
        first pass is stored at the next round, not the one after."""
        end = time.monotonic() + ADOPTION_SHARE * self.every if until is None else until
        try:
            self._read_inventory()
            live = self.book.heartbeat()
            watching = self.watcher.watching()
            held = self.book.renew(t for t in watching if t in self.names)
            fair = fair_share(len(self.names), live, self.cap)
            cap = self.cap if self.budget is None else self.budget.grant(id(self), fair)
            plan = plan_share(self.names, held, live, cap, self.book.holder)
            # lost to another holder, or left the inventory
            gone = [t for t in watching if t not in held]
            # claimed and never adopted (the store failed in the middle of a wave): not hidden past this tick
            unwatched = sorted(set(self.book.taken()) - set(watching))
            self.book.release(
                [*plan.release, *(t for t in gone if t not in self.names), *unwatched]
            )
            free = self._free() if plan.claim > 0 else []
        except StoreUnavailable as exc:
            log.warning(
                "watch share: the store cannot be used (leases lapse, samples stop): %s", exc
            )
            return
        lost = set(gone) | set(plan.release)
        if lost:
            self.watcher.drop(lost)
            self._fresh -= lost
            for key in lost:
                self._since.pop(key, None)
        try:
            self._take(plan.claim, free, pool, end)
        except StoreUnavailable as exc:
            # what it took so far is watched; the rest stays free for the next tick
            log.warning("watch share: could not take more targets: %s", exc)
        if self.budget is not None:
            self.budget.hold(id(self), len(self.watcher.watching()))
        self._say_short(live, fair - min(cap, fair))

    def _take(
        self, wanted: int, free: list[str], pool: ThreadPoolExecutor | None, until: float
    ) -> None:
        """Take up to `wanted` of the `free` targets (most preferred first), in waves of `concurrency`: their leases
        claimed, then the targets adopted and read once. No wave is begun that would end after `until`, at the pace
        of this tick's slowest waves (the first always is: one wave a tick at least). A lease is claimed only
        to be adopted at once, so what a tick does not reach stays free, for any holder with room, and this one
        takes it at its next tick. Unlike a count of claims predicted from the pace of earlier adoptions (a cold
        start's, after which a takeover came back over four ticks), the waves stop at the time itself."""
        # a dead holder -> its targets taken, said once a tick
        taken_over: dict[str, list[str]] = {}
        try:
            self._waves(wanted, free, pool, until, taken_over)
        finally:
            for dead, names in sorted(taken_over.items()):
                log.warning(
                    "watch share: took %d targets over from %s (its lease expired): %s",
                    len(names),
                    dead,
                    ", ".join(sorted(names)),
                )

    def _waves(
        self,
        wanted: int,
        free: list[str],
        pool: ThreadPoolExecutor | None,
        until: float,
        taken_over: dict[str, list[str]],
    ) -> None:
        """`_take`'s waves, claimed and adopted a batch at a time: one wave first, then as many as this tick's
        slowest batch so far says fit before `until` (each batch one claim, one read of what the store knows of
        its targets and one store of their first readings, not three store transactions a wave of 8). The targets
        taken from dead holders are noted in `taken_over` as they are adopted."""
        per_wave = 0.0  # seconds a wave took, in this tick's slowest batch
        batches = taken = 0
        while taken < wanted and free:
            began = time.monotonic()
            needed = math.ceil((wanted - taken) / self.watcher.concurrency)
            if batches == 0:
                waves = 1
            elif until - began >= needed * per_wave:
                waves = needed
            else:
                waves = int((until - began) / per_wave)
            if waves < 1:
                return
            batches += 1
            size = min(wanted - taken, waves * self.watcher.concurrency)
            claims = self.book.claim_some(free, size)
            # claim_some went through `free` up to its last claim, or through all of it when it got fewer
            free = free[free.index(claims[-1].target) + 1 :] if len(claims) == size else []
            takeovers = {c.target: c.taken_from for c in claims}
            self._adopt(takeovers)
            adopted = set(takeovers) & set(self.watcher.watching())
            for name in adopted:
                if takeovers[name] is not None:
                    taken_over.setdefault(str(takeovers[name]), []).append(name)
            self._fresh |= adopted
            if pool is not None and adopted:
                self.watcher.sample_round(pool, may=self.book.valid, only=adopted)
            taken += len(adopted)
            done = max(1, math.ceil(len(claims) / self.watcher.concurrency))
            per_wave = max(per_wave, (time.monotonic() - began) / done, 1e-6)

    def _read_inventory(self) -> None:
        now = time.monotonic()
        if now - self._read_at < self.refresh:
            return
        self._read_at = now
        names = sorted(set(self.inventory()))
        if names != self.names:
            log.info("watch share: %d targets watched in the pool", len(names))
        self.names = names
        self.unusable = {}  # tried again at each reading: a password set since, a target that answers again

    def _free(self) -> list[str]:
        """The targets no live holder has a lease on, that this watcher neither watches nor cannot use, most
        preferred first."""
        held = set(self.watcher.watching())
        candidates = [t for t in self.names if t not in held and t not in self.unusable]
        return sorted(self.book.free(candidates), key=lambda t: -affinity(self.book.holder, t))

    def _adopt(self, takeovers: dict[str, str | None]) -> None:
        """Watch the targets just claimed: those taken from a watcher that died store the stretch since its last
        pass as a gap once it exceeds a round; one this machine cannot connect is released for the others."""
        by_source: dict[str | None, dict[str, PostgresTarget]] = {}
        for name, taken_from in takeovers.items():
            try:
                by_source.setdefault(taken_from, {})[name] = self.connect(name)
            except TargetError as exc:
                self.unusable[name] = str(exc)
                log.warning(
                    "watch share: cannot watch %s here, left to the other watchers: %s", name, exc
                )
        self.book.release(self.unusable.keys() & takeovers.keys())
        for taken_from, targets in by_source.items():
            if taken_from is None:
                self.watcher.adopt_all(targets)
                continue
            self.watcher.adopt_all(
                targets,
                unwatched_reason=f"not watched: its watcher {taken_from} stopped renewing its lease",
                unwatched_after=timedelta(seconds=self.every),  # any interval missed
            )

    def _say_short(self, live: int, cut: int) -> None:
        """Never a silent all-clear: the targets nobody can take are said, when every watcher is at its cap, or when
        the worker's session budget cut this loop's share (`cut`: its other intervals' loops hold the rest; no other
        watcher takes more than its own share)."""
        capped = len(self.names) - live * self.cap
        short = max(capped, cut)
        if short > 0 and short != self._said_short:
            why = (
                f"{live} watchers at their cap of {self.cap} sessions"
                if capped >= cut
                else "this worker's sessions (DBCREW_WATCH_SESSIONS) are held by its other watching intervals"
            )
            log.warning(
                "watch share: %d of %d targets cannot be watched: %s", short, len(self.names), why
            )
        self._said_short = max(0, short)


def holder_name(worker: str, scope: str) -> str:
    """A holder's name: the worker (host and process, or its Prefect name) and the scope it watches."""
    return f"{worker}/{scope}"


__all__ = ["ShareLoop", "SharePlan", "affinity", "fair_share", "holder_name", "plan_share"]
