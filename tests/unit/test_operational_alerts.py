"""Operational alerts (dbcrew/roles/report/operational.py): one alert type, one constructor per kind of news,
one way to send them; the words a user reads are those the watcher, the supervisor and the schedules sent before.

Delivered over Apprise's json:// to a real webhook receiver on 127.0.0.1 (tests/webhooks.py)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest

from dbcrew.inventory import Inventory, MissedSlots, ScheduleGroup, parse_inventory
from dbcrew.models.interval import PastInterval
from dbcrew.roles.report import operational
from dbcrew.vocabulary import Scenario
from tests.webhooks import receiving_webhooks

AT = datetime(2026, 11, 28, 3, 12, 26, tzinfo=UTC)


def inventory(alerts: dict[str, list[str]]) -> Inventory:
    return parse_inventory(
        {
            "targets": [
                {
                    "name": name,
                    "url": f"postgresql://dbcrew@db.internal:5432/{name}",
                    "alerts": urls,
                }
                for name, urls in alerts.items()
            ]
        }
    )


def test_each_kind_of_news_reads_as_it_did():
    opened = operational.gap_opened("orders", "dbcrew@db:5432/orders", AT, "connection refused")
    assert opened.title == "dbcrew: no samples of orders since 2026-11-28 03:12:26 UTC"
    assert opened.body == (
        "Target: dbcrew@db:5432/orders\nWhy: connection refused\nThe watcher tries again every round."
    )
    assert opened.failed
    closed = operational.gap_closed("orders", "dbcrew@db:5432/orders", AT, "connection refused")
    assert closed.title == "dbcrew: samples of orders resumed at 2026-11-28 03:12:26 UTC"
    assert (
        closed.body
        == "Target: dbcrew@db:5432/orders\nThe gap (stored in the series): connection refused"
    )
    assert not closed.failed
    interval = PastInterval(start=AT, end=datetime(2026, 11, 28, 3, 20, tzinfo=UTC))
    missed = operational.not_diagnosed("orders", interval, "watcher incident ...", "timed out")
    assert missed.title == "dbcrew: incident on orders at 2026-11-28 03:12 UTC, not diagnosed"
    assert missed.body == "watcher incident ...\nThe diagnosis run could not start: timed out"
    stopped = operational.watching_stopped(["orders", "billing"], "every-15s", "w@h:1", "it died")
    assert stopped.title == "dbcrew: the watching of orders, billing stopped on w@h:1"
    assert stopped.body.startswith("Group: every-15s\nWhy: it died\nThe pool's other watchers")
    failed = operational.watching_stopped(["orders"], "every-15s", "w@h:1", "failed: x", "failed")
    assert failed.title == "dbcrew: the watching of orders failed on w@h:1"
    group = ScheduleGroup(cron="0 2 * * *", scenario=Scenario.HEALTH, missed=MissedSlots.COLLAPSE)
    late = operational.slot_late(group, "slot-1", AT, "no worker polls", 2, "orders, billing")
    assert late.title == (
        f"dbcrew: the scheduled health reviews of {group.name} due 2026-11-28 03:12 UTC have not started"
    )
    assert late.body == (
        "Slot: run slot-1 of `0 2 * * *` (UTC)\nWhy: no worker polls\nTargets (2): orders, billing"
    )
    undated = operational.slot_late(group, "slot-1", None, "no worker polls", 2, "orders, billing")
    assert undated.title.endswith(f"reviews of {group.name} have not started")
    assert all(not a.findings for a in (opened, closed, missed, stopped, failed, late))


def test_told_once_to_each_url_its_targets_name(caplog: pytest.LogCaptureFixture):
    with receiving_webhooks() as (hook, received):
        entries = inventory(
            {
                "orders": [f"{hook}/ops", f"{hook}/orders"],
                "billing": [f"{hook}/ops"],
                "quiet": [],
            }
        ).targets
        alert = operational.watching_stopped([e.name for e in entries], "g", "w", "why")
        with caplog.at_level(logging.WARNING):
            operational.tell(alert, entries, logging.getLogger("test"))
    assert sorted(str(r["path"]) for r in received) == ["/ops", "/orders"]
    assert {str(r["title"]) for r in received} == {alert.title}
    assert [r.getMessage() for r in caplog.records if r.name == "test"] == [alert.title]


def test_a_url_that_cannot_be_told_is_logged_not_raised(caplog: pytest.LogCaptureFixture):
    entries = inventory({"orders": ["notascheme://nowhere/token-secret"]}).targets
    alert = operational.gap_opened("orders", "dbcrew@db:5432/orders", AT, "refused")
    with caplog.at_level(logging.WARNING):
        operational.tell(alert, entries, logging.getLogger("test"))
    said = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "test"]
    assert said[0] == ("WARNING", alert.title)
    assert said[1][0] == "ERROR" and "is not an Apprise URL" in said[1][1] and len(said) == 2
    assert "token-secret" not in said[1][1], "the URL's token is not logged"
    apprise_lines = [r.getMessage() for r in caplog.records if r.name.startswith("apprise")]
    assert any("notascheme://" in line for line in apprise_lines), "Apprise said why"
    assert not any("token-secret" in r.getMessage() for r in caplog.records), "nor by Apprise"
