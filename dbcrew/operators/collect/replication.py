"""Replication state: standbys streaming from this server and the slots that retain WAL for them.

On a primary the lag is measured in bytes of WAL not yet replayed (and the replay_lag interval
the walsender reports); on a standby, as the age of the last replayed transaction when the
standby has received more than it replayed.
"""

from __future__ import annotations

from dataclasses import dataclass

from dbcrew.artifacts import declare
from dbcrew.models import Role
from dbcrew.operators.registry import Observation, OperatorContext, operator
from dbcrew.operators.sql import fetch, land
from dbcrew.vocabulary import Category

REPLICATION_SQL = """
SELECT 'standby'::text AS scope, coalesce(r.application_name, '') || coalesce('@' || host(r.client_addr), '') AS name,
       r.state::text AS state,
       pg_wal_lsn_diff(pg_current_wal_lsn(), r.replay_lsn)::float8 AS lag_bytes,
       extract(epoch FROM r.replay_lag)::float8 AS lag_seconds
FROM pg_stat_replication r
WHERE NOT pg_is_in_recovery()
UNION ALL
SELECT 'this server'::text, 'replay', 'recovering',
       pg_wal_lsn_diff(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn())::float8,
       CASE WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0
            ELSE extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8 END
WHERE pg_is_in_recovery()
"""


@dataclass(frozen=True, slots=True)
class ReplicationRow:
    """A row of `replication` (REPLICATION_SQL): a standby of this server, or this standby's own replay."""

    scope: str
    name: str
    state: str
    lag_bytes: float | None
    lag_seconds: float | None


# inactive_since (PostgreSQL 17+): a slot whose consumer went away seconds ago is a replica restarting
# or failing over, not yet a slot left behind.
SLOTS_SQL = """
SELECT slot_name::text, slot_type::text, coalesce(database::text, '') AS database, active,
       coalesce(wal_status, '') AS wal_status, {inactive_seconds} AS inactive_seconds,
       CASE WHEN pg_is_in_recovery() OR restart_lsn IS NULL THEN NULL
            ELSE pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::float8 END AS retained_bytes
FROM pg_replication_slots
"""
INACTIVE_SECONDS = "extract(epoch FROM now() - inactive_since)::float8"


@dataclass(frozen=True, slots=True)
class SlotRow:
    """A row of `replication_slots` (SLOTS_SQL); `inactive_seconds` None before PostgreSQL 17 or while active."""

    slot_name: str
    slot_type: str
    database: str
    active: bool
    wal_status: str
    inactive_seconds: float | None
    retained_bytes: float | None


REPLICATION = declare("replication")  # the streams to standbys
REPLICATION_SLOTS = declare("replication_slots")


@operator(role=Role.EXTRACTOR, category=Category.COLLECT, produces=(REPLICATION, REPLICATION_SLOTS))
def collect_replication(ctx: OperatorContext) -> Observation:
    """Read pg_stat_replication (or the standby's own replay position) and pg_replication_slots."""
    server = ctx.server_version()
    with ctx.target.session() as conn:
        rep_cols, rep_rows = fetch(conn, REPLICATION_SQL)
        slot_cols, slot_rows = fetch(
            conn,
            SLOTS_SQL.format(
                inactive_seconds=INACTIVE_SECONDS if server >= 170000 else "NULL::float8"
            ),
        )
    land(ctx.workspace, REPLICATION, rep_cols, rep_rows)
    land(ctx.workspace, REPLICATION_SLOTS, slot_cols, slot_rows)
    return Observation(
        summary=f"replication: {len(rep_rows)} streams, {len(slot_rows)} slots",
        artifacts=[REPLICATION, REPLICATION_SLOTS],
    )
