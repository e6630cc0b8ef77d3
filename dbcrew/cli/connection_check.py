"""`dbcrew inventory check --connect`: each target's address and credential, tested before any schedule.

The inventory check alone reads no password and opens no connection, so a typo in a host, a
closed port or a wrong password shows up only when the first scheduled review fails. With
`--connect` each entry's password is taken from its source (dbcrew.flows.targets.resolve_password, as a
worker takes it) and one review session is opened: read-only, the target's connect timeout,
one catalogue read. What failed is said in one line per target, without the password.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import psycopg

from dbcrew.errors import TargetError
from dbcrew.inventory import PasswordFromSecret, TargetEntry
from dbcrew.redact import redact
from dbcrew.targets import parse_target
from dbcrew.targets.postgres import first_line

MAX_AT_ONCE = 8  # targets connected to at once: an unreachable one waits out its connect timeout
WHO_SQL = (
    "SELECT current_setting('server_version') AS version, current_user::text AS role,"
    " pg_has_role(current_user, 'pg_read_all_stats', 'USAGE') AS reads_all_stats"
)


@dataclass(frozen=True, slots=True)
class ConnectionCheck:
    """One target's outcome: reached (with what it reached) or not (with why), never a password."""

    name: str
    ok: bool
    detail: str


def check_connection(entry: TargetEntry, password: str | None) -> ConnectionCheck:
    """Open one read-only review session to `entry` and read who it is connected as."""
    try:
        with parse_target(entry.url, password=password).session() as conn:
            row = conn.execute(WHO_SQL).fetchone()
    except TargetError as exc:
        return ConnectionCheck(entry.name, False, str(exc))
    except (
        psycopg.Error
    ) as exc:  # reached, but the one catalogue read failed (a timeout, a privilege)
        return ConnectionCheck(entry.name, False, redact(first_line(exc)))
    assert row is not None  # the query returns one row
    stats = (
        "" if row["reads_all_stats"] else "; without pg_read_all_stats: others' statements unseen"
    )
    return ConnectionCheck(entry.name, True, f"PostgreSQL {row['version']} as {row['role']}{stats}")


def password_of(entry: TargetEntry) -> str | None:
    """The entry's password as a worker here would get it; TargetError when its source cannot give it."""
    if isinstance(entry.password, PasswordFromSecret) and "PREFECT_API_URL" not in os.environ:
        raise TargetError(
            f"target {entry.name}: its password is the Secret block {entry.password.secret!r}, and no"
            " Prefect server is known to read it from (`dbcrew server`, or set PREFECT_API_URL)"
        )
    from dbcrew.flows.targets import resolve_password

    return resolve_password(entry)


def check_connections(entries: list[TargetEntry]) -> list[ConnectionCheck]:
    """Every entry's outcome, in the inventory's order (passwords fetched one by one, connections at once)."""
    passwords: dict[str, str | None] = {}
    outcomes: dict[str, ConnectionCheck] = {}
    for entry in entries:
        try:
            passwords[entry.name] = password_of(entry)
        except TargetError as exc:
            outcomes[entry.name] = ConnectionCheck(entry.name, False, str(exc))
    reachable = [e for e in entries if e.name not in outcomes]
    with ThreadPoolExecutor(max_workers=MAX_AT_ONCE) as pool:
        for outcome in pool.map(lambda e: check_connection(e, passwords[e.name]), reachable):
            outcomes[outcome.name] = outcome
    return [outcomes[e.name] for e in entries]
