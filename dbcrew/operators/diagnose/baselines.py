"""The target's latest quiet window, staged as a diagnosis's baseline when no --baseline file is given.

A health review keeps its sampled window as the target's baseline in the shared store when it was
quiet (dbcrew/roles/report/recording.py); before a diagnosis, the latest one is put where the diagnosis
looks for it (`steps.baseline_for`), so the abnormal metrics are judged against this target's own
normal behaviour. Without one, the diagnosis goes on and its report says it had no baseline.
"""

from __future__ import annotations

from dbcrew.logs import data_logger
from dbcrew.operators.diagnose.steps import STORED_BASELINE_KEY
from dbcrew.operators.window.evidence import WindowBaseline, WindowEvidence
from dbcrew.store import Store, StoreUnavailable, open_store
from dbcrew.workspace import Workspace

log = data_logger(__name__)


def stage_stored_baseline(
    workspace: Workspace, identity: str, store_url: str | None, store: Store | None = None
) -> None:
    """Put the latest baseline the store keeps for `identity` into `workspace` (nothing when it keeps none)."""
    try:
        store = store or open_store(store_url)
        latest = store.latest_baseline(identity)
    except StoreUnavailable as exc:  # the diagnosis goes on without a baseline; its report says so
        log.warning("no stored baseline: %s", exc)
        return
    if latest is None:
        return
    staged = WindowBaseline(
        window=WindowEvidence.model_validate_json(latest.window_json),
        source=f"the quiet window of health review {latest.run_id} ({latest.taken_at:%Y-%m-%d %H:%M} UTC)",
    )
    workspace.put_observation(STORED_BASELINE_KEY, staged.model_dump_json())
