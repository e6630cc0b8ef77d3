"""A target's review that no worker started (Prefect marks it Late) is told once to the target's alert URLs.

The Late state itself is Prefect's server's to give (its late-runs service, after its own delay);
this test gives it directly on the session's Prefect test server and checks dbcrew's part: the
supervisor of `dbcrew server` tells the target's URLs once, never twice, and ignores runs of
targets the inventory does not hold.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from prefect.client.orchestration import get_client
from prefect.states import Late

from dbcrew.inventory import parse_inventory
from flows.supervision import LateReviews
from flows.targets import review_target
from tests.webhooks import receiving_webhooks


def test_a_late_scheduled_review_is_told_once(prefect_server: str) -> None:
    due = datetime.now(UTC) - timedelta(minutes=2)
    with receiving_webhooks() as (hook, received):
        inventory = parse_inventory(
            {
                "targets": [
                    {
                        "name": "nightly",
                        "url": "postgresql://monitor@db.example.com/shop",
                        "alerts": [f"{hook}/nightly"],
                    }
                ]
            }
        )
        with get_client(sync_client=True) as client:
            for target in ("nightly", "not-in-the-inventory"):
                client.create_flow_run(
                    review_target, parameters={"target": target}, state=Late(scheduled_time=due)
                )
        supervisor = LateReviews(inventory)
        said = supervisor.check()
        assert said == [said[0]] and "nightly is late" in said[0], said
        assert supervisor.check() == [], "told once"
    (alert,) = received
    assert alert["path"] == "/nightly" and "nightly is late" in str(alert["title"])
    assert f"due {due:%Y-%m-%d %H:%M UTC}" in str(alert["message"]), alert
