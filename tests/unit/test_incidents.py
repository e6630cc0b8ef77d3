"""The incident detector on passes of known values: noise and one stray pass are no incident, two abnormal passes open
one, three calm ones close it, and an incident's passes never become the target's normal. With the same hour of earlier
days known (minute buckets, as the store keeps them), work that recurs at that hour on enough days is no incident, and
anything else still is."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dbcrew.operators.window.incidents import (
    CLOSE_AFTER,
    MIN_HISTORY,
    OPEN_AFTER,
    SAME_HOUR_MIN_DAYS,
    Detector,
    Minute,
    Minutes,
    Recall,
)
from dbcrew.operators.window.passes import PassBody, merge
from dbcrew.store.incident_diagnoses import IncidentCause, IncidentDiagnosis
from dbcrew.store.samples import Incident

T0 = datetime(2026, 11, 25, 3, 0, tzinfo=UTC)
EVERY = 15.0


def feed(detector: Detector, values: list[float], start: int = 0) -> list[tuple[int, bool]]:
    """Pass i has `db.xact_commit` = values[i]; the (pass, closed) of each incident update it returned."""
    updates = []
    for i, commits in enumerate(values, start=start):
        found = detector.observe(
            T0 + timedelta(seconds=EVERY * (i + 1)),
            EVERY,
            {"db.xact_commit": commits, "act.active": 1.0},
        )
        if found is not None:
            updates.append((i, found.closed))
    return updates


def normal(n: int) -> list[float]:
    return [1000.0 + 40.0 * ((i * 7) % 5 - 2) for i in range(n)]  # 920..1080 commits a second


def test_noise_and_one_stray_pass_are_no_incident() -> None:
    detector = Detector("t")
    assert feed(detector, [*normal(20), 5000.0, *normal(20)]) == []
    assert detector.incident is None


def test_two_abnormal_passes_open_an_incident_and_three_calm_ones_close_it() -> None:
    detector = Detector("t")
    quiet = normal(20)
    assert OPEN_AFTER == 2 and CLOSE_AFTER == 3 and len(quiet) >= MIN_HISTORY
    updates = feed(detector, [*quiet, 5000.0, 5200.0, 4800.0, *normal(CLOSE_AFTER)])
    assert updates == [(21, False), (22, False), (25, True)]
    assert max(h["db.xact_commit"] for h in detector.history) < 2000, (
        "the incident's passes stayed out of what is normal"
    )


def test_a_rising_pass_before_an_abnormal_one_is_the_incidents_first() -> None:
    """An anomaly that starts mid-pass makes that pass only partly abnormal: it opens the incident with the next
    pass (within two intervals of the start), as long as it rose the same way; alone it is noise, and normal."""
    quiet = normal(20)
    rising = Detector("t")
    assert feed(rising, [*quiet, 1200.0, 5000.0, 5200.0, *normal(CLOSE_AFTER)]) == [
        (21, False),
        (22, False),
        (25, True),
    ]
    assert rising.incident is None
    starts = Detector("t")
    feed(starts, [*quiet, 1200.0, 5000.0])
    assert starts.incident is not None
    assert starts.incident.started_at == T0 + timedelta(seconds=EVERY * 20), "from the rising pass"

    other_way = Detector("t")
    assert feed(other_way, [*quiet, 800.0, 5000.0, 5200.0])[0] == (22, False), (
        "a pass that fell does not announce a rise"
    )
    lone = Detector("t")
    assert feed(lone, [*quiet, 1200.0, *normal(5)]) == []
    assert 1200.0 in [h["db.xact_commit"] for h in lone.history], (
        "a lone rising pass is normal after all"
    )


def test_the_incident_names_its_signals_with_the_usual_level_and_the_peak() -> None:
    detector = Detector("t")
    feed(detector, [*normal(20), 5000.0, 5200.0])
    incident = detector.incident
    assert incident is not None and not incident.closed
    assert incident.started_at == T0 + timedelta(seconds=EVERY * 20), (
        "from the start of its first abnormal pass"
    )
    (signal,) = incident.signals
    assert (
        signal.name == "db.xact_commit"
        and signal.peak == 5200.0
        and 900 < signal.baseline_median < 1100
        and signal.z > 4
    )


NIGHT = datetime(
    2026, 11, 25, 1, 45, tzinfo=UTC
)  # today's passes start here; the batch runs 02:00-02:10
BATCH = 5000.0  # the nightly batch's commits a second


def batch_at(moment: datetime) -> bool:
    return moment.hour == 2 and moment.minute < 10


def earlier_days(days: list[int]) -> Minutes:
    """Minute buckets of 01:30-02:30 on each of `days` days back, with the batch in them."""
    minutes = []
    for back in days:
        start = NIGHT.replace(minute=30) - timedelta(days=back)
        for m in range(1, 61):
            ended = start + timedelta(minutes=m)
            commits = BATCH + 100.0 * (m % 3 - 1) if batch_at(ended) else 1000.0 + 10.0 * (m % 3)
            rates = {"db.xact_commit": commits, "act.active": 1.0}
            minutes.append(Minute(ended, rates, rates))
    return sorted(minutes)


def recall_of(minutes: Minutes) -> Recall:
    def recall(after: datetime, until: datetime) -> Minutes:
        return [m for m in minutes if after < m.ended <= until]

    return recall


def tonight(
    detector: Detector, during: dict[str, float] | None = None
) -> list[tuple[datetime, Incident]]:
    """15 minutes of normal passes, the batch (10 minutes), then 10 normal minutes; `during` added to the batch's
    passes. Each incident update with the end of the pass that made it."""
    updates = []
    for i in range(140):
        ended = NIGHT + timedelta(seconds=EVERY * (i + 1))
        rates = {"db.xact_commit": normal(i + 1)[-1], "act.active": 1.0}
        if batch_at(ended - timedelta(seconds=EVERY / 2)):
            rates = {**rates, "db.xact_commit": BATCH + 150.0 * (i % 3 - 1), **(during or {})}
        found = detector.observe(ended, EVERY, rates)
        if found is not None:
            updates.append((ended, found.model_copy(deep=True)))
    return updates


def test_a_nightly_batch_seen_at_that_hour_on_earlier_days_is_no_incident() -> None:
    assert tonight(Detector("t", recall=recall_of(earlier_days([1, 2, 3])))) == [], (
        "the batch ran at this hour on three earlier days: the hour's normal"
    )
    ((opened, incident), *_rest) = tonight(Detector("t"))
    assert (
        batch_at(opened - timedelta(seconds=EVERY)) and incident.signals[0].name == "db.xact_commit"
    ), "the last hour alone calls the same batch an incident"


def test_a_batch_seen_on_fewer_earlier_days_than_needed_is_still_an_incident() -> None:
    assert SAME_HOUR_MIN_DAYS == 3
    seen_twice = [
        m
        if m.ended > NIGHT - timedelta(days=2, hours=1)
        else Minute(m.ended, *2 * [{**m.low, "db.xact_commit": 1000.0}])
        for m in earlier_days([1, 2, 3, 4, 5])
    ]
    assert tonight(Detector("t", recall=recall_of(seen_twice))), (
        "a level reached on two days of five is not recurring work: one past anomaly never hides the next"
    )


def test_an_anomaly_unlike_the_same_hour_still_opens_an_incident() -> None:
    days = recall_of(earlier_days([1, 2, 3]))
    ((opened, _incident), *_rest) = tonight(
        Detector("t", recall=days), {"db.xact_commit": 4 * BATCH}
    )
    assert batch_at(opened - timedelta(seconds=EVERY)), (
        "four times the batch's commits: an incident"
    )
    updates = tonight(Detector("t", recall=days), {"act.wait_lock": 6.0})
    assert updates and batch_at(updates[0][0] - timedelta(seconds=EVERY))
    closed = updates[-1][1]
    assert closed.closed, "over once the batch (and its lock waits) ended"
    assert [s.name for s in closed.signals] == ["act.wait_lock"], (
        "the batch's commits are the hour's normal; only the lock waits are abnormal"
    )


def swinging(i: int) -> float:
    """A bursty batch's commits in pass i: two passes 30 % over BATCH, then two 30 % under, so each minute's four
    passes (15 s apart, aligned on the minute) have BATCH as their mean."""
    return BATCH * (1.3 if i % 4 < 2 else 0.7)


def swinging_days(days: list[int], extremes: bool) -> Minutes:
    """The minute buckets of 01:30-02:30 on each of `days` days back, merged from passes of the swinging batch as the
    watcher's downsampling merges them; with `extremes`, each signal's lowest and highest pass as the bucket keeps
    them, else the minute's means alone (as buckets were before they kept them)."""
    minutes = []
    for back in days:
        start = NIGHT.replace(minute=30) - timedelta(days=back)
        for m in range(60):
            ended = start + timedelta(minutes=m + 1)
            passes = []
            for k in range(4):
                i = 4 * m + k
                mid = start + timedelta(seconds=EVERY * (i + 0.5))
                commits = swinging(i) if batch_at(mid) else normal(i + 1)[-1]
                passes.append(
                    (EVERY, PassBody(rates={"db.xact_commit": commits, "act.active": 1.0}))
                )
            body = merge(passes)
            if extremes:
                low = {n: body.lowest(n) for n in body.rates}
                high = {n: body.highest(n) for n in body.rates}
                minutes.append(Minute(ended, low, high))
            else:
                minutes.append(Minute(ended, body.rates, body.rates))
    return sorted(minutes)


def swinging_tonight(detector: Detector, times: float = 1.0) -> list[tuple[datetime, Incident]]:
    """15 normal minutes, the swinging batch for 10 (its commits times `times`), 10 normal minutes."""
    updates = []
    for i in range(140):
        ended = NIGHT + timedelta(seconds=EVERY * (i + 1))
        commits = normal(i + 1)[-1]
        if batch_at(ended - timedelta(seconds=EVERY / 2)):
            commits = times * swinging(i)
        found = detector.observe(ended, EVERY, {"db.xact_commit": commits, "act.active": 1.0})
        if found is not None:
            updates.append((ended, found.model_copy(deep=True)))
    return updates


def test_a_bursty_batch_is_judged_against_the_passes_of_earlier_nights_not_their_minute_means() -> (
    None
):
    kept = recall_of(swinging_days([1, 2, 3], extremes=True))
    assert swinging_tonight(Detector("t", recall=kept)) == [], (
        "tonight's passes swing as the earlier nights' passes did: the hour's normal"
    )
    means = recall_of(swinging_days([1, 2, 3], extremes=False))
    ((opened, incident), *_rest) = swinging_tonight(Detector("t", recall=means))
    assert (
        batch_at(opened - timedelta(seconds=EVERY)) and incident.signals[0].name == "db.xact_commit"
    ), (
        "against the minutes' means, two passes 30 % over them are abnormal: why the buckets keep their passes' range"
    )
    ((opened, _incident), *_rest) = swinging_tonight(Detector("t", recall=kept), times=3.0)
    assert batch_at(opened - timedelta(seconds=EVERY)), (
        "three times the batch's work is past the highest pass of every earlier night: an incident"
    )


def test_a_batch_whose_work_varies_from_night_to_night_is_judged_in_that_variation() -> None:
    def nights(levels: list[float]) -> Minutes:
        return [
            Minute(m.ended, m.low, {**m.high, "db.xact_commit": m.high["db.xact_commit"] * level})
            if batch_at(m.ended)
            else m
            for back, level in enumerate(levels, start=1)
            for m in earlier_days([back])
        ]

    varying = recall_of(nights([0.85, 1.0, 1.2]))

    def at(level: float) -> list[tuple[datetime, Incident]]:
        return tonight(Detector("t", recall=varying), {"db.xact_commit": level * BATCH})

    assert at(1.2) == [], (
        "the busiest night's level, 0.35 of the quietest's over it: within the nights' own spread"
    )
    assert at(2.5), "two and a half times the batch: far past what the nights varied by"


def test_a_diagnosis_cut_short_says_so_and_never_reads_as_one_that_found_nothing() -> None:
    """`dbcrew incidents`, the watch artifact and the log print `describe()`: a diagnosis stopped early (its
    deadline, the target gone) with no cause is not "no root cause rose above the reporting confidence"."""
    at = datetime(2026, 11, 30, 3, 12, tzinfo=UTC)
    lock = IncidentCause(code="lock_contention", object="orders", confidence=0.9, share=0.8)
    whole = IncidentDiagnosis(diagnosed_at=at, while_open=False, interval_end=at)
    assert whole.describe() == "no root cause rose above the reporting confidence"
    cut = whole.model_copy(update={"partial": "incomplete: target unreachable for 30 s"})
    assert cut.describe() == (
        "no root cause found before it was cut short: incomplete: target unreachable for 30 s"
    )
    found = cut.model_copy(update={"causes": [lock]})
    assert found.describe() == (
        "lock_contention on orders (confidence 0.90, 80% of the active time) before it was cut short:"
        " incomplete: target unreachable for 30 s"
    )
    assert whole.model_copy(update={"causes": [lock]}).describe() == (
        "lock_contention on orders (confidence 0.90, 80% of the active time)"
    )
