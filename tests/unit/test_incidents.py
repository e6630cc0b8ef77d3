"""The incident detector on passes of known values: noise and one stray pass are no incident, two abnormal passes open
one, three calm ones close it, and an incident's passes never become the target's normal."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from operators.watch.incidents import CLOSE_AFTER, MIN_HISTORY, OPEN_AFTER, Detector

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
