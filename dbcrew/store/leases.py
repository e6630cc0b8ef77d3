"""Leases on watched targets in the shared store: which watcher samples which target, and who is alive.

Watching is shared over the pool: every watcher (a worker's share loop, dbcrew/roles/sharing.py) samples
the targets it holds a lease on, so each target is sampled by exactly one watcher at a time. The
lease is a row of the store (a DuckDB file by default, PostgreSQL by URL: backends.py), taken and
renewed by one conditional statement, `UPDATE ... WHERE target = ? AND (expires_at < now() OR
holder = me)`: atomic on both backends (DuckDB admits one writing transaction per file at a time;
PostgreSQL re-checks the condition on the row a concurrent claim just changed), so two watchers
never both win one target.

Time is the store's: every expiry is written and compared with the store's own `now()`, so the
watchers' clocks may disagree by any amount. A holder's own view of its lease is local: it
counts the lease from the moment it sent the claim (before the store's `now()`), on its monotonic
clock, so it believes a lease over no later than the store does, and stops sampling and storing a
target once that bound passes (LeaseBook.valid). Only a jump of the store's clock shortens a lease
under its holder.

A holder's leases are renewed by a thread of their own (dbcrew/roles/sharing.py ShareLoop) while its rounds sample
and its ticks claim, so a LeaseBook is used from several threads: every change of the leases (the store's
row and the holder's bound together) is made under one lock, so a renewal never revives a bound a release
just dropped; `valid` and `held` read the bounds lock-free (each change replaces the whole mapping).

Each watcher also heartbeats in the store (`watch_holders`, same lease length): the live holders
of a scope (the targets watched at one interval) are those whose heartbeat has not expired, and
the fair share is ceil(targets / live holders). `watch_tenures` keeps who watched what when (the
first and last pass each holder stored of each target, per stint): the record that a target was
sampled by one watcher at a time, and who to ask about a gap.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from dbcrew.store.backends import Backend, Session, create_tables, utc

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS watch_leases (
        target TEXT PRIMARY KEY, scope TEXT NOT NULL, holder TEXT NOT NULL, expires_at TIMESTAMPTZ NOT NULL,
        taken_at TIMESTAMPTZ NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS watch_holders (
        holder TEXT PRIMARY KEY, scope TEXT NOT NULL, expires_at TIMESTAMPTZ NOT NULL, started_at TIMESTAMPTZ NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS watch_tenures (
        target TEXT NOT NULL, holder TEXT NOT NULL, started_at TIMESTAMPTZ NOT NULL, ended_at TIMESTAMPTZ NOT NULL,
        PRIMARY KEY (target, holder, started_at))""",
)
# The store's clock, `seconds` ahead: one spelling both backends accept, with the seconds a parameter.
LATER = "now() + ? * INTERVAL '1 second'"


@dataclass(frozen=True)
class Claim:
    """A lease this holder just took: from nobody, or from a holder whose lease had expired (it stopped renewing)."""

    target: str
    taken_from: str | None  # the holder whose expired lease this was; None: nobody held it


@dataclass(frozen=True)
class Tenure:
    """A stretch one holder watched one target: its first and last stored pass."""

    target: str
    holder: str
    started_at: datetime
    ended_at: datetime


class LeaseBook:
    """One holder's leases in one scope. Every method is one short transaction of the store; safe to call from
    several threads (a renewal beside a tick's claims and a round's checks)."""

    def __init__(self, backend: Backend, holder: str, scope: str, lease: timedelta):
        self.backend = backend
        self.holder = holder
        self.scope = scope
        self.lease = lease
        # target -> the monotonic time this holder's lease surely ends; replaced whole, never changed in place
        self._bounds: dict[str, float] = {}
        self._changing = threading.Lock()  # one change of the leases (store and bounds) at a time
        create_schema(backend)

    @property
    def seconds(self) -> float:
        return self.lease.total_seconds()

    def held(self) -> list[str]:
        """The targets this holder believes it holds (its local bound not passed), sorted."""
        now = time.monotonic()
        return sorted(t for t, bound in self._bounds.items() if bound > now)

    def taken(self) -> list[str]:
        """Every target this holder has claimed and not given up (its bound passed or not: the renewal thread
        renews them all), sorted."""
        return sorted(self._bounds)

    def valid(self, target: str) -> bool:
        """Whether this holder's lease on `target` is surely still its own (by its local, conservative bound)."""
        return self._bounds.get(target, 0.0) > time.monotonic()

    def heartbeat(self) -> int:
        """Say this holder is alive for one more lease; how many holders of the scope are alive (itself included)."""
        with self.backend.session() as session:
            session.run(
                f"INSERT INTO watch_holders VALUES (?, ?, {LATER}, now())"
                f" ON CONFLICT (holder) DO UPDATE SET scope = excluded.scope, expires_at = excluded.expires_at",
                [self.holder, self.scope, self.seconds],
            )
            session.run(  # holders gone for a day: their runs were judged long ago (dbcrew/flows/supervision.py)
                "DELETE FROM watch_holders WHERE expires_at < now() - INTERVAL '1 day'"
            )
            rows = session.run(
                "SELECT count(*) FROM watch_holders WHERE scope = ? AND expires_at > now()",
                [self.scope],
            )
        return int(rows[0][0])

    def renew(self, targets: Iterable[str]) -> list[str]:
        """Extend this holder's leases on `targets` (those still its own, or expired and taken by nobody since);
        the targets renewed. A lease another holder took in the meantime is lost."""
        with self._changing:
            return self._renew(sorted(set(targets)))

    def renew_all(self) -> list[str]:
        """`renew` every lease this holder has taken and not given up (its bound passed or not): the renewal
        thread's, which needs no other view of what is watched. The targets whose lease was lost, sorted."""
        with self._changing:
            had = self.taken()
            renewed = set(self._renew(had))
        return [t for t in had if t not in renewed]

    def _renew(self, wanted: list[str]) -> list[str]:
        if not wanted:
            return []
        sent = time.monotonic()
        with self.backend.session() as session:
            rows = session.run(
                f"UPDATE watch_leases SET expires_at = {LATER}, scope = ? WHERE holder = ?"
                f" AND target IN ({_marks(wanted)}) RETURNING target",
                [self.seconds, self.scope, self.holder, *wanted],
            )
        renewed = sorted(str(r[0]) for r in rows)
        asked = set(wanted)  # those not renewed are lost
        bounds = {t: b for t, b in self._bounds.items() if t not in asked}
        self._bounds = bounds | dict.fromkeys(renewed, sent + self.seconds)
        return renewed

    def claim(self, target: str) -> Claim | None:
        """Take the lease on `target` if nobody holds it (no lease, or an expired one); None when another holder has it."""
        return next(iter(self.claim_some([target], 1)), None)

    def claim_some(self, targets: Sequence[str], wanted: int) -> list[Claim]:
        """Take up to `wanted` of `targets`, in their order, each only if nobody holds it; in one transaction (a
        connection per claim made 500 claims take 7 s on a PostgreSQL store: longer than a 15 s lease allows for
        a thousand). Every lease taken is counted from before the transaction began."""
        claims: list[Claim] = []
        if wanted <= 0 or not targets:
            return claims
        with self._changing:
            self._claim_some(targets, wanted, claims)
        return claims

    def _claim_some(self, targets: Sequence[str], wanted: int, claims: list[Claim]) -> None:
        sent = time.monotonic()
        with self.backend.session() as session:
            for target in targets:
                if len(claims) >= wanted:
                    break
                session.run(
                    "INSERT INTO watch_leases VALUES (?, ?, '', now() - INTERVAL '1 second', now())"
                    " ON CONFLICT (target) DO NOTHING",
                    [target, self.scope],
                )
                before = session.run("SELECT holder FROM watch_leases WHERE target = ?", [target])
                rows = session.run(
                    f"UPDATE watch_leases SET holder = ?, scope = ?, expires_at = {LATER}, taken_at = now()"
                    " WHERE target = ? AND (expires_at < now() OR holder = ?) RETURNING target",
                    [self.holder, self.scope, self.seconds, target, self.holder],
                )
                if rows:
                    previous = str(before[0][0]) if before else ""
                    claims.append(
                        Claim(target, previous if previous not in ("", self.holder) else None)
                    )
        self._bounds = self._bounds | {c.target: sent + self.seconds for c in claims}

    def free(self, targets: Sequence[str]) -> list[str]:
        """Of `targets`, those no live holder has a lease on (none, or expired), sorted."""
        if not targets:
            return []
        with self.backend.session() as session:
            rows = session.run(
                f"SELECT target FROM watch_leases WHERE target IN ({_marks(targets)}) AND expires_at >= now()",
                list(targets),
            )
        taken = {str(r[0]) for r in rows}
        return sorted(t for t in set(targets) if t not in taken)

    def release(self, targets: Iterable[str]) -> None:
        """Give up the leases on `targets` now (a rebalance, a target dropped, a planned stop): another holder
        may take them at once, with no gap but the time it takes to."""
        let_go = sorted(set(targets))
        if not let_go:
            return
        with self._changing:
            dropped = set(let_go)
            self._bounds = {t: b for t, b in self._bounds.items() if t not in dropped}
            with self.backend.session() as session:
                _expire(session, self.holder, let_go)

    def leave(self) -> None:
        """A planned stop: every lease released, the heartbeat gone (the others count one holder less at once)."""
        with self._changing:
            held, self._bounds = sorted(self._bounds), {}
            with self.backend.session() as session:
                if held:
                    _expire(session, self.holder, held)
                session.run("DELETE FROM watch_holders WHERE holder = ?", [self.holder])

    def record_tenure(self, session: Session, targets: dict[str, datetime], at: datetime) -> None:
        """This holder stores passes of `targets` at `at`, in `session` (the passes' own transaction: a holder killed
        at any moment leaves no pass outside a tenure): each one's stint (started at its value) now ends at `at`."""
        for target, started in sorted(targets.items()):
            session.run(
                "INSERT INTO watch_tenures VALUES (?, ?, ?, ?)"
                " ON CONFLICT (target, holder, started_at) DO UPDATE SET ended_at = excluded.ended_at",
                [target, self.holder, started, at],
            )


def create_schema(backend: Backend) -> None:
    """The lease tables, created if missing (a reader may come before any watcher)."""
    create_tables(backend, SCHEMA)


def lease_holders(backend: Backend) -> dict[str, str]:
    """Every target with a lease not expired, and its holder."""
    with backend.session() as session:
        rows = session.run("SELECT target, holder FROM watch_leases WHERE expires_at >= now()")
    return {str(t): str(h) for t, h in rows}


def lapsed_holders(backend: Backend, grace: timedelta) -> set[str]:
    """Holders whose heartbeat expired more than `grace` ago without a planned stop (which removes it): watchers
    that died, or lost the store, on any machine."""
    with backend.session() as session:
        rows = session.run(
            "SELECT holder FROM watch_holders WHERE expires_at < now() - ? * INTERVAL '1 second'",
            [grace.total_seconds()],
        )
    return {str(r[0]) for r in rows}


def tenures(backend: Backend, target: str | None = None) -> list[Tenure]:
    """Who watched what when, oldest first (of one target, or of all)."""
    where, params = ("WHERE target = ?", [target]) if target else ("", [])
    with backend.session() as session:
        rows = session.run(
            f"SELECT target, holder, started_at, ended_at FROM watch_tenures {where} ORDER BY target, started_at",
            params,
        )
    return [Tenure(str(r[0]), str(r[1]), utc(r[2]), utc(r[3])) for r in rows]


def _expire(session: Session, holder: str, targets: Sequence[str]) -> None:
    """Leases given up: free now, and held by nobody (a claim of one is no takeover from a watcher that died)."""
    session.run(
        f"UPDATE watch_leases SET holder = '', expires_at = now() - INTERVAL '1 second' WHERE holder = ?"
        f" AND target IN ({_marks(targets)})",
        [holder, *targets],
    )


def _marks(values: Sequence[object]) -> str:
    return ", ".join("?" for _ in values)
