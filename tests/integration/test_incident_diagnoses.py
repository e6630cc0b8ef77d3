"""Incidents keep their diagnoses in a real store (a DuckDB file, and a PostgreSQL database), and the foreground
watcher's background diagnoser stores them whole, one at a time per target, and stops within its bound.

A store written before diagnoses existed gains their table when it is next opened, its incidents listed
as not diagnosed; a long incident's diagnosis as it stood and its close's are both kept, the close's
standing; the watcher rewriting an open incident's row every round leaves its diagnosis in place. The
diagnoser's crew is a stand-in here (a function the test holds back): the real crew diagnosing a real
incident is tests/integration/test_watch_diagnoses.py's.
"""

from __future__ import annotations

import json
import threading
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.models.incident import IncidentSignal
from dbcrew.roles.incident_diagnosis import LONG_INCIDENT, BackgroundDiagnoser, DiagnosisSchedule
from dbcrew.store.backends import DuckDBBackend, PostgresBackend
from dbcrew.store.incident_diagnoses import IncidentCause, IncidentDiagnosis
from dbcrew.store.samples import SCHEMA, Incident, WatchedTarget, open_samples
from dbcrew.targets import PostgresTarget, parse_target
from tests.cli_here import dbcrew_here

T0 = datetime(2026, 11, 25, 3, 12, tzinfo=UTC)
TARGET = "7311111111111111111/shop"
OLD_SCHEMA = SCHEMA[:-1]  # the sample tables as they were before incidents kept a diagnosis


def incident(closed: bool, start: datetime = T0, minutes: float = 8.0) -> Incident:
    return Incident(
        target=TARGET,
        started_at=start,
        ended_at=start + timedelta(minutes=minutes),
        closed=closed,
        signals=[IncidentSignal(name="act.wait_lock", baseline_median=0.0, peak=3.5, z=40.0)],
    )


def diagnosis(of: Incident, code: str, at: datetime) -> IncidentDiagnosis:
    return IncidentDiagnosis(
        diagnosed_at=at,
        while_open=not of.closed,
        interval_end=of.ended_at,
        causes=[IncidentCause(code=code, object="public.orders", confidence=0.85, share=0.62)],
        run_id=uuid.uuid4().hex[:12],
        report=f"/reports/{code}/report.json",
    )


@pytest.fixture(params=["duckdb", "postgresql"])
def store_url(request: pytest.FixtureRequest, pg: EmbeddedPostgres, tmp_path: Path) -> str:
    if request.param == "duckdb":
        return str(tmp_path / "store.duckdb")
    name = f"store_{uuid.uuid4().hex[:8]}"
    pg.psql(f"CREATE DATABASE {name};")
    return pg.dsn(name)


def old_store_with_an_incident(url: str) -> None:
    """A store as the watcher wrote it before diagnoses: the old tables, one closed incident."""
    backend = (
        PostgresBackend(url, url) if url.startswith("postgresql") else DuckDBBackend(Path(url))
    )
    with backend.session() as session:
        for statement in OLD_SCHEMA:
            session.run(statement)
        session.run(
            "INSERT INTO watch_incidents VALUES (?, ?, ?, ?, ?)",
            [TARGET, T0, T0 + timedelta(minutes=8), True, "[]"],
        )


def test_a_store_from_before_diagnoses_gains_them_and_keeps_its_incidents(store_url: str) -> None:
    old_store_with_an_incident(store_url)
    store = open_samples(store_url)
    (listed,) = store.incidents(TARGET, T0 - timedelta(days=1))
    assert listed.closed and listed.diagnoses == [] and listed.diagnosis is None
    found = diagnosis(listed, "lock_contention", T0 + timedelta(minutes=9))
    store.record_diagnosis(listed.ref(), found)
    (again,) = open_samples(store_url).incidents(TARGET, T0 - timedelta(days=1))
    assert again.diagnosis == found and again.diagnosis.causes[0].object == "public.orders"


def test_the_close_diagnosis_joins_the_one_made_while_open_and_stands(store_url: str) -> None:
    store = open_samples(store_url)
    open_one = incident(closed=False, minutes=11)
    store.record([], incidents=[open_one])
    as_it_stood = diagnosis(open_one, "workload_high_updates", T0 + timedelta(minutes=12))
    store.record_diagnosis(open_one.ref(), as_it_stood)

    grown = incident(
        closed=False, minutes=14
    )  # the watcher rewrites the open incident's row as it grows
    store.record([], incidents=[grown])
    (listed,) = store.incidents(TARGET, T0)
    assert listed.diagnoses == [as_it_stood] and listed.diagnosis == as_it_stood

    closed = incident(closed=True, minutes=20)
    store.record([], incidents=[closed])
    at_close = diagnosis(closed, "lock_contention", T0 + timedelta(minutes=21))
    store.record_diagnosis(closed.ref(), at_close)
    again = diagnosis(closed, "lock_contention", T0 + timedelta(minutes=22))
    store.record_diagnosis(
        closed.ref(), again
    )  # a second diagnosis of the close replaces the first
    (listed,) = store.incidents(TARGET, T0)
    assert listed.diagnoses == [as_it_stood, again], "both kept, oldest first"
    assert listed.diagnosis == again and not again.while_open
    assert "as it stood" in as_it_stood.describe() and "as it stood" not in again.describe()


def test_a_long_incident_is_due_once_while_open_and_again_at_its_close() -> None:
    schedule = DiagnosisSchedule()
    short = incident(closed=False, minutes=1)
    assert not schedule.due(short, short.ended_at)
    long_open = incident(closed=False, minutes=LONG_INCIDENT.total_seconds() / 60 + 1)
    assert schedule.due(long_open, long_open.ended_at)
    assert not schedule.due(long_open, long_open.ended_at + timedelta(minutes=5)), "once while open"
    assert schedule.due(incident(closed=True, minutes=30), T0 + timedelta(minutes=30))


def test_a_long_incident_diagnosed_while_open_by_its_last_watcher_is_not_again_by_its_taker() -> (
    None
):
    """The watcher that carried a long incident on (its last one died) reads its kept diagnoses: the while-open one
    is not started again; its close's is due."""
    long_open = incident(closed=False, minutes=LONG_INCIDENT.total_seconds() / 60 + 1)
    diagnosed = long_open.model_copy(
        update={"diagnoses": [diagnosis(long_open, "lock_contention", long_open.ended_at)]}
    )
    taker = DiagnosisSchedule()
    assert not taker.due(diagnosed, diagnosed.ended_at + timedelta(minutes=1))
    assert taker.due(diagnosed.model_copy(update={"closed": True}), T0 + timedelta(minutes=30))


class HeldCrew:
    """Stands for the crew: each diagnosis waits until the test lets it finish, and says when it started."""

    def __init__(self) -> None:
        self.started: list[Incident] = []
        self.running = 0
        self.most_at_once = 0
        self.release = threading.Event()
        self.began = threading.Semaphore(0)
        self._lock = threading.Lock()

    def __call__(self, target: PostgresTarget, of: Incident) -> IncidentDiagnosis:
        with self._lock:
            self.started.append(of)
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        self.began.release()
        self.release.wait(60)
        with self._lock:
            self.running -= 1
        return diagnosis(of, "lock_contention", datetime.now(UTC))


TARGET_URL = parse_target("postgresql://dbcrew@127.0.0.1:5432/shop")
OTHER_URL = parse_target("postgresql://dbcrew@127.0.0.2:5432/shop")


def test_the_diagnoser_takes_incidents_at_once_and_diagnoses_a_targets_in_order(
    tmp_path: Path,
) -> None:
    store = open_samples(str(tmp_path / "store.duckdb"))
    first, second = incident(closed=True), incident(closed=True, start=T0 + timedelta(hours=1))
    store.record([], incidents=[first, second])
    crew = HeldCrew()
    diagnoser = BackgroundDiagnoser(crew, store)
    diagnoser.submit(TARGET_URL, first)
    diagnoser.submit(TARGET_URL, second)
    assert crew.began.acquire(timeout=60)
    assert crew.started == [first], "submit returned while the first diagnosis still runs"
    crew.release.set()
    assert diagnoser.close(wait=60) == []
    assert crew.started == [first, second] and crew.most_at_once == 1
    stored = store.incidents(TARGET, T0)
    assert [i.diagnosis.causes[0].code if i.diagnosis else None for i in stored] == [
        "lock_contention",
        "lock_contention",
    ]


def test_closing_waits_a_bounded_time_says_what_was_not_diagnosed_and_stores_nothing_after(
    tmp_path: Path,
) -> None:
    store = open_samples(str(tmp_path / "store.duckdb"))
    first, second = incident(closed=True), incident(closed=True, start=T0 + timedelta(hours=1))
    store.record([], incidents=[first, second])
    elsewhere = incident(closed=True, start=T0 + timedelta(minutes=30)).model_copy(
        update={"target": "7322222222222222222/shop"}
    )
    crew = HeldCrew()
    diagnoser = BackgroundDiagnoser(crew, store)
    diagnoser.submit(TARGET_URL, first)
    assert crew.began.acquire(timeout=60)
    diagnoser.submit(TARGET_URL, second)  # behind the first, on its target's lane
    diagnoser.submit(OTHER_URL, elsewhere)  # its own lane, waiting for the one crew at a time
    left = diagnoser.close(wait=0.1)  # the held diagnosis cannot finish within it
    assert [(u.incident, u.why) for u in left] == [
        (first, "still being diagnosed when the wait ended"),
        (elsewhere, "queued"),
        (second, "queued"),
    ]
    assert [u.describe().split(": incident")[0] for u in left] == [
        TARGET_URL.display,
        OTHER_URL.display,
        TARGET_URL.display,
    ]
    diagnoser.submit(TARGET_URL, incident(closed=True, start=T0 + timedelta(hours=2)))
    assert crew.started == [first], "nothing new starts once closed"
    crew.release.set()  # the diagnosis in flight finishes after the watcher gave up on it
    for lane in diagnoser._lanes.values():
        assert lane.thread is not None
        lane.thread.join(60)
    assert all(i.diagnosis is None for i in store.incidents(TARGET, T0)), "nothing half-kept"


def test_incidents_prints_each_incidents_diagnosis_or_that_it_has_none(
    private_store: Path,
) -> None:
    store = open_samples(str(private_store))
    now = datetime.now(UTC).replace(microsecond=0)
    long_one = incident(closed=False, start=now - timedelta(minutes=20), minutes=15)
    undiagnosed = incident(closed=True, start=now - timedelta(minutes=40), minutes=2)
    store.record(
        [],
        targets=[
            WatchedTarget(
                target=TARGET, display="postgresql://x@h/shop", facts="{}", updated_at=now
            )
        ],
        incidents=[undiagnosed, long_one],
    )
    as_it_stood = diagnosis(long_one, "workload_high_updates", now)
    store.record_diagnosis(long_one.ref(), as_it_stood)

    text = dbcrew_here("incidents", TARGET, "--since", "-1h")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[1].strip() == "not diagnosed", lines
    assert lines[3].strip() == (
        "causes: workload_high_updates on public.orders (confidence 0.85, 62% of the active time)"
        f" (as it stood at {long_one.ended_at:%H:%M:%S}); report: /reports/workload_high_updates/report.json"
    ), lines
    listed = json.loads(dbcrew_here("incidents", TARGET, "--json", "--since", "-1h").stdout)
    assert [i["diagnosis"] for i in listed] == [None, as_it_stood.model_dump(mode="json")]
