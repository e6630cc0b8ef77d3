"""Alerts through Apprise URLs (Slack, e-mail, a webhook's json:// or jsons://, ...): who is told, and what.

A run alerts when it failed, or when it found problems (critical or warning) that are new or
regressed since the target's previous run; persisting problems were told before and stay quiet.
A diagnosis of a past interval (an incident the watcher detected, or an Alertmanager alert) always
alerts: what happened (the alert text that started it), when, and the root causes found, or that
none rose above the reporting confidence.
A report without history (no previous run known) alerts on every problem. The message carries the
target's password-free display, the run's link (the Prefect UI page when known) and the findings;
any credentials that slipped into an error text are cut out before sending.
The pool's own news (a gap in the watching, a watcher stopped, a late slot) is told by
dbcrew/roles/report/operational.py, in this module's one alert type.
"""

from __future__ import annotations

import logging
import re

import apprise
from pydantic import BaseModel

from dbcrew.errors import DbcrewError
from dbcrew.models import Report
from dbcrew.models.report import HistoryItem

MAX_LISTED = 20
_CREDENTIALS = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^:/@\s]+):[^@\s]+@", re.IGNORECASE)
_PASSWORD_PARAM = re.compile(r"(password\s*=\s*)\S+", re.IGNORECASE)


_URL_TAIL = re.compile(r"\b([a-z][a-z0-9+.-]*)://\S+", re.IGNORECASE)


class _UrlsCut(logging.Filter):
    """Apprise logs a URL it cannot load whole ("Unparseable URL notascheme://host/TOKEN": its masking knows only
    the schemes it supports), and an alert URL's path carries its token: each URL in Apprise's lines keeps only its
    scheme."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = _URL_TAIL.sub(r"\1://...", record.getMessage())
        record.args = None
        return True


logging.getLogger("apprise").addFilter(_UrlsCut())


class AlertNotDelivered(DbcrewError, RuntimeError):
    """Apprise could not deliver to every URL (the review itself is not affected)."""


class ChannelAlert(BaseModel):
    """The message a run sends to the Apprise channels (a worker's error alert is models.crew.Alert)."""

    title: str
    body: str
    failed: bool
    findings: list[HistoryItem]


def scrub(text: str) -> str:
    """Cut passwords out of URLs and `password=` pairs in free text (error messages)."""
    return _PASSWORD_PARAM.sub(r"\1***", _CREDENTIALS.sub(r"\1@", text))


def news_of(report: Report) -> list[HistoryItem]:
    """The problems worth telling: new or regressed critical and warning findings (all of them without history)."""
    if report.history is None:
        return [
            HistoryItem(
                code=f.code, object=f.object, severity=f.severity, first_seen=report.started_at
            )
            for f in report.findings
            if f.is_problem
        ]
    items = [*report.history.new, *report.history.regressed]
    return sorted(
        (i for i in items if i.is_problem), key=lambda i: (i.severity.rank, i.code, i.object)
    )


def alert_for(report: Report) -> ChannelAlert | None:
    """The alert this run deserves, or None when it has nothing new to say."""
    where = (
        f"Target: {report.target.display}\nRun: {report.link or report.run_id} ({report.scenario},"
        f" started {report.started_at:%Y-%m-%d %H:%M UTC})"
    )
    if report.error:
        return ChannelAlert(
            title=f"dbcrew: the {report.scenario} review of {report.target.display} failed",
            body=scrub(f"{where}\nError: {report.error}"),
            failed=True,
            findings=[],
        )
    if report.interval is not None:
        return interval_alert(report, where)
    news = news_of(report)
    if not news:
        return None
    worst = news[0].severity.value
    lines = [
        f"- {i.severity.value} {i.code} on {i.object} (first seen {i.first_seen:%Y-%m-%d %H:%M UTC})"
        for i in news[:MAX_LISTED]
    ]
    if len(news) > MAX_LISTED:
        lines.append(f"- ... and {len(news) - MAX_LISTED} more (see the report)")
    title = f"dbcrew: {len(news)} new problem{'s' if len(news) > 1 else ''} ({worst}) on {report.target.display}"
    return ChannelAlert(
        title=title,
        body=scrub("\n".join([where, "New or regressed since the previous run:", *lines])),
        failed=False,
        findings=news,
    )


def interval_alert(report: Report, where: str) -> ChannelAlert:
    """A past interval's diagnosis: when, what was seen, and the root causes (ranked as the report ranks them)."""
    assert report.interval is not None
    interval = report.interval
    causes = [f"- {rc.code} (confidence {rc.confidence:.2f})" for rc in report.root_causes]
    named = ", ".join(rc.code for rc in report.root_causes[:3]) or "no root cause found"
    lines = [
        where,
        f"Interval: {interval.describe()}",
        *([report.diagnosis.anomaly_description] if report.diagnosis else []),
        "Root causes:" if causes else "No root cause rose above the reporting confidence.",
        *causes[:MAX_LISTED],
    ]
    return ChannelAlert(
        title=f"dbcrew: incident on {report.target.display} at {interval.start:%Y-%m-%d %H:%M} UTC: {named}",
        body=scrub("\n".join(lines)),
        failed=False,
        findings=[],
    )


def notify(report: Report, urls: list[str]) -> ChannelAlert | None:
    """Send this run's alert to every Apprise URL; the alert sent, or None when there was nothing to send.

    AlertNotDelivered when a URL is not one Apprise knows or a delivery failed: the caller shows it."""
    alert = alert_for(report)
    if alert is None or not urls:
        return None
    send(alert, urls, f"the alert for run {report.run_id}")
    return alert


def send(alert: ChannelAlert, urls: list[str], what: str = "the alert") -> None:
    """Deliver `alert` to every Apprise URL; AlertNotDelivered (naming the URL's scheme only) when one fails."""
    targets = apprise.Apprise()
    for url in urls:
        if not targets.add(url):
            # the URL's path and query carry its tokens (Slack, Telegram, ...): name the scheme only
            raise AlertNotDelivered(
                f"alert URL #{urls.index(url) + 1} ({url.partition(':')[0]}://...) is not an Apprise URL"
            )
    kind = apprise.NotifyType.FAILURE if alert.failed else apprise.NotifyType.WARNING
    if not targets.notify(title=alert.title, body=alert.body, notify_type=kind):
        raise AlertNotDelivered(f"{what} was not delivered to every one of {len(urls)} URLs")
