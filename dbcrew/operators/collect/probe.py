"""The probe: the target's version, size, extensions and the review role's privileges, as the run's brief.

Every plan is drafted from the brief (which collectors the role may run, which extensions are
there), so the probe runs before anything else and lands the brief in the workspace.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import kwargs_row

from dbcrew.artifacts import declare
from dbcrew.errors import TargetError
from dbcrew.models import Brief
from dbcrew.operators.registry import OperatorContext
from dbcrew.operators.sql import scalar
from dbcrew.targets.postgres import PostgresTarget

PROBE_SQL = """
SELECT current_setting('server_version') AS server_version,
       current_setting('server_version_num')::int AS server_version_num,
       current_database() AS database,
       current_user AS current_user,
       pg_database_size(current_database()) AS database_size_bytes,
       (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
           AND n.nspname NOT LIKE 'pg_toast%') AS table_count,
       (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE c.relkind = 'i' AND n.nspname NOT IN ('pg_catalog', 'information_schema')
           AND n.nspname NOT LIKE 'pg_toast%') AS index_count,
       pg_is_in_recovery() AS in_recovery,
       (SELECT coalesce(array_agg(extname::text ORDER BY extname), '{}') FROM pg_extension) AS extensions,
       CASE WHEN pg_has_role(current_user, 'pg_read_all_settings', 'USAGE')
            THEN current_setting('shared_preload_libraries') END AS preloaded,
       (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS is_superuser,
       pg_has_role(current_user, 'pg_read_all_stats', 'USAGE') AS can_read_all_stats,
       pg_has_role(current_user, 'pg_read_all_settings', 'USAGE') AS can_read_all_settings,
       current_setting('max_connections')::int AS max_connections,
       current_setting('track_io_timing') = 'on' AS track_io_timing,
       CASE WHEN has_function_privilege('pg_control_system()', 'EXECUTE')
            THEN (SELECT system_identifier::text FROM pg_control_system()) END AS system_identifier,
       now() AS probed_at,
       pg_postmaster_start_time() AS server_started_at,
       (SELECT stats_reset FROM pg_stat_database WHERE datname = current_database()) AS stats_reset_at,
       (SELECT stats_reset FROM pg_stat_archiver) AS shared_stats_reset_at
"""


def _brief(*, preloaded: str | None, **columns: Any) -> Brief:
    """A PROBE_SQL row as a brief (psycopg's `kwargs_row`): `preloaded` is NULL when the role may not read
    the setting; the statements collector then finds out at run time."""
    libraries = (
        None if preloaded is None else [lib.strip() for lib in preloaded.split(",") if lib.strip()]
    )
    return Brief(**columns, preloaded_libraries=libraries)


def read_brief(conn: psycopg.Connection[Any]) -> Brief:
    """The brief of the database `conn` is connected to (the watcher reads it on each connection too)."""
    with conn.cursor(row_factory=kwargs_row(_brief)) as cur:
        brief = cur.execute(PROBE_SQL).fetchone()
    assert brief is not None
    if brief.is_superuser:
        brief = brief.model_copy(update={"can_read_all_stats": True, "can_read_all_settings": True})
    return brief


def server_started_at(target: PostgresTarget) -> datetime | None:
    """When the target's server started, asked now; None when it does not answer (TargetError):
    read again at the end of a run, it tells whether the server restarted since the probe. A
    session lost while asking (the server going down that moment) is no answer either."""
    try:
        with target.session() as conn:
            started: datetime = scalar(conn, "SELECT pg_postmaster_start_time()")
    except (TargetError, psycopg.OperationalError):
        return None
    return started


BRIEF_KEY = declare("brief")  # the probe's brief, kept for the report and the store


def probe(ctx: OperatorContext) -> Brief:
    """Read the target's version, size, extensions and the review role's privileges into a brief."""
    with ctx.target.session() as conn:
        brief = read_brief(conn)
    ctx.workspace.put_observation(BRIEF_KEY, brief.model_dump())
    return brief
