"""The detection bench's healthy day: every pass replayed is a recorded one at the level the day's schedule wants there,
the nightly batch only where the schedule has it; and its bytes per target-day read from a real store after the
watcher's retention policy downsampled the day."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from datetime import timedelta
from pathlib import Path

from bench.detection import (
    BATCH_AT,
    BATCH_PASSES,
    DAY,
    LEVEL_PASSES,
    DayPlan,
    Recording,
    day_bytes,
    replay,
    schedule,
    view_line,
)
from dbcrew.operators.window.incidents import Z_OPEN, Detector
from dbcrew.operators.window.passes import PassBody, as_stored
from dbcrew.store.samples import StoredPass


def recorded(plan: DayPlan) -> list[StoredPass]:
    """One pass per planned one, its load written in its body (as if the target had done exactly that)."""
    return [
        StoredPass(
            target="t",
            at=DAY,
            seconds=1.0,
            body=as_stored(PassBody(rates={"level": float(lv), "batch": float(batch), "i": i})),
        )
        for i, (lv, batch) in enumerate(plan.load)
    ]


def loads(passes: list[StoredPass]) -> list[tuple[int, bool]]:
    rates = [json.loads(p.body)["rates"] for p in passes]
    return [(int(r["level"]), bool(r.get("batch", 0.0))) for r in rates]


def test_a_day_longer_than_the_recorded_hours_replays_recorded_blocks_at_their_level_and_the_batch_once() -> (
    None
):
    plan = DayPlan.of(hours=24, recorded_hours=3)
    assert plan.real == 720 and len(plan.load) == 720 + LEVEL_PASSES, (
        "three hours in place, and one block of the level only the batch's block held"
    )
    day = plan.compose(recorded(plan))
    assert len(day.passes) == plan.n == 24 * 240
    assert loads(day.passes) == schedule(plan.n), (
        "every pass was recorded at the level the day has there, with the batch exactly where the day has it"
    )
    assert day.sources[: plan.real] == list(range(plan.real)), "the recorded hours in place"
    assert [json.loads(p.body)["rates"].get("i", 0) for p in day.passes] == day.sources
    assert day.distinct() == len(plan.load), "every recorded pass is replayed"
    uses = Counter(day.sources)
    assert all(uses[i] == 1 for i in range(BATCH_AT, BATCH_AT + BATCH_PASSES)), (
        "the batch's passes once, where the day has them"
    )
    drawn: dict[int, list[int]] = {}
    for start in range(plan.real, plan.n, LEVEL_PASSES):
        drawn.setdefault(loads(day.passes)[start][0], []).append(day.sources[start])
    for lv, blocks in drawn.items():
        if len(set(blocks)) > 1:
            assert all(a != b for a, b in itertools.pairwise(blocks)), (lv, blocks)
    assert {lv for lv, blocks in drawn.items() if len(set(blocks)) > 1} == {3, 4, 5}, (
        "a level recorded in several blocks is drawn from several (2 and 6: one block each)"
    )


def test_a_day_within_the_recorded_hours_is_replayed_as_recorded() -> None:
    plan = DayPlan.of(hours=1.5, recorded_hours=3)
    day = plan.compose(recorded(plan))
    assert plan.real == plan.n == 360 and day.composed() == 0 and day.extra == 0
    assert day.sources == list(range(360)) and loads(day.passes) == schedule(360)


def test_the_bytes_per_target_day_are_read_from_the_downsampled_store(tmp_path: Path) -> None:
    body = as_stored(
        PassBody(rates={"db.xact_commit": 100.0, "act.active": 1.0}, session_samples=15)
    )
    passes = [StoredPass(target="t", at=DAY, seconds=1.0, body=body) for _ in range(2 * 240)]
    line = day_bytes(passes, tmp_path / "day.duckdb")
    assert "480 raw, 120 minute, 2 hour rows" in line, line
    assert f"{len(body)} B a raw pass" in line, line


def test_a_replayed_incident_comes_with_the_detectors_view_of_the_passes_that_opened_it() -> None:
    commits = [1000.0 + 40.0 * (i % 5) for i in range(30)] + [9000.0, 9500.0] + [1000.0] * 5
    passes = [
        StoredPass(
            target="t",
            at=DAY,
            seconds=15.0,
            body=as_stored(PassBody(rates={"db.xact_commit": c, "act.active": 1.0})),
        )
        for c in commits
    ]
    (opening,) = replay(Detector("t"), passes)
    assert [at for at, _judged in opening.views] == [
        DAY + timedelta(seconds=15 * 31),
        DAY + timedelta(seconds=15 * 32),
    ], "the two abnormal passes that opened it"
    at, judged = opening.views[-1]
    assert judged["db.xact_commit"].value == 9500.0 and judged["db.xact_commit"].score >= Z_OPEN
    line = view_line(at, judged)
    assert line.startswith("01:08:00: db.xact_commit 9500 (median 1080, z "), line


def test_a_level_is_recorded_apart_only_when_the_composed_part_of_the_day_needs_it() -> None:
    short = DayPlan.of(hours=4, recorded_hours=1.25)
    assert short.real == 300 and len(short.load) == 300, "blocks 5-15 are of levels blocks 0-3 hold"
    assert loads(short.compose(recorded(short)).passes) == schedule(short.n)
    longer = DayPlan.of(hours=5, recorded_hours=1.25)
    assert short.load == longer.load[:300] and longer.load[300:] == [(6, False)] * LEVEL_PASSES, (
        "block 16 is at level 6, which only the batch's block held"
    )
    assert loads(longer.compose(recorded(longer)).passes) == schedule(longer.n)


def test_a_kept_recording_reads_back_the_same_passes(tmp_path: Path) -> None:
    plan = DayPlan.of(hours=1.5, recorded_hours=3)
    kept = Recording(nights=[recorded(plan)[:48], recorded(plan)[48:96]], today=recorded(plan))
    kept.save(tmp_path / "kept")
    assert Recording.load(tmp_path / "kept") == kept
