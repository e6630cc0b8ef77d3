"""History comparison, quiet windows and alert texts as pure functions (the store itself: tests/integration)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dbcrew.models import Finding, Report, Severity
from dbcrew.models.report import History, HistoryItem, TargetInfo
from dbcrew.store import Sighting, StoredFinding, fingerprint
from operators.diagnose.evidence import BlockedSession, WindowEvidence
from roles.report.alerts import alert_for, scrub
from roles.report.history import compare, judge_quiet

TARGET = "7311234567890123456/shop"
DAY = datetime(2026, 3, 1, tzinfo=UTC)


def stored(code: str, obj: str, severity: Severity) -> StoredFinding:
    return StoredFinding(
        fingerprint=fingerprint(TARGET, code, obj),
        code=code,
        object=obj,
        severity=severity,
        title=code,
    )


def test_fingerprint_is_the_code_and_object_on_one_target():
    assert fingerprint(TARGET, "index_unused", "public.a") == fingerprint(
        TARGET, "index_unused", "public.a"
    )
    assert (
        len(
            {
                fingerprint(TARGET, "index_unused", "public.a"),
                fingerprint(TARGET, "index_unused", "public.b"),
                fingerprint("other/shop", "index_unused", "public.a"),
                fingerprint(TARGET, "index_bloat", "public.a"),
            }
        )
        == 4
    )


def test_compare_sorts_every_finding_into_new_persisting_resolved_regressed_with_first_seen():
    kept = stored("index_unused", "public.kept_idx", Severity.WARNING)
    better = stored("dead_tuples_high", "public.t", Severity.WARNING)
    worse = stored("table_bloat", "public.t", Severity.CRITICAL)
    back = stored("table_without_primary_key", "public.log", Severity.WARNING)
    gone = stored("index_duplicate", "public.dup_idx", Severity.WARNING)
    unverified = stored("idle_in_transaction", "pid:7", Severity.WARNING)
    fresh = stored("sequence_exhaustion", "public.s", Severity.CRITICAL)
    previous = [
        kept,
        better.model_copy(update={"severity": Severity.CRITICAL}),
        worse.model_copy(update={"severity": Severity.WARNING}),
        gone,
        unverified,
    ]
    sightings = {
        f.fingerprint: Sighting(first_seen=DAY, last_seen=DAY + timedelta(days=1))
        for f in [*previous, back]
    }  # `back` was seen on day one, resolved on day two
    now = DAY + timedelta(days=2)
    new, persisting, resolved, regressed = compare(
        [kept, better, worse, back, fresh],
        previous,
        sightings,
        now,
        unverified={"idle_in_transaction"},
    )
    assert [(i.code, i.first_seen) for i in new] == [("sequence_exhaustion", now)]
    assert [i.code for i in persisting] == [
        "index_unused",
        "dead_tuples_high",
    ]  # milder is not a regression
    assert [(i.code, i.first_seen) for i in regressed] == [
        ("table_bloat", DAY),
        ("table_without_primary_key", DAY),
    ]
    assert [i.code for i in resolved] == [
        "index_duplicate"
    ]  # the session check did not run: not claimed resolved


def window(blocked: int = 0, rate: float = 10.0) -> WindowEvidence:
    return WindowEvidence(
        started_at=0,
        seconds=5,
        interval=0.5,
        series={"db.xact_commit": [rate + i % 2 for i in range(10)]},
        blocked=[
            BlockedSession(
                pid=i, blocker_pid=99, blocker_state="idle in transaction", blocker_xact_seconds=5
            )
            for i in range(blocked)
        ],
    )


def test_a_window_is_quiet_only_without_blocking_busy_findings_or_a_departure_from_the_last_baseline():
    assert judge_quiet(window(), [], None)[0]
    assert judge_quiet(window(), [], window())[0]
    assert judge_quiet(window(blocked=2), [], None) == (
        False,
        "2 sessions were blocked during the window",
    )
    busy = Finding(
        code="long_running_query", severity=Severity.WARNING, object="pid:5", title="long"
    )
    assert judge_quiet(window(), [busy], None) == (False, "the review found long_running_query")
    quiet, reason = judge_quiet(window(rate=500.0), [], window())
    assert not quiet and "db.xact_commit" in reason


def report(history: History | None, error: str = "") -> Report:
    return Report(
        run_id="r2",
        target=TargetInfo(kind="postgresql", display="postgresql://app@db:5432/shop"),
        scenario="health",
        started_at=DAY,
        finished_at=DAY,
        brain="rules",
        history=history,
        error=error,
        findings=[
            Finding(
                code="index_unused", severity=Severity.WARNING, object="public.a", title="unused"
            )
        ],
    )


def test_alert_tells_new_and_regressed_problems_only_and_every_failure_without_secrets():
    item = HistoryItem(
        code="index_unused", object="public.a", severity=Severity.WARNING, first_seen=DAY
    )
    info = HistoryItem(
        code="extension_missing", object="hypopg", severity=Severity.INFO, first_seen=DAY
    )
    assert alert_for(report(History(previous_run_id="r1", persisting=[item], new=[info]))) is None
    alert = alert_for(report(History(previous_run_id="r1", regressed=[item])))
    assert (
        alert is not None
        and alert.title == "dbcrew: 1 new problem (warning) on postgresql://app@db:5432/shop"
    )
    assert "- warning index_unused on public.a (first seen 2026-03-01 00:00 UTC)" in alert.body
    assert alert_for(report(None)) is not None  # no history known: every problem is news
    failed = alert_for(
        report(None, error="OperationalError: postgresql://app:pw1@db/shop password=pw2 refused")
    )
    assert (
        failed is not None
        and failed.failed
        and "pw1" not in failed.body
        and "pw2" not in failed.body
    )


def test_scrub_cuts_passwords_from_urls_and_pairs():
    assert (
        scrub("see postgresql://u:p%40ss@h/db and json://a:b@h/x")
        == "see postgresql://u@h/db and json://a@h/x"
    )
    assert scrub("host=h password=secret user=u") == "host=h password=*** user=u"
