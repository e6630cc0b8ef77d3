"""A watcher whose rounds outlast its lease keeps its leases (dbcrew/roles/sharing.py: renewal on a thread of its own), a
lease the renewal finds lost stops that target's sampling, and a dead watcher's target is passed by another within
two intervals, by construction.

The target is a real database of the embedded PostgreSQL behind a slow link (dbcrew/lab/slow_link.py: every reply
held DELAY seconds), so each of the watcher's rounds lasts longer than a lease, on any host: a pass makes
many round trips. Meanwhile a second watcher tries to claim the target again and again. The leases must
hold through every round: the rival never wins, the passes are stored, and the store records one holder.

The takeover bound is not timed (the test's host may be slow): its parts are checked one by one, each of which
holds on any host: the store ends a dead watcher's lease at most a lease after its last renewal; the taker
claims it at its first tick after that and stores a pass at the round that follows its claim (its first
readings are taken in the claiming tick); and a lease plus two tick steps plus a tick's adoptions fit in two
intervals.
"""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.lab.slow_link import slow_link
from dbcrew.lab.waiting import wait_for
from dbcrew.roles.sharing import (
    ADOPTION_SHARE,
    LEASE_SHARE,
    MIN_LEASE,
    TICKS_PER_ROUND,
    ShareLoop,
    lease_for,
)
from dbcrew.roles.watching import RoundReport
from dbcrew.store.leases import LeaseBook, lease_holders, tenures
from dbcrew.store.samples import open_samples
from dbcrew.targets import parse_target

EVERY = 4.0
DELAY = 0.4  # seconds each reply of the target is held: a pass of several round trips outlasts the lease
SCOPE = f"every-{EVERY:g}s"
WAIT = 240.0  # seconds at most for three stored passes through the slow link on a loaded host


def test_a_round_longer_than_the_lease_keeps_its_leases_and_no_rival_takes_them(
    pg: EmbeddedPostgres, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:6]
    pg.psql(f"CREATE DATABASE far_{suffix};")
    pg.psql(f"CREATE DATABASE renewal_store_{suffix};")
    store = open_samples(pg.dsn(f"renewal_store_{suffix}"))
    lease = lease_for(EVERY)
    rival = LeaseBook(store.backend, "rival", SCOPE, lease)
    reports: list[RoundReport] = []
    won: list[str] = []
    halt = threading.Event()
    with slow_link("127.0.0.1", pg.port, DELAY) as port:
        url = f"postgresql://postgres@127.0.0.1:{port}/far_{suffix}"
        loop = ShareLoop(
            LeaseBook(store.backend, "a", SCOPE, lease),
            store,
            EVERY,
            inventory=lambda: ["far"],
            connect=lambda _name: parse_target(url),
            refresh=0.0,
        )
        watching = threading.Thread(
            target=loop.run,
            kwargs={"on_round": reports.append, "pause": lambda s: halt.wait(max(0.0, s))},
        )
        watching.start()
        try:
            wait_for(
                lambda: lease_holders(store.backend) == {"far": "a"},
                "the watcher's lease",
                WAIT,
                0.2,
            )

            def stored_three_or_lost() -> bool:
                claim = rival.claim("far")  # a second watcher, waiting for the lease to lapse
                if claim is not None:
                    won.append(claim.target)
                stored = [r for r in reports if any(o.stored for o in r.outcomes)]
                return bool(won) or len(stored) >= 3

            wait_for(stored_three_or_lost, "three stored passes (or the rival winning)", WAIT, 0.2)
            holders = lease_holders(store.backend)
        finally:
            halt.set()
            watching.join(timeout=120)
    slow = [r.took_seconds for r in reports if any(o.stored for o in r.outcomes)]
    print(f"rounds of {', '.join(f'{s:.1f}' for s in slow)} s, each over the lease of {lease}")
    assert won == [], f"the rival took the lease: the rounds took {slow} s, the lease {lease}"
    assert all(s > lease.total_seconds() for s in slow), (
        f"every round outlasted the lease ({lease}): {slow}"
    )
    assert holders == {"far": "a"}
    assert {t.holder for t in tenures(store.backend, "far")} == {"a"}
    assert not watching.is_alive() and lease_holders(store.backend) == {}, (
        "the stop released the lease"
    )


def test_a_dead_watchers_target_is_passed_again_within_two_intervals_by_construction(
    pg: EmbeddedPostgres,
) -> None:
    suffix = uuid.uuid4().hex[:6]
    pg.psql(f"CREATE DATABASE near_{suffix};")
    pg.psql(f"CREATE DATABASE takeover_store_{suffix};")
    store = open_samples(pg.dsn(f"takeover_store_{suffix}"))
    url = pg.dsn(f"near_{suffix}")

    def watcher(holder: str) -> ShareLoop:
        return ShareLoop(
            LeaseBook(store.backend, holder, SCOPE, lease_for(EVERY)),
            store,
            EVERY,
            inventory=lambda: ["near"],
            connect=lambda _name: parse_target(url),
            refresh=0.0,
        )

    dead, taker = watcher("dead"), watcher("taker")
    with ThreadPoolExecutor(max_workers=2) as pool:
        dead.tick(pool)  # its last renewal: it ticks no more, as if killed
        with store.backend.session() as session:
            ((left,),) = session.run(
                "SELECT extract(epoch FROM expires_at - now()) FROM watch_leases WHERE target = 'near'"
            )
        assert 0 < float(left) <= lease_for(EVERY).total_seconds(), (
            "on the store's clock, the lease ends at most a lease after the renewal"
        )

        def claimed() -> bool:
            taker.tick(pool)  # a tick: claims what is free, and reads what it claimed at once
            return taker.watcher.watching() == ["near"]

        try:
            wait_for(claimed, "the taker's claim once the lease expired", WAIT, 0.2)
            (outcome,) = taker.sample(pool).outcomes
        finally:
            for loop in (dead, taker):
                loop.watcher.drop({"near"})  # their sessions closed
    assert outcome.stored, "the round right after the claiming tick stores a pass"
    assert lease_holders(store.backend) == {"near": "taker"}
    # A lease, then at most a tick step to the taker's claim and a tick step to its next round, plus that round
    # tick's adoptions of what the claiming tick left (none when it took them all; the taken targets are read first
    # at that round, test_a_round_stores_the_targets_just_taken_first_in_a_transaction_of_their_own): two
    # intervals, for every interval whose half is at least the shortest lease.
    for every in (2 * MIN_LEASE, 15.0, 60.0, 3600.0):
        step = every / TICKS_PER_ROUND
        assert lease_for(every).total_seconds() == LEASE_SHARE * every
        assert lease_for(every).total_seconds() + 2 * step + ADOPTION_SHARE * every <= 2 * every


def test_a_lease_the_renewal_finds_lost_stops_that_targets_sampling(pg: EmbeddedPostgres) -> None:
    """Another holder has the lease in the store (as after a lapse, or a step of the store's clock): the renewal
    thread finds it lost, the target's sampling stops from then on, and the next tick drops its watch."""
    suffix = uuid.uuid4().hex[:6]
    pg.psql(f"CREATE DATABASE lost_{suffix};")
    pg.psql(f"CREATE DATABASE lost_store_{suffix};")
    store = open_samples(pg.dsn(f"lost_store_{suffix}"))
    url = pg.dsn(f"lost_{suffix}")
    loop = ShareLoop(
        LeaseBook(store.backend, "a", SCOPE, lease_for(EVERY)),
        store,
        EVERY,
        inventory=lambda: ["lost"],
        connect=lambda _name: parse_target(url),
        refresh=0.0,
    )
    reports: list[RoundReport] = []
    halt = threading.Event()
    watching = threading.Thread(
        target=loop.run,
        kwargs={"on_round": reports.append, "pause": lambda s: halt.wait(max(0.0, s))},
    )
    watching.start()
    try:
        wait_for(
            lambda: any(o.stored for r in reports for o in r.outcomes), "a stored pass", WAIT, 0.2
        )
        with store.backend.session() as session:
            session.run(
                "UPDATE watch_leases SET holder = 'thief', expires_at = now() + INTERVAL '1 hour'"
                " WHERE target = 'lost'"
            )
        wait_for(
            lambda: not loop.book.valid("lost"), "the renewal finding the lease lost", WAIT, 0.1
        )
        lost_at = datetime.now(UTC)  # no later than the moment the bound was dropped
        wait_for(lambda: loop.watcher.watching() == [], "the tick dropping the watch", WAIT, 0.2)
        rounds_after = len(reports)
        wait_for(lambda: len(reports) > rounds_after, "a round after", WAIT, 0.2)
    finally:
        halt.set()
        watching.join(timeout=120)
    stored = [r.at for r in reports for o in r.outcomes if o.stored]
    assert stored and all(at < lost_at for at in stored), (stored, lost_at)
    assert {t.holder for t in tenures(store.backend, "lost")} == {"a"}
    assert lease_holders(store.backend) == {"lost": "thief"}, (
        "its stop released nothing of the thief's"
    )


def test_a_round_stores_the_targets_just_taken_first_in_a_transaction_of_their_own(
    pg: EmbeddedPostgres,
) -> None:
    """A target taken at a tick (read once there) has its first pass stored before the round reads the targets the
    watcher already held: a takeover's first pass waits for its own readings, not for the whole round's. Both are
    in the round's report, each with its tenure."""
    suffix = uuid.uuid4().hex[:6]
    for name in ("held", "taken", "fresh_store"):
        pg.psql(f"CREATE DATABASE {name}_{suffix};")
    store = open_samples(pg.dsn(f"fresh_store_{suffix}"))
    names = ["held"]
    loop = ShareLoop(
        LeaseBook(store.backend, "a", SCOPE, lease_for(60.0)),
        store,
        60.0,
        inventory=lambda: list(names),
        connect=lambda name: parse_target(pg.dsn(f"{name}_{suffix}")),
        refresh=0.0,
    )
    with ThreadPoolExecutor(max_workers=2) as pool:
        try:
            loop.tick(pool)
            assert [o.stored for o in loop.sample(pool).outcomes] == [True]
            names.append("taken")
            loop.tick(pool)  # takes "taken" and reads it once
            report = loop.sample(pool)
        finally:
            loop.watcher.drop(set(loop.watcher.watching()))
    outcomes = {o.key: o for o in report.outcomes}
    assert sorted(outcomes) == ["held", "taken"] and all(o.stored for o in outcomes.values())
    at = {key: store.latest(o.identity, 0) for key, o in outcomes.items()}
    assert at["taken"] is not None and at["held"] is not None
    assert at["taken"] < at["held"], "the target just taken is stored before the rest of the round"
    assert {t.target for t in tenures(store.backend)} == {"held", "taken"}
