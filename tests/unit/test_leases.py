"""Leases on watched targets (dbcrew/store/leases.py) and the share planner (dbcrew/roles/sharing.py), on both store backends.

Two holders never hold one target, even claiming at once from threads; a holder that stops renewing loses its
leases once they expire, and never believes it still holds one the store gave away; shares are fair and bounded
by the cap; a holder that joins gets its share within two ticks of each; a target added or removed from the
inventory is claimed or released at the next tick.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.roles.sharing import (
    SessionBudget,
    ShareLoop,
    fair_share,
    plan_share,
)
from dbcrew.store import open_store
from dbcrew.store.backends import Backend
from dbcrew.store.leases import Claim, LeaseBook, lapsed_holders, lease_holders
from dbcrew.store.samples import SampleStore, StoredPass, WatchedTarget
from dbcrew.targets import PostgresTarget, parse_target

LEASE = timedelta(seconds=1)
EXPIRY_WAIT = (
    15.0  # seconds a test waits at most for a one-second lease to expire (a loaded host's pauses)
)


@pytest.fixture(params=["duckdb", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "duckdb":
        return open_store(str(tmp_path / "store.duckdb")).backend
    pg: EmbeddedPostgres = request.getfixturevalue("pg")
    name = f"leases_{uuid.uuid4().hex[:8]}"
    pg.psql(f"CREATE DATABASE {name};")
    return open_store(pg.dsn(name)).backend


def book(backend: Backend, holder: str, lease: timedelta = LEASE) -> LeaseBook:
    return LeaseBook(backend, holder, "every-1s", lease)


def test_a_target_held_by_one_holder_cannot_be_claimed_by_another(backend: Backend) -> None:
    a, b = book(backend, "a", timedelta(minutes=5)), book(backend, "b", timedelta(minutes=5))
    first = a.claim("t1")
    assert first is not None and first.taken_from is None
    assert b.claim("t1") is None and not b.valid("t1")
    assert a.claim("t1") is not None, "the holder's own claim renews it"
    assert b.free(["t1", "t2"]) == ["t2"]
    assert a.renew(["t1"]) == ["t1"] and b.renew(["t1"]) == []
    assert lease_holders(backend) == {"t1": "a"}


def test_holders_claiming_at_once_never_both_win_a_target(backend: Backend) -> None:
    targets = [f"t{i}" for i in range(12)]
    holders = [book(backend, f"h{i}", timedelta(minutes=5)) for i in range(3)]
    won: dict[str, list[str]] = {h.holder: [] for h in holders}
    start = threading.Barrier(len(holders))

    def claim_all(holder: LeaseBook) -> None:
        start.wait()
        for target in targets:
            if holder.claim(target) is not None:
                won[holder.holder].append(target)

    threads = [threading.Thread(target=claim_all, args=(h,)) for h in holders]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    claimed = [t for ts in won.values() for t in ts]
    assert sorted(claimed) == sorted(targets), "each target won exactly once"
    assert lease_holders(backend) == {t: h for h, ts in won.items() for t in ts}


def test_a_holder_that_stops_renewing_loses_its_leases_after_expiry_and_knows_it(
    backend: Backend,
) -> None:
    a, b = book(backend, "a"), book(backend, "b")
    # Claimed; not also asserted valid here: with a 1 s lease, a claim that takes a second on a loaded host (the
    # DuckDB store at load 40) is rightly past its own bound when it returns.
    assert a.claim("t1") is not None
    taken = None
    deadline = time.monotonic() + EXPIRY_WAIT
    while taken is None and time.monotonic() < deadline:
        taken = b.claim("t1")
        time.sleep(0.1)
    assert taken is not None and taken.taken_from == "a", "taken over from the holder that stopped"
    assert not a.valid("t1"), "the old holder's own bound passed no later than the store's expiry"
    assert a.renew(["t1"]) == [] and not a.valid("t1"), "a lease another holder took is lost"


def test_a_released_lease_is_free_at_once_and_no_takeover(backend: Backend) -> None:
    a, b = book(backend, "a", timedelta(minutes=5)), book(backend, "b", timedelta(minutes=5))
    a.claim("t1")
    a.release(["t1"])
    assert not a.valid("t1")
    claim = b.claim("t1")
    assert claim is not None and claim.taken_from is None, "given up, not lost: no gap to store"


def test_renewing_all_keeps_what_is_held_never_what_was_released_and_says_what_was_lost(
    backend: Backend,
) -> None:
    """The renewal thread's call (dbcrew/roles/sharing.py): it renews every lease taken and not given up, so a target
    released by a tick is not revived by it, and a lease another holder took is reported lost and no longer valid."""
    a, b = book(backend, "a"), book(backend, "b")
    assert a.claim("kept") is not None and a.claim("given up") is not None
    a.release(["given up"])
    assert a.renew_all() == [] and a.held() == ["kept"]
    assert lease_holders(backend) == {"kept": "a"}, "the released lease stays free"
    taken = None
    deadline = time.monotonic() + EXPIRY_WAIT
    while taken is None and time.monotonic() < deadline:  # a stops renewing until b takes it
        taken = b.claim("kept")
        time.sleep(0.1)
    assert taken is not None and taken.taken_from == "a"
    assert a.renew_all() == ["kept"] and not a.valid("kept") and a.held() == []
    assert lease_holders(backend) == {"kept": "b"}


def test_live_holders_are_those_whose_heartbeat_has_not_expired(backend: Backend) -> None:
    a, b = book(backend, "a", timedelta(minutes=5)), book(backend, "b")
    assert a.heartbeat() == 1 and b.heartbeat() == 2
    deadline = time.monotonic() + EXPIRY_WAIT
    while a.heartbeat() != 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert a.heartbeat() == 1, "b's heartbeat expired"
    a.leave()
    assert b.heartbeat() == 1, "a planned stop removes the heartbeat at once"


def test_fair_share_is_the_ceiling_of_targets_over_live_holders_within_the_cap() -> None:
    assert [fair_share(10, live, 100) for live in (1, 2, 3, 4)] == [10, 5, 4, 3]
    assert fair_share(10, 0, 100) == 10 and fair_share(10, 1, 4) == 4 and fair_share(0, 3, 4) == 0


def test_the_plan_keeps_its_share_and_releases_the_excess_and_what_left_the_inventory() -> None:
    watched = [f"t{i}" for i in range(6)]
    plan = plan_share(watched, [*watched, "gone"], live=2, cap=100, holder="a")
    assert plan.share == 3 and len(plan.keep) == 3 and plan.claim == 0
    assert sorted([*plan.keep, *plan.release]) == sorted([*watched, "gone"])
    assert "gone" in plan.release
    assert plan_share(watched, plan.keep, live=2, cap=100, holder="a").keep == plan.keep, "stable"
    other = plan_share(watched, [], live=2, cap=100, holder="b")
    assert other.claim == 3 and other.keep == []
    capped = plan_share(watched, [], live=1, cap=2, holder="a")
    assert capped.share == 2 and capped.claim == 2


def _loop(
    backend: Backend, holder: str, names: list[str], cap: int = 100, every: float = 1.0
) -> ShareLoop:
    def connect(name: str) -> PostgresTarget:
        return parse_target(f"postgresql://watcher@127.0.0.1:1/{name}")  # never sampled here

    return ShareLoop(
        LeaseBook(backend, holder, "every-1s", timedelta(seconds=every)),
        SampleStore(backend),
        every=every,
        inventory=lambda: list(names),
        connect=connect,
        cap=cap,
        refresh=0.0,
    )


def _held(*loops: ShareLoop) -> list[set[str]]:
    return [set(loop.watcher.watching()) for loop in loops]


def test_a_holder_that_joins_gets_its_share_within_two_ticks(backend: Backend) -> None:
    names = [f"t{i}" for i in range(7)]
    a = _loop(backend, "a", names, every=60.0)
    a.tick()
    assert _held(a) == [set(names)], "alone, it holds every target"
    b = _loop(backend, "b", names, every=60.0)
    for _ in range(2):
        b.tick()
        a.tick()
    held_a, held_b = _held(a, b)
    assert held_a | held_b == set(names) and not held_a & held_b
    assert sorted([len(held_a), len(held_b)]) == [3, 4], "ceil(7 / 2) each at most"
    assert set(lease_holders(backend)) == set(names)


def test_a_dead_holders_share_is_taken_over_once_its_leases_expire(backend: Backend) -> None:
    names = [f"t{i}" for i in range(4)]
    # Leases of 5 s: the ticks that share the targets out must not outlast one on a loaded host.
    a, b = _loop(backend, "a", names, every=5.0), _loop(backend, "b", names, every=5.0)
    for _ in range(2):
        a.tick()
        b.tick()
        a.tick()
    held_a, held_b = _held(a, b)
    assert len(held_a) == len(held_b) == 2
    deadline = time.monotonic() + 3 * EXPIRY_WAIT  # b died: it ticks no more
    while _held(a)[0] != set(names) and time.monotonic() < deadline:
        time.sleep(0.2)
        a.tick()
    assert _held(a)[0] == set(names)
    taken = {w.key: w.unwatched_reason for w in a.watcher.watched if w.key in held_b}
    assert set(taken) == held_b and all("b stopped renewing its lease" in r for r in taken.values())


def test_targets_added_or_removed_are_claimed_or_released_at_the_next_tick(
    backend: Backend,
) -> None:
    names = ["t1", "t2"]
    a = _loop(backend, "a", names, every=60.0)
    a.tick()
    names[:] = ["t2", "t3"]
    a.tick()
    assert _held(a) == [{"t2", "t3"}]
    assert set(lease_holders(backend)) == {"t2", "t3"}, "the dropped target's lease released"


def test_the_cap_bounds_a_holders_sessions_and_the_shortfall_is_said(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    a = _loop(backend, "a", [f"t{i}" for i in range(5)], cap=3, every=60.0)
    with caplog.at_level("WARNING", logger="dbcrew.roles.sharing"):
        a.tick()
    assert len(_held(a)[0]) == 3
    assert "2 of 5 targets cannot be watched" in caplog.text


def test_a_holder_gone_without_a_planned_stop_is_lapsed_one_that_left_is_not(
    backend: Backend,
) -> None:
    a, b = book(backend, "a"), book(backend, "b")
    a.heartbeat()
    b.heartbeat()
    b.leave()
    deadline = time.monotonic() + EXPIRY_WAIT
    while not lapsed_holders(backend, timedelta(0)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert lapsed_holders(backend, timedelta(0)) == {"a"}, "b left as planned: nothing to judge"
    assert lapsed_holders(backend, timedelta(hours=1)) == set(), "within the grace, not yet"


def test_a_watcher_holds_one_session_per_target(backend: Backend) -> None:
    loop = _loop(backend, "a", ["t1"], every=60.0)
    loop.tick()
    loop.watcher.adopt("t1", parse_target("postgresql://watcher@127.0.0.1:1/t1"))
    assert [w.key for w in loop.watcher.watched] == ["t1"], (
        "adopting a held target again adds nothing"
    )


def test_a_workers_loops_share_one_cap_of_sessions(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    """Two watching intervals on one worker: their loops hold at most the worker's cap between them, and the
    targets the cap leaves unwatched are said (no other watcher takes more than its share)."""
    budget = SessionBudget(4)
    loops = [
        ShareLoop(
            LeaseBook(backend, f"w/{scope}", scope, timedelta(minutes=1)),
            SampleStore(backend),
            every=60.0,
            inventory=lambda scope=scope: [f"{scope}-t{i}" for i in range(3)],
            connect=lambda name: parse_target(f"postgresql://watcher@127.0.0.1:1/{name}"),
            cap=100,
            refresh=0.0,
            budget=budget,
        )
        for scope in ("every-1s", "every-15s")
    ]
    with caplog.at_level("WARNING", logger="dbcrew.roles.sharing"):
        for loop in loops:
            loop.tick()
    held = [len(loop.watcher.watching()) for loop in loops]
    assert held == [3, 1], "the first took its three, the second what the cap left"
    said = [r.getMessage() for r in caplog.records if "cannot be watched" in r.getMessage()]
    assert said == [
        "watch share: 2 of 3 targets cannot be watched: this worker's sessions"
        " (DBCREW_WATCH_SESSIONS) are held by its other watching intervals"
    ], said


def test_a_taker_reads_what_the_store_knows_of_its_targets_at_once(backend: Backend) -> None:
    """The identity and latest pass of each target taken over (the gap starts there); none for one never watched."""
    store = SampleStore(backend)
    at = datetime(2026, 11, 28, 9, 0, tzinfo=UTC)
    store.record(
        [StoredPass(target="sys1/db", at=at, seconds=1.0, body="{}")],
        targets=[WatchedTarget(target="sys1/db", display="pg://a/db", facts="{}", updated_at=at)],
    )
    assert store.last_watched(["pg://a/db", "pg://b/db"]) == {"pg://a/db": ("sys1/db", at)}


def test_a_tick_takes_a_dead_holders_whole_share_when_it_has_the_time(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dead holder's 100 targets, over 64 (what a tick once claimed before it had timed any adoption) and over
    any count predicted from earlier adoptions: taken in one tick, each with the dead holder's name for its gap, in
    two claims (one wave of 8 timed, then the 92 the time left holds), not one a wave.
    Intervals of an hour give the tick a quarter hour to adopt; leases of 10 s let the dead holder's lapse (and
    keep it alive through the first tick on a loaded host)."""
    names = [f"t{i:03d}" for i in range(200)]
    lease = timedelta(seconds=10)
    dead = LeaseBook(backend, "dead", "every-3600s", lease)
    dead.heartbeat()
    assert len(dead.claim_some(names[:100], 100)) == 100
    a = ShareLoop(
        LeaseBook(backend, "a", "every-3600s", lease),
        SampleStore(backend),
        every=3600.0,
        inventory=lambda: names,
        connect=lambda name: parse_target(f"postgresql://watcher@127.0.0.1:1/{name}"),
        refresh=0.0,
    )
    a.tick()  # two live holders: a takes the other half, all of it at once
    assert _held(a) == [set(names[100:])]
    deadline = time.monotonic() + EXPIRY_WAIT
    while (
        a.book.heartbeat() > 1 and time.monotonic() < deadline
    ):  # the dead holder's heartbeat lapses
        time.sleep(0.2)
    claimed: list[int] = []
    claim_some = a.book.claim_some

    def counted(targets: Sequence[str], wanted: int) -> list[Claim]:
        claimed.append(wanted)
        return claim_some(targets, wanted)

    monkeypatch.setattr(a.book, "claim_some", counted)
    a.tick()
    assert _held(a) == [set(names)], "the dead holder's 100 targets in one tick"
    assert claimed == [8, 92]
    taken = {w.key: w.unwatched_reason for w in a.watcher.watched if w.key in names[:100]}
    assert all("dead stopped renewing its lease" in r for r in taken.values())


def test_a_tick_out_of_time_takes_one_wave_and_keeps_no_lease_it_does_not_watch(
    backend: Backend,
) -> None:
    """A tick whose adoption time is spent before it begins still takes one wave (`concurrency` targets); the other
    targets stay free (no lease held without a watch: a holder with room may take them), and the next ticks take
    them a wave each, those of a dead holder still named as taken from it."""
    names = [f"t{i:02d}" for i in range(20)]
    dead = LeaseBook(backend, "dead", "every-1s", LEASE)
    assert len(dead.claim_some(names, 20)) == 20
    a = _loop(backend, "a", names, every=60.0)
    assert a.watcher.concurrency == 8
    deadline = time.monotonic() + EXPIRY_WAIT
    while not a.book.free(names) and time.monotonic() < deadline:  # the dead holder's leases lapse
        time.sleep(0.2)
    for held in (8, 16, 20):
        a.tick(until=time.monotonic())  # no time left: one wave
        assert len(_held(a)[0]) == held
        assert sorted(h for h, who in lease_holders(backend).items() if who == "a") == sorted(
            _held(a)[0]
        ), "a lease is taken only to be adopted at once"
        assert a.book.taken() == sorted(_held(a)[0])
    reasons = [w.unwatched_reason for w in a.watcher.watched]
    assert len(reasons) == 20 and all("dead stopped renewing its lease" in r for r in reasons)


def test_a_tick_between_rounds_adopts_until_the_round_and_never_costs_it_its_round(
    backend: Backend,
) -> None:
    """A tick between rounds may adopt until the next round is due (the loop would only wait for it), and when its
    last wave runs past that, the round follows late rather than being skipped; a round tick adopts for a
    quarter interval."""
    a = _loop(backend, "a", ["t1"], every=60.0)
    now = time.monotonic()
    started = now - 30.0  # the loop's tick 1 is due now; its next round (tick 2) in 30 s
    assert a.adoption_end(started, 1) >= started + 60.0
    assert now + 15.0 <= a.adoption_end(started, 2) <= time.monotonic() + 15.0
    assert ShareLoop._next_tick(1, 5) == 2, "tick 1 ran past the round's time: the round, late"
    assert ShareLoop._next_tick(1, 2) == 2 and ShareLoop._next_tick(3, 9) == 4
    assert ShareLoop._next_tick(0, 3) == 3, "a round that overran skips the ticks it missed"


def test_a_store_failing_at_retention_is_a_warning_and_the_share_goes_on(
    pg: EmbeddedPostgres, caplog: pytest.LogCaptureFixture
) -> None:
    """The store is cut off after a round (its database refuses connections, its sessions ended), so the retention
    that follows fails: a warning, as a round's failure is, and the loop goes on to its next pause; before, that one
    failure ended the whole share, dropping every session and lease."""
    name = f"leases_{uuid.uuid4().hex[:8]}"
    pg.psql(f"CREATE DATABASE {name};")
    backend = open_store(pg.dsn(name)).backend
    loop = ShareLoop(
        LeaseBook(backend, "a", "every-1s", LEASE),
        SampleStore(backend),
        every=1.0,
        inventory=lambda: ["t"],
        connect=lambda _name: parse_target(pg.dsn()),
        refresh=0.0,
    )

    def cut_off(_report: object) -> None:
        pg.psql(
            f"ALTER DATABASE {name} ALLOW_CONNECTIONS false;"
            f" SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}';"
        )

    pauses: list[float] = []
    try:
        with caplog.at_level("WARNING", logger="dbcrew.roles.sharing"):
            loop.run(on_round=cut_off, pause=lambda wait: pauses.append(wait) is None)
    finally:
        pg.psql(f"ALTER DATABASE {name} ALLOW_CONNECTIONS true;")
    assert "watch share: retention could not run" in caplog.text, caplog.text
    assert len(pauses) == 1, "the loop reached its pause after the failed retention"
