"""Retention takes the watcher loop's spare time, never its next round (Watcher.maintain with `until`).

A worker holding 500 targets spent about 13 s of a minute on retention on the loop's own thread; the share
loop counted its next tick after it, so a round plus its maintenance past the next round's slot skipped it."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dbcrew.roles import watching
from dbcrew.roles.watching import MAINTENANCE_EVERY, Watcher
from dbcrew.store.samples import SampleStore, open_samples
from dbcrew.targets import parse_target


@pytest.fixture()
def maintained(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The identities retention ran for, in order (the real retention runs too)."""
    seen: list[str] = []
    real = watching.apply_retention

    def recorded(store: SampleStore, identity: str, now: datetime) -> None:
        seen.append(identity)
        real(store, identity, now)

    monkeypatch.setattr(watching, "apply_retention", recorded)
    return seen


def watcher(tmp_path: Path, n: int) -> Watcher:
    targets = [parse_target(f"postgresql://watcher@127.0.0.1:1/db{i}") for i in range(n)]
    return Watcher(targets, open_samples(str(tmp_path / "store.duckdb")), every=60.0)


def test_a_deadline_stops_maintenance_after_one_target_and_the_next_call_goes_on(
    tmp_path: Path, maintained: list[str]
) -> None:
    w = watcher(tmp_path, 4)
    identities = [x.identity for x in w.watched]
    now = datetime.now(UTC)
    for expected in range(1, 5):
        w.maintain(
            now, until=time.monotonic()
        )  # the next round is due already: one target, then back
        assert maintained == identities[:expected]
    w.maintain(now)  # the cycle is over and the next is not due before MAINTENANCE_EVERY
    assert maintained == identities


def test_without_a_deadline_a_cycle_covers_every_target_once_per_period(
    tmp_path: Path, maintained: list[str]
) -> None:
    w = watcher(tmp_path, 3)
    now = datetime.now(UTC)
    w.maintain(now, until=time.monotonic() + 3600)
    assert sorted(maintained) == sorted(x.identity for x in w.watched)
    w.maintain(now, until=time.monotonic() + 3600)
    assert len(maintained) == 3  # not again within MAINTENANCE_EVERY
    w._maintained -= MAINTENANCE_EVERY  # a period later
    w.maintain(now)
    assert len(maintained) == 6
