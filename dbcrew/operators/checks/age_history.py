"""The reviewed database's transaction-ID age at its last health review, staged before this one.

With autovacuum on, an age past autovacuum_freeze_max_age is ordinarily a moment: the server
launches an anti-wraparound vacuum as soon as a database passes it, and the age falls. An age that
was past the limit at the last review and is higher now has not fallen in between, so autovacuum is
not keeping up (a held xmin horizon, a vacuum throttled or cancelled again and again), and only the
hard limit's thresholds, far away, would say so. The check needs one number from history for that:
the previous health review's age of the same database (dbcrew/roles/report/recording.py records it among the
run's vital signs). The crew stages it here before the run, as it stages a diagnosis's baseline, so
the check reads its workspace only.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel

from dbcrew.artifacts import declare
from dbcrew.logs import data_logger
from dbcrew.operators.registry import OperatorContext
from dbcrew.store import Store, StoreUnavailable, open_store
from dbcrew.vocabulary import Scenario
from dbcrew.workspace import Workspace

log = data_logger(__name__)

EARLIER_AGE_KEY = declare("earlier_xid_age")  # the workspace observation the wraparound check reads


class EarlierAge(BaseModel):
    """The reviewed database's datfrozenxid age at the target's previous health review."""

    reviewed_at: datetime
    age: int


def stage_earlier_age(
    workspace: Workspace, identity: str, store_url: str | None, store: Store | None = None
) -> None:
    """Put the latest earlier health review's XID age of `identity` into `workspace` (nothing when the
    store keeps none, or cannot be read: the check then judges this run alone, as it would the first)."""
    try:
        store = store or open_store(store_url)
        trends = store.trends(identity, Scenario.HEALTH, limit=1)
    except StoreUnavailable as exc:
        log.warning("no earlier transaction-ID age: %s", exc)
        return
    if not trends or trends[-1][1].oldest_xid_age is None:
        return
    record, vitals = trends[-1]
    earlier = EarlierAge(reviewed_at=record.started_at, age=vitals.oldest_xid_age or 0)
    workspace.put_observation(EARLIER_AGE_KEY, earlier.model_dump_json())


def earlier_age(ctx: OperatorContext) -> EarlierAge | None:
    """What `stage_earlier_age` staged for this run, or None."""
    body = ctx.workspace.observation(EARLIER_AGE_KEY)
    return None if body is None else EarlierAge.model_validate_json(body)
