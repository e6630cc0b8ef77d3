"""A watched target whose session cannot read pg_stat_statements is still watched, and its passes say why they
hold no statements: a diagnosis of their interval reports the statements as unknown, never as quiet.

A server that did not preload the module refuses every read of the extension created in a database (a common
state: the extension made in a template, the preload forgotten); a role the view is revoked from reads no
entries. Before, the first stopped every pass (the target was one long gap) and the second stored quiet ones.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.models.interval import PastInterval
from dbcrew.models.report import CoverageStatus, SkipKind
from dbcrew.operators.window.live import sample_window, sampling_coverage
from dbcrew.operators.window.passes import PassBody
from dbcrew.operators.window.store import after_the_fact, read_recorded
from dbcrew.roles.watching import RoundReport, Watcher
from dbcrew.store.samples import SampleStore, open_samples
from dbcrew.targets import parse_target

EVERY = 1.0  # backends report their counters at most once a second
ROUNDS = 4  # the first pass only takes readings: three stored
LOAD = "INSERT INTO logged (v) SELECT g FROM generate_series(1, 20) g"
NORMALIZED = LOAD.replace("1, 20", "$1, $2")  # its text in pg_stat_statements
NOT_LOADED = "pg_stat_statements is not in shared_preload_libraries"


@pytest.fixture(scope="module")
def unloaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedPostgres]:
    """A server that never loaded pg_stat_statements, the extension created in its database all the same, and a
    role that may not read shared_preload_libraries (its brief cannot tell; the watcher's probe must)."""
    data: Path = tmp_path_factory.mktemp("unloaded") / "data"
    server = EmbeddedPostgres(data, settings={"shared_preload_libraries": "''"}).start()
    server.psql("CREATE DATABASE shop; CREATE ROLE plain_watcher LOGIN;")
    server.psql("CREATE EXTENSION pg_stat_statements; CREATE TABLE logged (v int);", "shop")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def revoked(pg: EmbeddedPostgres) -> EmbeddedPostgres:
    """A database of a server that preloads pg_stat_statements, its view revoked from PUBLIC, and a role that
    reads every statistic but that view."""
    pg.psql(
        "CREATE DATABASE revoked; DROP ROLE IF EXISTS stats_reader;"
        " CREATE ROLE stats_reader LOGIN IN ROLE pg_read_all_stats;"
    )
    pg.psql(
        "CREATE EXTENSION IF NOT EXISTS pg_stat_statements;"
        " REVOKE SELECT ON pg_stat_statements FROM PUBLIC; CREATE TABLE logged (v int);",
        "revoked",
    )
    return pg


def watched(dsn: str, load_dsn: str, store: SampleStore) -> tuple[str, list[PassBody]]:
    """ROUNDS passes over `dsn` with rows inserted between them (through `load_dsn`): the identity and the
    stored bodies."""
    rounds: list[RoundReport] = []
    with psycopg.connect(load_dsn, autocommit=True) as load:

        def loaded(report: RoundReport) -> None:
            rounds.append(report)
            load.execute(LOAD)
            load.execute("SELECT pg_stat_force_next_flush()")  # landed before the next pass reads

        Watcher([parse_target(dsn)], store, every=EVERY).run(loaded, rounds=ROUNDS)
    assert [o.stored for r in rounds for o in r.outcomes] == [False] + [True] * (ROUNDS - 1), (
        f"every pass after the first stored, none a gap: {[o for r in rounds for o in r.outcomes]}"
    )
    identity = rounds[-1].outcomes[0].identity
    now = datetime.now(UTC)
    stored = store.passes(identity, 0, now - timedelta(hours=1), now)
    return identity, [PassBody.model_validate_json(p.body) for p in stored]


def statements_coverage(store: SampleStore, identity: str) -> list[tuple[CoverageStatus, str]]:
    """What a diagnosis of the last hour from the store says of its statements."""
    now = datetime.now(UTC)
    recorded = read_recorded(store, identity, PastInterval(start=now - timedelta(hours=1), end=now))
    return [(e.status, e.reason) for e in after_the_fact(recorded) if e.check == "statements"]


@pytest.mark.parametrize("user", ["postgres", "plain_watcher"])
def test_a_server_that_did_not_preload_pg_stat_statements_is_watched_and_says_so(
    unloaded: EmbeddedPostgres, user: str, tmp_path: Path
) -> None:
    store = open_samples(str(tmp_path / "store.duckdb"))
    identity, bodies = watched(unloaded.dsn("shop", user=user), unloaded.dsn("shop"), store)
    assert all(b.rates.get("db.tup_inserted", 0.0) > 0 for b in bodies), "the passes read the rest"
    causes = {(b.statements_unread.cause.kind, b.statements_unread.cause.detail) for b in bodies}
    assert causes == {(SkipKind.MISSING_EXTENSION, NOT_LOADED)}
    assert statements_coverage(store, identity) == [
        (
            CoverageStatus.SKIPPED,
            f"{ROUNDS - 1} of {ROUNDS - 1} passes read no statements: {NOT_LOADED}",
        )
    ]


def test_a_role_the_view_is_revoked_from_gets_its_grant_and_one_that_may_read_it_its_statements(
    revoked: EmbeddedPostgres, tmp_path: Path
) -> None:
    store = open_samples(str(tmp_path / "store.duckdb"))
    identity, bodies = watched(
        revoked.dsn("revoked", user="stats_reader"), revoked.dsn("revoked"), store
    )
    grants = {b.statements_unread.cause.grant for b in bodies if b.statements_unread}
    assert len(bodies) == ROUNDS - 1 and all(b.statements_unread for b in bodies)
    assert grants == {"GRANT SELECT ON pg_stat_statements TO stats_reader;"}
    [(status, reason)] = statements_coverage(store, identity)
    assert status is CoverageStatus.SKIPPED
    assert reason.endswith("(GRANT SELECT ON pg_stat_statements TO stats_reader;)")

    live = sample_window(parse_target(revoked.dsn("revoked", user="stats_reader")), 1.0)
    assert live.statements == [] and live.statements_unread is not None
    assert [(e.check, e.status, e.reason) for e in sampling_coverage(live)] == [
        (
            "statements",
            CoverageStatus.SKIPPED,
            "permission denied for view pg_stat_statements"
            " (GRANT SELECT ON pg_stat_statements TO stats_reader;)",
        )
    ], "a live window says its statements are unknown, as the stored passes do"

    control = open_samples(str(tmp_path / "control.duckdb"))
    identity, bodies = watched(revoked.dsn("revoked"), revoked.dsn("revoked"), control)
    assert not any(b.statements_unread for b in bodies)
    assert any(s.calls > 0 for b in bodies for s in b.statements), (
        "a superuser reads the statements it ran"
    )
    assert statements_coverage(control, identity) == []


def test_a_restart_that_preloads_pg_stat_statements_gives_the_next_passes_their_statements(
    tmp_path: Path,
) -> None:
    """The server restarted between two passes (the watcher's session resumed, not opened anew): what the
    connection learned is learned again, and the passes after the restart read the statements."""
    server = EmbeddedPostgres(
        tmp_path / "data", settings={"shared_preload_libraries": "''"}
    ).start()
    try:
        server.psql("CREATE EXTENSION pg_stat_statements; CREATE TABLE logged (v int);")
        store = open_samples(str(tmp_path / "store.duckdb"))
        rounds: list[RoundReport] = []

        def preloaded_after_the_second(report: RoundReport) -> None:
            rounds.append(report)
            if len(rounds) == 2:
                server.settings["shared_preload_libraries"] = "'pg_stat_statements'"
                server.stop()
                server.start()
            with psycopg.connect(server.dsn(), autocommit=True) as load:
                load.execute(LOAD)

        Watcher([parse_target(server.dsn())], store, every=EVERY).run(
            preloaded_after_the_second, rounds=6
        )
    finally:
        server.stop()
    outcomes = [r.outcomes[0] for r in rounds]
    assert [o.stored for o in outcomes] == [False, True, False, True, True, True], (
        "the pass that finds the restart stores nothing (no rate spans it)"
    )
    now = datetime.now(UTC)
    stored = store.passes(outcomes[0].identity, 0, now - timedelta(hours=1), now)
    bodies = [PassBody.model_validate_json(p.body) for p in stored]
    assert [b.statements_unread is not None for b in bodies] == [True, False, False, False]
    texts = store.texts(outcomes[0].identity, [s.digest for b in bodies for s in b.statements])
    loads = [
        [round(s.calls * p.seconds) for s in b.statements if texts.get(s.digest) == NORMALIZED]
        for b, p in zip(bodies, stored, strict=True)
    ]
    assert loads == [[], [1], [1], [1]], (
        "each load between two passes, counted once, from the restart on"
    )


def test_an_extension_in_a_schema_off_the_search_path_is_named_as_such(
    pg: EmbeddedPostgres, tmp_path: Path
) -> None:
    pg.psql("CREATE DATABASE off_path;")
    pg.psql(
        "CREATE SCHEMA ext; CREATE EXTENSION pg_stat_statements SCHEMA ext;"
        " CREATE TABLE logged (v int);",
        "off_path",
    )
    store = open_samples(str(tmp_path / "store.duckdb"))
    _, bodies = watched(pg.dsn("off_path"), pg.dsn("off_path"), store)
    assert {b.statements_unread.cause.detail for b in bodies if b.statements_unread} == {
        "pg_stat_statements is installed in a schema that is not on the role's search_path"
    }
    assert len(bodies) == ROUNDS - 1 and all(b.statements_unread for b in bodies)


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (
            "REVOKE SELECT ON pg_stat_statements FROM PUBLIC",
            "permission denied for view pg_stat_statements"
            " (GRANT SELECT ON pg_stat_statements TO {role};)",
        ),
        (
            "DROP EXTENSION pg_stat_statements",
            "extension pg_stat_statements is not installed in this database",
        ),
    ],
)
def test_statements_taken_away_while_watched_are_said_from_the_next_pass(
    pg: EmbeddedPostgres, change: str, said: str, tmp_path: Path
) -> None:
    """The view revoked, or the extension dropped, after the watcher connected: the passes from then on carry
    why they hold no statements (before, they stored quiet ones), and a diagnosis of the interval says how many."""
    database = role = f"midwatch_{change.split()[0].lower()}"
    said = said.format(role=role)
    pg.psql(f"CREATE DATABASE {database}; CREATE ROLE {role} LOGIN IN ROLE pg_read_all_stats;")
    pg.psql("CREATE EXTENSION pg_stat_statements; CREATE TABLE logged (v int);", database)
    store = open_samples(str(tmp_path / "store.duckdb"))
    rounds: list[RoundReport] = []
    with psycopg.connect(pg.dsn(database), autocommit=True) as load:

        def taken_after_the_third(report: RoundReport) -> None:
            rounds.append(report)
            load.execute(LOAD)
            load.execute("SELECT pg_stat_force_next_flush()")
            if len(rounds) == 3:
                load.execute(change)

        Watcher([parse_target(pg.dsn(database, user=role))], store, every=EVERY).run(
            taken_after_the_third, rounds=6
        )
    assert all(o.stored for r in rounds[1:] for o in r.outcomes), rounds
    identity = rounds[-1].outcomes[0].identity
    now = datetime.now(UTC)
    bodies = [
        PassBody.model_validate_json(p.body)
        for p in store.passes(identity, 0, now - timedelta(hours=1), now)
    ]
    unread = [b.statements_unread.cause.render() if b.statements_unread else "" for b in bodies]
    assert unread == ["", "", said, said, said], unread
    assert all(any(s.calls > 0 for s in b.statements) for b in bodies[:2]), "read before it"
    assert statements_coverage(store, identity) == [
        (CoverageStatus.RAN, f"partial: 3 of 5 passes read no statements: {said}")
    ]
