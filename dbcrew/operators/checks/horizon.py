"""Who holds the xmin horizon back: the evidence the vacuum and wraparound checks attach.

Vacuum removes no row version deleted after the oldest xmin still held in the cluster, and
VACUUM (FREEZE) advances relfrozenxid no further than it: a long transaction, a prepared
transaction, a replication slot or a standby's hot_standby_feedback keep dead tuples and old
XIDs in place whatever vacuum does. A finding that vacuum is behind says who holds it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from dbcrew.operators.checks.base import rounded
from dbcrew.operators.collect.catalog import XMIN_HORIZON
from dbcrew.operators.registry import OperatorContext

MAX_NAMED = 5
HOLDERS_SQL = (
    "SELECT kind, holder, xmin_age, held_seconds, detail FROM xmin_horizon"
    " WHERE ({where}) AND (? OR NOT catalog_only) AND ((xmin_age >= ? AND NOT snapshot_only) OR coalesce(held_seconds, 0) >= ?)"
    f" ORDER BY xmin_age DESC, holder LIMIT {MAX_NAMED}"
)


@dataclass(frozen=True, slots=True)
class Holder:
    """A row of HOLDERS_SQL: what a finding names as holding the horizon (dbcrew/operators/collect/catalog.py: HorizonRow)."""

    kind: str
    holder: str
    xmin_age: int | None
    held_seconds: float | None
    detail: str


def held_by(holders: list[Holder]) -> list[dict[str, Any]]:
    """The holders as a finding's evidence."""
    return [rounded(asdict(h)) for h in holders]


def horizon_holders(ctx: OperatorContext, *, database: str | None, catalogs: bool) -> list[Holder]:
    """The oldest holders that hold back `database` (None: the reviewed one), oldest first, at most MAX_NAMED.

    A holder is named when its xmin is at least `horizon_holder_min_age` transactions old or it
    has been held open `horizon_holder_min_seconds`; younger ones are ordinary traffic. A session
    holding only a snapshot is named by time alone: a fresh snapshot inherits the old xmin of
    whoever really holds the horizon. Holders of
    the catalogs only (a logical slot's catalog_xmin) count for `catalogs` judgements: a database's
    frozen XID, not a user table's. Empty when the plan did not collect the horizon.
    """
    if not ctx.workspace.has(XMIN_HORIZON):
        return []
    t = ctx.settings.thresholds
    where, args = (
        ("here", []) if database is None else ("database IS NULL OR database = ?", [database])
    )
    return ctx.workspace.rows(
        Holder,
        HOLDERS_SQL.format(where=where),
        [*args, catalogs, t.horizon_holder_min_age, t.horizon_holder_min_seconds],
    )
