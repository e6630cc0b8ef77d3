"""What `dbcrew server` does with the pool's watching shares (dbcrew/flows/supervision.py), on the session's Prefect test server.

A share run still Running whose worker's heartbeat in the store lapsed (a worker that died on another machine) is
marked CRASHED and told once; a share run that FAILED is told once per streak of its group's failures; a run whose
holder heartbeats is left alone. The runs are made directly (no worker runs them): dbcrew's part is the judging.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from prefect.client.orchestration import get_client
from prefect.client.schemas.objects import StateType
from prefect.states import Failed, Running

from dbcrew.flows import supervision
from dbcrew.flows.supervision import WatchSupervisor
from dbcrew.flows.watching import watch_targets
from dbcrew.inventory import parse_inventory
from dbcrew.roles.sharing import holder_name
from dbcrew.store import open_store
from dbcrew.store.leases import LeaseBook, lapsed_holders
from tests.webhooks import receiving_webhooks

GROUP = "every-1s"


def test_dead_and_failed_shares_are_told_once_and_a_live_one_is_left_alone(
    prefect_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(supervision, "LAPSED_MIN", timedelta(0))
    backend = open_store().backend
    dead, alive, failing = "dead@elsewhere:1", "alive@elsewhere:2", "failing@elsewhere:3"
    LeaseBook(backend, holder_name(dead, GROUP), GROUP, timedelta(seconds=1)).heartbeat()
    live = LeaseBook(backend, holder_name(alive, GROUP), GROUP, timedelta(minutes=5))
    live.heartbeat()
    with receiving_webhooks() as (hook, received):
        inventory = parse_inventory(
            {
                "targets": [
                    {
                        "name": "calm",
                        "url": "postgresql://monitor@db.example.com/calm",
                        "watch": {"every": 1},
                        "alerts": [f"{hook}/calm"],
                    }
                ]
            }
        )
        watching = WatchSupervisor(inventory)
        with get_client(sync_client=True) as client:
            runs = {
                worker: client.create_flow_run(
                    watch_targets,
                    parameters={"group": GROUP, "worker": worker},
                    state=Running(),
                    tags=["dbcrew", "watch"],
                )
                for worker in (dead, alive, failing)
            }
            client.set_flow_run_state(runs[failing].id, Failed(message="boom"), force=True)
        deadline = time.monotonic() + 60
        while not lapsed_holders(backend, timedelta(seconds=2)) and time.monotonic() < deadline:
            time.sleep(0.5)  # the dead holder's heartbeat two rounds past its expiry
        said = watching.check()
        assert watching.check() == [], "each told once"
        with get_client(sync_client=True) as client:
            states = {w: client.read_flow_run(r.id).state_type for w, r in runs.items()}
        deadline = time.monotonic() + 30
        while len(received) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
    assert states == {
        dead: StateType.CRASHED,
        alive: StateType.RUNNING,
        failing: StateType.FAILED,
    }
    assert len(said) == 2 and any("crashed (its worker stopped renewing" in s for s in said), said
    assert any(f"failed on {failing}: boom" in s for s in said), said
    titles = sorted(str(a["title"]) for a in received)
    assert titles == [
        f"dbcrew: the watching of calm failed on {failing}",
        f"dbcrew: the watching of calm stopped on {dead}",
    ]
