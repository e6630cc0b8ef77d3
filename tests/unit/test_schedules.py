"""Schedules that do not grow with the fleet: which targets share a deployment, and which slots are worth an alert.

The grouping is the inventory's (dbcrew.inventory.ScheduleGroup); the late policy is
dbcrew/flows/schedule_health.py's `slot_trouble`, judged here on typed values, without a Prefect server
(tests/integration/test_late_reviews.py and tests/e2e/test_schedules.py give it real runs and queues).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dbcrew.errors import UsageError
from dbcrew.flows.schedule_health import SLOT_GRACE, QueuePolls, SlotStage, slot_trouble
from dbcrew.inventory import Inventory, MissedSlots, load_inventory, parse_inventory
from dbcrew.vocabulary import Scenario


def fleet(*entries: dict[str, object]) -> Inventory:
    return parse_inventory(
        {
            "targets": [
                {"name": f"db{i}", "url": f"postgresql://monitor@db{i}.example.com/app", **e}
                for i, e in enumerate(entries)
            ]
        }
    )


def test_a_thousand_targets_on_one_cron_are_one_schedule_group():
    inventory = fleet(*({"schedule": "0 2 * * *", "window": 5 + i % 7} for i in range(1000)))
    groups = inventory.schedule_groups()
    assert len(groups) == 1
    ((group, entries),) = groups.items()
    assert (group.cron, group.scenario, group.missed) == (
        "0 2 * * *",
        Scenario.HEALTH,
        MissedSlots.COLLAPSE,
    )
    assert group.name == "health-0-2-x-x-x"
    assert [e.name for e in entries] == inventory.names(), "every target, in the inventory's order"
    assert inventory.on_schedule("health-0-2-x-x-x") == (group, entries)


def test_targets_split_by_what_shapes_the_scheduled_run_only():
    """Cron, scenario and `missed:` make a group; a target's window, thresholds, alerts, tags and password do
    not (its review reads them from its own entry). Whitespace in a cron is not another schedule."""
    inventory = fleet(
        {"schedule": "0 2 * * *", "alerts": ["json://a.example/x"], "tags": ["eu"]},
        {"schedule": "0  2 * * *", "window": 60, "password": {"env": "B_PASSWORD"}},
        {"schedule": "0 2 * * *", "scenario": "diagnose"},
        {"schedule": "0 2 * * *", "missed": "skip"},
        {"schedule": "*/15 * * * *"},
        {},  # no schedule: on demand and in the fleet only
    )
    named = {
        g.name: [e.name for e in entries] for g, entries in inventory.schedule_groups().items()
    }
    assert named == {
        "health-0-2-x-x-x": ["db0", "db1"],
        "diagnose-0-2-x-x-x": ["db2"],
        "health-0-2-x-x-x-skip": ["db3"],
        "health-x-15-x-x-x-x": ["db4"],
    }
    assert inventory.targets[5].schedule_group is None


def test_two_schedules_that_would_share_a_deployment_name_are_refused(tmp_path: Path):
    path = tmp_path / "targets.yaml"
    path.write_text(
        "targets:\n"
        "  - {name: a, url: postgresql://m@a.example/a, schedule: '0,30 * * * *'}\n"
        "  - {name: b, url: postgresql://m@b.example/b, schedule: '0-30 * * * *'}\n"
    )
    with pytest.raises(UsageError, match=r"would share the deployment name 'health-0-30-x-x-x-x'"):
        load_inventory(path)


def test_a_schedule_nobody_is_on_any_more_is_a_usage_error():
    with pytest.raises(UsageError, match=r"no target .* on the schedule 'health-0-4-x-x-x'"):
        fleet({"schedule": "0 2 * * *"}).on_schedule("health-0-4-x-x-x")


NOW = datetime(2026, 11, 28, 3, 0, tzinfo=UTC)
LONG_AGO = NOW - SLOT_GRACE * 10


def queue(name: str, polled: datetime | None, paused: bool = False) -> QueuePolls:
    return QueuePolls("dbcrew", name, polled, paused)


POLLED = queue("fleet", NOW - timedelta(seconds=3)), queue("reviews", NOW - timedelta(seconds=3))


def test_reviews_queued_behind_the_pools_limit_are_not_late():
    """A slot that started hours ago, its reviews still queued behind the limit, with workers polling: fine."""
    assert slot_trouble(SlotStage.STARTED, LONG_AGO, *POLLED, NOW) is None


def test_a_slot_is_judged_only_after_its_grace():
    unpolled = queue("fleet", None), queue("reviews", None)
    within = NOW - SLOT_GRACE
    assert slot_trouble(SlotStage.UNSTARTED, within, *unpolled, NOW) is None
    assert slot_trouble(SlotStage.STARTED, within, *unpolled, NOW) is None
    assert slot_trouble(SlotStage.UNSTARTED, within - timedelta(seconds=1), *unpolled, NOW)


def test_a_slot_no_worker_started_says_why():
    stale = NOW - SLOT_GRACE - timedelta(seconds=1)
    cases = {
        queue("fleet", None): "no worker has ever polled the fleet queue of work pool dbcrew",
        queue("fleet", stale): "no worker has polled the fleet queue of work pool dbcrew since "
        f"{stale:%Y-%m-%d %H:%M:%S UTC}",
        queue("fleet", NOW, paused=True): "the fleet queue of work pool dbcrew is paused",
        POLLED[0]: "a worker polls the fleet queue of work pool dbcrew but took none of it",
    }
    for fleet_queue, why in cases.items():
        said = slot_trouble(SlotStage.UNSTARTED, LONG_AGO, fleet_queue, POLLED[1], NOW)
        assert said == "its run did not start within 60 s: " + why


def test_a_started_slot_whose_reviews_no_worker_polls_is_told():
    said = slot_trouble(SlotStage.STARTED, LONG_AGO, POLLED[0], queue("reviews", None), NOW)
    assert (
        said == "its reviews wait: no worker has ever polled the reviews queue of work pool dbcrew"
    )


def test_an_ended_slot_is_not_judged():
    assert (
        slot_trouble(SlotStage.OTHER, LONG_AGO, queue("fleet", None), queue("reviews", None), NOW)
        is None
    )
