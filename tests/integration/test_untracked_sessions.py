"""dbcrew's own sessions take no pg_stat_statements entry where the role may turn tracking off for itself, and
are tracked and marked where it may not: on a server of hundreds of databases a watcher's and the reviews' reads
would otherwise fill pg_stat_statements.max and evict the workload's statements."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.targets import parse_target
from dbcrew.targets.postgres import OWN_STATEMENT_MARKER

DB = "untracked"
PROBE = "SELECT 'probe' AS untracked_probe"


@pytest.fixture(scope="module")
def server(pg: EmbeddedPostgres) -> EmbeddedPostgres:
    """A database with pg_stat_statements, a role granted SET on its `track` and one that is not."""
    pg.psql(
        f"CREATE DATABASE {DB};"
        " DROP ROLE IF EXISTS granted_reader; CREATE ROLE granted_reader LOGIN;"
        " DROP ROLE IF EXISTS plain_reader; CREATE ROLE plain_reader LOGIN IN ROLE pg_read_all_stats;"
        " GRANT SET ON PARAMETER pg_stat_statements.track TO granted_reader;"
    )
    pg.psql("CREATE EXTENSION IF NOT EXISTS pg_stat_statements;", DB)
    return pg


def tracked_probes(pg: EmbeddedPostgres, user: str) -> list[str]:
    """The probe's entries of `user` in this database, read by a session of no dbcrew."""
    with psycopg.connect(pg.dsn(DB)) as conn:
        rows = conn.execute(
            "SELECT query FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid"
            " WHERE r.rolname = %s AND query LIKE '%%untracked_probe%%'"
            " AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())",
            [user],
        ).fetchall()
    return [r[0] for r in rows]


@pytest.mark.parametrize(
    ("user", "tracked"),
    [("postgres", False), ("granted_reader", False), ("plain_reader", True)],
    ids=["superuser", "granted SET", "no privilege"],
)
def test_a_session_is_untracked_where_its_role_may_say_so(
    server: EmbeddedPostgres, user: str, tracked: bool
):
    with parse_target(server.dsn(DB, user=user)).session() as session:
        for _ in range(3):
            session.execute(PROBE)
        setting = session.execute("SHOW pg_stat_statements.track").fetchone()
    assert setting == {"pg_stat_statements.track": "top" if tracked else "none"}
    expected = [f"SELECT $1 AS untracked_probe\n{OWN_STATEMENT_MARKER}"] if tracked else []
    assert tracked_probes(server, user) == expected


@pytest.fixture(scope="module")
def unloaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedPostgres]:
    """A server that never loaded pg_stat_statements: its `track` setting does not exist."""
    data: Path = tmp_path_factory.mktemp("unloaded") / "data"
    server = EmbeddedPostgres(data, settings={"shared_preload_libraries": "''"}).start()
    yield server
    server.stop()


def test_a_server_without_pg_stat_statements_is_read_as_before(unloaded: EmbeddedPostgres):
    with parse_target(unloaded.dsn()).session() as session:
        assert session.execute(PROBE).fetchone() == {"untracked_probe": "probe"}
        missing = session.execute(
            "SELECT current_setting('pg_stat_statements.track', true) AS track"
        ).fetchone()
    assert missing == {"track": None}
