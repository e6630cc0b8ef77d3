"""Collectors of the review's window: statistics counters sampled at its start and end, and sessions sampled across it.

Counters (pg_stat_*, dbcrew/operators/stat_views.py) are read at the start and the end of the
window and landed with `<counter>_delta` columns, so checks judge what happened during the
review, not since a reset that may be months old. Statistics are never reset by the review; when
something else resets them during the window (a crash restart, `pg_stat_reset`), a row's counters
read lower at the end than at the start: its deltas then count from the reset (a lower bound,
never a negative rate) and the observation says so in `partial`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import psycopg
from psycopg.rows import class_row
from pydantic import BaseModel, ConfigDict, Field

from dbcrew import stopping
from dbcrew.artifacts import declare
from dbcrew.models import Role
from dbcrew.operators.held import Held, guarded, held_relations
from dbcrew.operators.registry import Observation, OperatorContext, OperatorMisfit, operator
from dbcrew.operators.sql import fetch, land, quote_ident
from dbcrew.operators.stat_views import (
    CHECKPOINTER_TABLE,
    DATABASE_STATS,
    INDEX_STATS,
    SESSIONS_SQL,
    STATEMENTS,
    TABLE_STATS,
    TABLE_STATS_ALL,
    CounterView,
    checkpointer,
    counted_since,
)
from dbcrew.targets import own_pids
from dbcrew.vocabulary import Category

Rows = tuple[list[tuple[str, str]], list[tuple[Any, ...]]]


class WindowParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    window_seconds: float | None = Field(None, ge=0, description="defaults to the run's window")


def _sample_window(
    ctx: OperatorContext,
    params: WindowParams,
    *views: CounterView,
    unseen: Callable[[psycopg.Connection[Any]], str] | None = None,
) -> Observation:
    """Read `views` at the start and the end of the window and land each with its deltas.

    A relation another session holds ACCESS EXCLUSIVE at either reading is left out of both
    (dbcrew/operators/held.py) and named in `partial`, as is what `unseen` says the end reading could not
    see (asked on the same session). The summary is the first view's; the artifacts are every view's.
    """
    window = ctx.window(params.window_seconds)
    # One resumable session for both readings: a server restarted in between is waited for, not a failed task.
    # It rests on the review's shelf through the window (any session reads the same shared counters).
    with ctx.session() as session:
        held, before = session.run(lambda conn: _read(conn, views, Held()))
        started = time.monotonic()
        session.rest()
        stopping.pause(
            window
        )  # a stopped run lands what it saw so far; the crew runs nothing after it
        held, after = session.run(lambda conn: _read(conn, views, held))
        lost = session.run(unseen) if unseen else ""
    elapsed = time.monotonic() - started
    landed = [
        _land_deltas(ctx, view, columns, old, new, elapsed, held.oids)
        for view, (columns, old), (_, new) in zip(views, before, after, strict=True)
    ]
    partial = [held.describe()] if held else []
    partial += [
        f"{view.table}: counters of {rows} {'row' if rows == 1 else 'rows'} set back during the window"
        f" ({view.reset_by}); they count from then only"
        for view, (_, rows) in zip(views, landed, strict=True)
        if rows
    ]
    if lost:
        partial.append(lost)
    return landed[0][0].model_copy(
        update={
            "artifacts": [view.table for view in views],
            "partial": "; ".join(partial),
            "refused_connections": session.refused,
        }
    )


def _read(
    conn: psycopg.Connection[Any], views: tuple[CounterView, ...], held: Held
) -> tuple[Held, list[Rows]]:
    """Each view's rows; the views that lock relations leave out the held ones (a set that only grows)."""
    if any(view.relations for view in views):
        held = held | held_relations(conn)
    readings = []
    for view in views:
        if view.relations:
            held, reading = guarded(conn, held, partial(fetch, conn, view.sql))
        else:
            reading = fetch(conn, view.sql)
        readings.append(reading)
    return held, readings


def _land_deltas(
    ctx: OperatorContext,
    view: CounterView,
    columns: list[tuple[str, str]],
    before: list[tuple[Any, ...]],
    after: list[tuple[Any, ...]],
    elapsed: float,
    held: frozenset[int],
) -> tuple[Observation, int]:
    """Land the view's end reading with its deltas; how many rows had their counters reset in between."""
    names = [c for c, _ in columns]
    key_idx = [names.index(k) for k in view.keys]
    counter_idx = [names.index(c) for c in view.counters]
    marker_idx = [names.index(c) for c in view.markers]
    first = {tuple(row[i] for i in key_idx): row for row in before}
    delta_columns = [(f"{c}_delta", "DOUBLE") for c in view.changes]
    rows = []
    reset = 0
    for row in after:
        if view.left_out(held, dict(zip(names, row, strict=True))):
            continue  # held at the start: its counters have no start to subtract
        old = first.get(tuple(row[i] for i in key_idx))
        # An object created during the window started from zero.
        deltas, was_reset = counted_since(
            [float((old[i] if old else 0) or 0) for i in counter_idx],
            [float(row[i] or 0) for i in counter_idx],
        )
        reset += was_reset
        moved = [float(row[i] or 0) - float((old[i] if old else row[i]) or 0) for i in marker_idx]
        rows.append((*row, *deltas, *moved, elapsed))
    count = land(
        ctx.workspace, view.table, [*columns, *delta_columns, ("window_seconds", "DOUBLE")], rows
    )
    if (
        view.held is not None
    ):  # what the view's rows leave out, for checks that join it with a lock-free artifact
        land(
            ctx.workspace,
            view.held,
            [("relid", "BIGINT")],
            [(oid,) for oid in sorted(held)],
        )
    return Observation(
        summary=f"{view.table}: {count} rows over a {elapsed:.1f}s window", artifacts=[view.table]
    ), reset


@operator(
    role=Role.EXTRACTOR,
    category=Category.COLLECT,
    produces=(DATABASE_STATS.table, CHECKPOINTER_TABLE),
)
def collect_database_stats(ctx: OperatorContext, params: WindowParams) -> Observation:
    """Sample pg_stat_database (this database) and the checkpointer counters over the window."""
    server = ctx.server_version()
    return _sample_window(ctx, params, DATABASE_STATS, checkpointer(server))


@operator(role=Role.EXTRACTOR, category=Category.COLLECT, produces=(TABLE_STATS.table,))
def collect_table_stats(ctx: OperatorContext, params: WindowParams) -> Observation:
    """Sample pg_stat_user_tables with sizes, reloptions and primary keys over the window."""
    return _sample_window(ctx, params, TABLE_STATS)


@operator(
    role=Role.EXTRACTOR,
    category=Category.COLLECT,
    produces=(TABLE_STATS_ALL.table,),
    equivalent_of="collect_table_stats",
)
def collect_table_stats_all(ctx: OperatorContext, params: WindowParams) -> Observation:
    """Same as collect_table_stats, read from pg_stat_all_tables (for servers that hide the user view)."""
    return _sample_window(ctx, params, TABLE_STATS_ALL)


@operator(role=Role.EXTRACTOR, category=Category.COLLECT, produces=(INDEX_STATS.table,))
def collect_index_stats(ctx: OperatorContext, params: WindowParams) -> Observation:
    """Sample pg_stat_user_indexes with definitions (columns, opclasses, predicate, method) over the window."""
    return _sample_window(ctx, params, INDEX_STATS)


STATS_PRIVILEGE_SQL = "SELECT pg_has_role(current_user, 'pg_read_all_stats', 'USAGE') AS can, current_user::text AS role"


@dataclass(frozen=True, slots=True)
class StatsPrivilege:
    """The row of STATS_PRIVILEGE_SQL: whether the review role reads every role's statistics now."""

    can: bool
    role: str


def stats_privilege_lost(conn: psycopg.Connection[Any], ctx: OperatorContext) -> str:
    """What a collector could not see because the role lost pg_read_all_stats after the probe found it; empty otherwise.

    Privileges are checked when a statement runs: a REVOKE during the review hides other roles'
    sessions and statement texts from the next reading on, without an error. The probe's brief
    says what the review started with; a reading that no longer has it names the GRANT.
    """
    if ctx.brief is None or not ctx.brief.can_read_all_stats:
        return ""  # never had it: the planner's visibility notes already say so
    with conn.cursor(row_factory=class_row(StatsPrivilege)) as cur:
        row = cur.execute(STATS_PRIVILEGE_SQL).fetchone()
    if row is None or row.can:
        return ""
    return (
        f"pg_read_all_stats lost during the review: sessions and statement texts of other roles unseen from then on"
        f" (GRANT pg_read_all_stats TO {quote_ident(row.role)};)"
    )


@operator(
    role=Role.EXTRACTOR,
    category=Category.COLLECT,
    produces=(STATEMENTS.table,),
    requires=("pg_stat_statements",),
)
def collect_statements(ctx: OperatorContext, params: WindowParams) -> Observation:
    """Sample pg_stat_statements for this database over the window (needs the extension preloaded)."""
    if ctx.brief is not None and not ctx.brief.has_statements:
        raise OperatorMisfit("pg_stat_statements is not installed and preloaded on this target")
    return _sample_window(
        ctx, params, STATEMENTS, unseen=lambda conn: stats_privilege_lost(conn, ctx)
    )


ACTIVITY = declare("activity")  # the session samples of SESSIONS_SQL across the window
CONNECTIONS = declare("connections")  # client connections per sample (CONNECTIONS_SQL)

CONNECTIONS_SQL = """
SELECT %(sample)s::int AS sample_no, count(*)::bigint AS connections,
       current_setting('max_connections')::bigint AS max_connections,
       current_setting('superuser_reserved_connections')::bigint AS reserved
FROM pg_stat_activity WHERE backend_type = 'client backend'
"""


@dataclass(frozen=True, slots=True)
class ConnectionsRow:
    """A row of `connections` (CONNECTIONS_SQL): client connections in one sample, against the server's limits."""

    sample_no: int
    connections: int
    max_connections: int
    reserved: int


QUOTED_QUERY_CHARS = 500  # statement text kept with each session sample (quoted in findings)


class ActivityParams(WindowParams):
    samples: int | None = Field(None, ge=1, le=60)


def _sessions_sample(
    conn: psycopg.Connection[Any], sample: int
) -> tuple[list[tuple[str, str]], list[tuple[Any, ...]]]:
    """One sample of pg_stat_activity, the sessions of this connection's review left out."""
    return fetch(
        conn,
        SESSIONS_SQL,
        {
            "sample": sample,
            "query_chars": QUOTED_QUERY_CHARS,
            "own": own_pids(conn, this_database=True),
        },
    )


@operator(role=Role.EXTRACTOR, category=Category.COLLECT, produces=(ACTIVITY, CONNECTIONS))
def collect_activity(ctx: OperatorContext, params: ActivityParams) -> Observation:
    """Sample pg_stat_activity (sessions, waits, blockers) several times across the window."""
    window = ctx.window(params.window_seconds)
    samples = params.samples or ctx.settings.activity_samples
    pause = window / max(samples - 1, 1)
    activity_rows: list[tuple[Any, ...]] = []
    connection_rows: list[tuple[Any, ...]] = []
    act_cols: list[tuple[str, str]] = []
    conn_cols: list[tuple[str, str]] = []
    lost = ""
    with ctx.session() as session:
        for sample in range(samples):
            if sample:
                session.rest()
                if stopping.pause(pause):
                    break
            act_cols, rows = session.run(partial(_sessions_sample, sample=sample))
            activity_rows.extend(rows)
            conn_cols, rows = session.run(
                partial(fetch, sql=CONNECTIONS_SQL, params={"sample": sample})
            )
            connection_rows.extend(rows)
            lost = lost or session.run(lambda conn: stats_privilege_lost(conn, ctx))
    land(ctx.workspace, ACTIVITY, act_cols, activity_rows)
    land(ctx.workspace, CONNECTIONS, conn_cols, connection_rows)
    return Observation(
        summary=f"activity: {len(activity_rows)} session rows in {samples} samples{session.note()}",
        artifacts=[ACTIVITY, CONNECTIONS],
        partial=lost,
        refused_connections=session.refused,
    )
