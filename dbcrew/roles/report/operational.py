"""Operational alerts: what the pool itself tells the targets' alert URLs, as data, sent one way.

A run's own alert (new problems, a failed run, an incident's root causes) is made from its report
(dbcrew/roles/report/alerts.py `alert_for`). The others are about the watching and the schedules,
not about a review: a target whose samples stopped (a gap opened) or resumed (it closed), an
incident whose diagnosis could not start, a worker's watching that stopped or failed, a schedule's
slot that nothing started. Each is one constructor here returning the one alert type
(`ChannelAlert`), so its wording has one home, and each is sent by `tell`: logged as a warning,
then delivered once to every distinct URL the entries it concerns name. A delivery that fails is
logged as an error and goes no further: the alert is not the news, what it says is.
"""

from __future__ import annotations

import logging
from datetime import datetime

from dbcrew.inventory import ScheduleGroup, TargetEntry
from dbcrew.models.interval import PastInterval
from dbcrew.roles.report.alerts import AlertNotDelivered, ChannelAlert, send

Logger = logging.Logger | logging.LoggerAdapter[logging.Logger]


def gap_opened(target: str, display: str, at: datetime, why: str) -> ChannelAlert:
    """A watched target stopped answering: no samples of it since `at`."""
    return ChannelAlert(
        title=f"dbcrew: no samples of {target} since {at:%Y-%m-%d %H:%M:%S} UTC",
        body=f"Target: {display}\nWhy: {why}\nThe watcher tries again every round.",
        failed=True,
        findings=[],
    )


def gap_closed(target: str, display: str, at: datetime, why: str) -> ChannelAlert:
    """A watched target answers again: its samples resumed at `at` (`why`: what the gap was)."""
    return ChannelAlert(
        title=f"dbcrew: samples of {target} resumed at {at:%Y-%m-%d %H:%M:%S} UTC",
        body=f"Target: {display}\nThe gap (stored in the series): {why}",
        failed=False,
        findings=[],
    )


def not_diagnosed(target: str, interval: PastInterval, incident: str, why: str) -> ChannelAlert:
    """An incident of `target` whose diagnosis run could not start (`incident`: its alert text)."""
    return ChannelAlert(
        title=f"dbcrew: incident on {target} at {interval.start:%Y-%m-%d %H:%M} UTC, not diagnosed",
        body=f"{incident}\nThe diagnosis run could not start: {why}",
        failed=True,
        findings=[],
    )


def watching_stopped(
    targets: list[str], group: str, worker: str, why: str, how: str = "stopped"
) -> ChannelAlert:
    """A worker's share of a watching group ended (`how`: stopped, or failed) and nobody carries it on yet."""
    return ChannelAlert(
        title=f"dbcrew: the watching of {', '.join(targets)} {how} on {worker}",
        body=f"Group: {group}\nWhy: {why}\nThe pool's other watchers take its share over once its leases"
        " expire; the time nobody watched is a gap in each target's series.",
        failed=True,
        findings=[],
    )


def slot_late(
    group: ScheduleGroup, slot: str, due: datetime | None, why: str, count: int, names: str
) -> ChannelAlert:
    """A slot of `group`'s schedule (its run `slot`) that no worker started; `names`: some of its `count` targets."""
    return ChannelAlert(
        title=f"dbcrew: the scheduled {group.scenario.value} reviews of {group.name}"
        f"{f' due {due:%Y-%m-%d %H:%M UTC}' if due else ''} have not started",
        body=f"Slot: run {slot} of `{group.cron}` (UTC)\nWhy: {why}\nTargets ({count}): {names}",
        failed=True,
        findings=[],
    )


def tell(
    alert: ChannelAlert, entries: list[TargetEntry], log: Logger, what: str = "the alert"
) -> None:
    """Log `alert` as a warning, then deliver it once to each distinct alert URL of `entries` (a URL that two
    targets name hears it once); a delivery that fails is logged as an error."""
    log.warning("%s", alert.title)
    urls = sorted({url for entry in entries for url in entry.alerts})
    if not urls:
        return
    try:
        send(alert, urls, what)
    except AlertNotDelivered as exc:
        log.error("alert not delivered: %s", exc)
