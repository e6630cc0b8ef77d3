"""The watcher on a real PostgreSQL, its samples in a real store (a DuckDB file, and a PostgreSQL database).

A load runs beside the watcher and its rates, statements and tables land in the store; the server
stopped and started again mid-watch is a stored gap that closes when samples resume; a session an
administrator ends is resumed within the pass; the retention policy merges passes into minute and
hour buckets and drops what outlived its tier.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.models.incident import IncidentSignal
from dbcrew.operators.window.incidents import Detector
from dbcrew.operators.window.passes import PassBody
from dbcrew.roles.watching import RoundReport, Watcher, apply_retention, seeded_detector
from dbcrew.store.samples import Incident, SampleStore, StoredPass, open_samples
from dbcrew.targets import parse_target

EVERY = 1.0  # backends report their counters at most once a second: a shorter pass reads zero, then double
LOAD = "INSERT INTO watched_log (v) SELECT g FROM generate_series(1, 50) g"
BATCHES = 3  # LOAD statements between two passes: 150 rows in each pass after the first
ROWS = BATCHES * 50 * 0.99  # as rates of a few significant digits times the pass's seconds


@pytest.fixture(scope="module")
def pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedPostgres]:
    """The watched server (and the PostgreSQL store's); this module's own: a test stops and starts it."""
    server = EmbeddedPostgres(tmp_path_factory.mktemp("watch-pg") / "data").start()
    server.psql("CREATE DATABASE watched;")
    server.psql(
        "CREATE EXTENSION pg_stat_statements; CREATE TABLE watched_log (id bigserial PRIMARY KEY, v int);",
        "watched",
    )
    yield server
    server.stop()


@pytest.fixture(scope="module")
def store_pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedPostgres]:
    """A second server for the PostgreSQL store, so stopping the watched one leaves the store up."""
    server = EmbeddedPostgres(tmp_path_factory.mktemp("watch-store") / "data").start()
    yield server
    server.stop()


@pytest.fixture(params=["duckdb", "postgresql"])
def store(
    request: pytest.FixtureRequest, store_pg: EmbeddedPostgres, tmp_path: Path
) -> SampleStore:
    if request.param == "duckdb":
        return open_samples(str(tmp_path / "store.duckdb"))
    name = f"store_{uuid.uuid4().hex[:8]}"
    store_pg.psql(f"CREATE DATABASE {name};")
    return open_samples(store_pg.dsn(name))


def _passes(store: SampleStore, identity: str) -> list[StoredPass]:
    return store.passes(identity, 0, datetime.now(UTC) - timedelta(hours=1), datetime.now(UTC))


def test_a_load_lands_in_the_store_as_rates_statements_and_tables(
    pg: EmbeddedPostgres, store: SampleStore
) -> None:
    """The load runs between the passes, a fixed number of rows each time and flushed to the
    statistics at once, so what every pass must count is known on any host: a load beside the
    watcher for however long the passes took counted what the host managed in that time."""
    dsn = pg.dsn("watched")
    rounds: list[RoundReport] = []
    with psycopg.connect(dsn, autocommit=True) as load:

        def loaded(report: RoundReport) -> None:
            rounds.append(report)
            for _ in range(BATCHES):
                load.execute(LOAD)
            load.execute("SELECT pg_stat_force_next_flush()")  # landed before the next pass reads

        Watcher([parse_target(dsn)], store, every=EVERY).run(loaded, rounds=6)
    assert [o.stored for r in rounds for o in r.outcomes] == [False] + [True] * 5, (
        "the first pass only takes readings"
    )
    identity = rounds[-1].outcomes[0].identity
    assert identity.endswith("/watched") and identity != parse_target(dsn).display, (
        "keyed by the cluster's identity"
    )
    stored = _passes(store, identity)
    assert [p.at for p in stored] == [r.at for r in rounds[1:]]
    for p, before, this in zip(stored, rounds[:-1], rounds[1:], strict=True):
        # A pass spans its two readings, each taken inside its round: between the rounds' ends, give
        # or take the time each round took.
        between = (this.at - before.at).total_seconds()
        assert (
            between - this.took_seconds - 0.01 <= p.seconds <= between + before.took_seconds + 0.01
        )
    bodies = [PassBody.model_validate_json(p.body) for p in stored]
    inserted = [
        b.rates.get("db.tup_inserted", 0.0) * p.seconds for b, p in zip(bodies, stored, strict=True)
    ]
    assert all(rows >= ROWS for rows in inserted), (
        f"every pass counts the rows inserted before it, as a rate over its seconds: {inserted}"
    )
    samples = [b.session_samples for b in bodies]
    assert all(n >= 1 for n in samples) and sum(samples) > len(bodies), (
        "each pass's own pg_stat_activity read, and the session samples between passes"
    )
    digests = {d for b in bodies if b.session_time for d in b.session_time.texts.values()}
    assert set(store.texts(identity, list(digests))) == digests, (
        "the sampled statements' texts are stored once, by digest"
    )
    statement = max((s for b in bodies for s in b.statements), key=lambda s: s.calls)
    assert store.texts(identity, [statement.digest]) == {
        statement.digest: LOAD.replace("1, 50", "$1, $2")
    }, "kept once, by digest"
    assert all(
        any(t.name == "public.watched_log" and t.n_tup_ins * p.seconds >= ROWS for t in b.tables)
        for b, p in zip(bodies, stored, strict=True)
    )
    assert (
        store.watched(identity) is not None
        and store.gaps(identity, stored[0].at - timedelta(hours=1), datetime.now(UTC)) == []
    )


def test_an_ended_session_is_resumed_within_the_pass(pg: EmbeddedPostgres, tmp_path: Path) -> None:
    store = open_samples(str(tmp_path / "store.duckdb"))
    rounds: list[RoundReport] = []

    def end_watcher_session(report: RoundReport) -> None:
        rounds.append(report)
        if len(rounds) == 3:
            with psycopg.connect(pg.dsn("watched"), autocommit=True) as admin:
                ended = admin.execute(
                    "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE application_name = 'dbcrew' AND datname = 'watched') t"
                ).fetchone()
            assert ended == (1,)

    Watcher([parse_target(pg.dsn("watched"))], store, every=EVERY).run(
        end_watcher_session, rounds=6
    )
    outcomes = [r.outcomes[0] for r in rounds]
    assert [o.stored for o in outcomes] == [False] + [True] * 5 and all(not o.gap for o in outcomes)
    assert [o.reconnects for o in outcomes[3:]] == [1, 0, 0], (
        "the pass after the kill resumed on a new session, and says so"
    )
    assert len(_passes(store, outcomes[0].identity)) == 5


def test_a_stopped_server_is_a_gap_and_the_watch_resumes_after_its_restart(
    pg: EmbeddedPostgres, tmp_path: Path
) -> None:
    store = open_samples(str(tmp_path / "store.duckdb"))
    rounds: list[RoundReport] = []

    def outage(report: RoundReport) -> None:
        rounds.append(report)
        if len(rounds) == 3:
            pg.stop()
        elif len(rounds) == 6:
            pg.start()

    Watcher([parse_target(pg.dsn("watched"))], store, every=EVERY).run(outage, rounds=9)
    outcomes = [r.outcomes[0] for r in rounds]
    assert [o.stored for o in outcomes] == [
        False,
        True,
        True,
        False,
        False,
        False,
        False,
        True,
        True,
    ]
    assert all(o.gap for o in outcomes[3:6]) and not any(o.gap for o in outcomes[6:]), (
        "unreachable: a gap, never a crash"
    )
    identity = outcomes[0].identity
    stored = _passes(store, identity)
    (gap,) = store.gaps(identity, stored[0].at - timedelta(minutes=1), datetime.now(UTC))
    before, after = (
        [p.at for p in stored if p.at <= gap.started_at],
        [p.at for p in stored if p.at >= gap.ended_at],
    )
    assert len(before) == 2 and len(after) == 2 and len(stored) == 4, "no pass inside the gap"
    assert gap.started_at == rounds[2].at and gap.ended_at == rounds[7].at, (
        "from the last pass before to the first after"
    )
    assert "cannot connect" in gap.reason or "connection" in gap.reason
    assert PassBody.model_validate_json(stored[2].body).rates.get("db.xact_commit", 0.0) >= 0, (
        "no rate spans the restart"
    )


def _body(rate: float) -> str:
    return PassBody(
        rates={"db.xact_commit": rate}, waits={"CPU": 1}, session_samples=1
    ).model_dump_json()


# A function of the database's own under pg_stat_statements' name, and its view (the extension is installed in a
# schema off the search path), that returns what the extension never would: an entry with no counts. Reading it is
# a fault of dbcrew's readers.
FOREIGN_STATEMENTS = """
CREATE SCHEMA off_path;
CREATE EXTENSION pg_stat_statements SCHEMA off_path;
CREATE FUNCTION pg_stat_statements(boolean) RETURNS TABLE (
    queryid bigint, userid oid, dbid oid, toplevel boolean, calls bigint, total_exec_time float8, rows bigint,
    shared_blks_hit bigint, shared_blks_read bigint, temp_blks_written bigint, query text)
LANGUAGE sql AS $$
    SELECT 1::bigint, 10::oid, (SELECT oid FROM pg_database WHERE datname = current_database()), true,
           NULL::bigint, NULL::float8, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, 'SELECT 1'
$$;
CREATE VIEW pg_stat_statements AS SELECT * FROM pg_stat_statements(true);
"""


def test_a_fault_on_one_targets_data_is_its_gap_and_the_target_beside_it_is_watched_on(
    pg: EmbeddedPostgres, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pg.psql("CREATE DATABASE foreign_statements;")
    pg.psql(FOREIGN_STATEMENTS, "foreign_statements")
    store = open_samples(str(tmp_path / "store.duckdb"))
    rounds: list[RoundReport] = []
    targets = [parse_target(pg.dsn("watched")), parse_target(pg.dsn("foreign_statements"))]
    Watcher(targets, store, every=EVERY).run(rounds.append, rounds=4)
    by_target = {
        t.display: [next(o for o in r.outcomes if o.display == t.display) for r in rounds]
        for t in targets
    }
    healthy, faulty = (by_target[t.display] for t in targets)
    assert [o.stored for o in healthy] == [False, True, True, True]
    assert not any(o.stored for o in faulty[1:])
    assert all(o.gap.startswith("a fault of dbcrew's own (TypeError") for o in faulty[1::2]), [
        o.gap for o in faulty
    ]
    (gap,) = store.gaps(faulty[0].identity, rounds[0].at - timedelta(minutes=1), datetime.now(UTC))
    assert gap.reason.startswith("a fault of dbcrew's own")
    assert "Traceback" in caplog.text and "TypeError" in caplog.text


def test_retention_merges_minutes_and_hours_and_drops_what_outlived_its_tier(
    store: SampleStore,
) -> None:
    now = datetime(2026, 11, 25, 12, 0, 30, tzinfo=UTC)
    old = now - timedelta(days=3)  # past the raw tier's two days
    minute = old.replace(second=0, microsecond=0)
    passes = [
        StoredPass(target="t", at=minute + timedelta(seconds=10), seconds=10, body=_body(1.0)),
        StoredPass(target="t", at=minute + timedelta(seconds=40), seconds=30, body=_body(3.0)),
        StoredPass(
            target="t", at=minute + timedelta(minutes=1, seconds=5), seconds=5, body=_body(7.0)
        ),
        StoredPass(target="t", at=now - timedelta(seconds=50), seconds=10, body=_body(2.0)),
    ]
    store.record(passes)
    apply_retention(store, "t", now)
    far = now - timedelta(days=100)
    assert [p.at for p in store.passes("t", 0, far, now)] == [passes[-1].at], (
        "raw passes older than two days dropped"
    )
    minutes = store.passes("t", 60, far, now)
    first = PassBody.model_validate_json(minutes[0].body)
    assert minutes[0].at == minute + timedelta(minutes=1) and minutes[0].seconds == 40
    assert (
        first.rates["db.xact_commit"] == 2.5 and first.session_samples == 2 and first.passes == 2
    ), "weighted by seconds"
    assert now - minutes[-1].at < timedelta(minutes=2), (
        "every minute that is over, the recent one too"
    )
    hours = store.passes("t", 3600, far, now)
    assert (
        hours
        and hours[0].at == (minute + timedelta(hours=1)).replace(minute=0)
        and PassBody.model_validate_json(hours[0].body).passes == 3
    )
    apply_retention(store, "t", now)
    assert store.passes("t", 60, far, now) == minutes, "applying the policy again changes nothing"


def test_the_watchers_detector_reads_the_same_hour_of_earlier_days_from_the_stores_minutes(
    store: SampleStore,
) -> None:
    """A nightly batch the store saw at 02:00 on three earlier days (raw passes, downsampled by the retention
    policy into the minute buckets the detector reads) is no incident tonight; a detector without them opens one."""
    now = datetime(2026, 11, 25, 2, 0, tzinfo=UTC)

    def commits(at: datetime) -> float:
        return 5000.0 if at.hour == 2 and at.minute < 10 else 1000.0 + 20.0 * (at.minute % 3)

    earlier = [
        StoredPass(target="t", at=at, seconds=60, body=_rates(commits(at)))
        for back in (3, 2, 1)
        for at in (now - timedelta(days=back, minutes=30) + timedelta(minutes=m) for m in range(60))
    ]
    store.record(earlier)
    apply_retention(store, "t", now - timedelta(days=1) + timedelta(hours=1))
    store.record(
        [
            StoredPass(target="t", at=now - timedelta(minutes=m), seconds=15, body=_rates(1000.0))
            for m in range(59, -1, -1)
        ]
    )
    tonight = [now + timedelta(seconds=15 * (i + 1)) for i in range(60)]
    seeded = seeded_detector(store, "t", now)
    assert len(seeded.history) == 60, "the last hour's raw passes are its recent history"
    assert [seeded.observe(at, 15, {"db.xact_commit": commits(at)}) for at in tonight] == [
        None
    ] * 60
    assert seeded.same_hour is not None and len(seeded.same_hour.days) == 3
    plain = Detector("t", history=seeded_detector(store, "t", now).history)
    assert any(plain.observe(at, 15, {"db.xact_commit": commits(at)}) for at in tonight), (
        "without the earlier days the batch is an incident"
    )


def _rates(commits: float) -> str:
    return PassBody(rates={"db.xact_commit": commits, "act.active": 1.0}).model_dump_json()


def test_an_incident_left_open_too_long_ago_is_closed_as_it_stood_and_reported_once(
    pg: EmbeddedPostgres, tmp_path: Path
) -> None:
    """A watcher that stopped (or died) with its target's incident open, and nobody watched the target for longer
    than the detector's recent history: the next watcher cannot judge that incident's end, so it closes it as it
    stood (its last abnormal pass), stores it closed and reports it once for its diagnosis: never left open."""
    store = open_samples(str(tmp_path / "store.duckdb"))
    target = parse_target(pg.dsn("watched"))
    Watcher([target], store, every=EVERY).run(rounds=1)  # the target's identity in the store
    identity = store.identity_of(target.display)
    assert identity is not None
    now = datetime.now(UTC)
    left_open = Incident(
        target=identity,
        started_at=now - timedelta(hours=3),
        ended_at=now - timedelta(hours=2, minutes=50),
        signals=[IncidentSignal(name="act.wait_lock", baseline_median=0.0, peak=6.0, z=6.0)],
    )
    store.record([], incidents=[left_open])
    rounds: list[RoundReport] = []
    Watcher([target], store, every=EVERY).run(rounds.append, rounds=3)
    reported = [i for r in rounds for o in r.outcomes for i in o.incidents()]
    closed = left_open.model_copy(update={"closed": True})
    assert reported == [closed], "reported once, with the first stored pass"
    assert [o.stored for r in rounds for o in r.outcomes] == [False, True, True]
    assert rounds[1].outcomes[0].left == [closed]
    assert store.incidents(identity, now - timedelta(days=1)) == [closed], (
        "stored closed as it stood"
    )
