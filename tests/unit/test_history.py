"""History comparison, quiet windows and alert texts as pure functions (the store itself: tests/integration)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from dbcrew.models import Finding, Report, Severity
from dbcrew.models.report import CoverageEntry, CoverageStatus, History, HistoryItem, TargetInfo
from dbcrew.operators.window.evidence import BlockedSession, WindowEvidence
from dbcrew.roles.report.alerts import alert_for, scrub
from dbcrew.roles.report.comparing import (
    RESOLVED_AFTER_ABSENT_RUNS,
    compare,
    history_of,
    judge_quiet,
    timeline,
)
from dbcrew.store import RunRecord, RunStatus, Sighting, StoredFinding, fingerprint, open_store
from dbcrew.vocabulary import FindingCode

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
    still_there = [f for f in previous if f not in (gone, unverified)]
    new, persisting, resolved, regressed, absent = compare(
        [kept, better, worse, back, fresh],
        [still_there, still_there, previous],  # gone and unverified: last seen three runs ago
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
    assert [i.code for i in resolved] == ["index_duplicate"]
    assert [i.code for i in absent] == [
        "idle_in_transaction"
    ]  # the session check did not run: not claimed resolved


def runs_of(presence: str, severities: str = "") -> list[list[StoredFinding]]:
    """One finding's runs: `x` where it was found, `.` where not; its severity per run from `severities`
    (w: warning, i: info; warning throughout without)."""
    levels = {"w": Severity.WARNING, "i": Severity.INFO}
    return [
        [stored("dead_tuples_high", "public.t", levels[(severities or "w" * len(presence))[n]])]
        if mark == "x"
        else []
        for n, mark in enumerate(presence)
    ]


def changes(runs: list[list[StoredFinding]]) -> list[str]:
    """The finding's change in each run after the first, run by run as the review compares them."""
    said = []
    sightings: dict[str, Sighting] = {}
    for n, current in enumerate(runs):
        recent = runs[max(0, n - RESOLVED_AFTER_ABSENT_RUNS) : n][::-1]
        at = DAY + timedelta(minutes=n)
        if n:
            lists = compare(current, recent, sightings, at, set())
            named = ["new", "persisting", "resolved", "regressed", "absent"]
            said.append(next((name for name, items in zip(named, lists) if items), "-"))
        for f in current:
            first = sightings[f.fingerprint].first_seen if f.fingerprint in sightings else at
            sightings[f.fingerprint] = Sighting(first_seen=first, last_seen=at)
    return said


def test_a_finding_that_flickers_persists_and_is_never_resolved_or_new_again():
    said = changes(runs_of("xx.x.xx..x.x"))
    assert "resolved" not in said and "new" not in said and "regressed" not in said, said
    assert said == [
        "persisting", "absent", "persisting", "absent", "persisting", "persisting",
        "absent", "absent", "persisting", "absent", "persisting",
    ]  # fmt: skip


def test_a_finding_absent_from_three_runs_in_a_row_is_resolved_once_and_regresses_when_back():
    assert RESOLVED_AFTER_ABSENT_RUNS == 3
    assert changes(runs_of("xx....x")) == [
        "persisting", "absent", "absent", "resolved", "-", "regressed",
    ]  # fmt: skip


def test_a_severity_hovering_at_its_threshold_is_no_regression_but_a_new_height_is():
    assert changes(runs_of("xxxxx", "wiwiw")) == ["persisting"] * 4
    assert changes(runs_of("xxxx", "iiiw")) == ["persisting", "persisting", "regressed"]


def recorded(tmp_path: Path, marks: str) -> list[History]:
    """The history each run's report gets, runs stored as a review stores them: `x` the finding seen,
    `.` not seen, `?` not seen by a check that could not judge its code (counters too young)."""
    store = open_store(str(tmp_path / "store.duckdb"))
    histories = []
    for n, mark in enumerate(marks):
        started = DAY + timedelta(minutes=n)
        run = RunRecord(
            run_id=f"r{n}",
            target=TARGET,
            display="postgresql://u@h/shop",
            scenario="health",
            started_at=started,
            status=RunStatus.COMPLETED,
        )
        unjudged = [FindingCode.DEAD_TUPLES_HIGH] if mark == "?" else []
        report = Report(
            run_id=run.run_id,
            target=TargetInfo(kind="postgresql", display=run.display),
            scenario="health",
            started_at=started,
            finished_at=started,
            brain="rules",
            coverage=[
                CoverageEntry(
                    check="check_vacuum_health", status=CoverageStatus.RAN, unjudged=unjudged
                )
            ],
        )
        current = runs_of(mark.replace("?", "."))[0]
        history, kept = history_of(store, TARGET, report, current)
        histories.append(history)
        store.record_run(run, current + kept)
    timeline_said = [
        (r.new, r.regressed, r.resolved) for r in timeline(store, TARGET, "health", 20)
    ]
    assert timeline_said == [(len(h.new), len(h.regressed), len(h.resolved)) for h in histories], (
        "`dbcrew history` (timeline) reads the runs as the reports did"
    )
    return histories


def said(history: History) -> str:
    named = ("new", "persisting", "resolved", "regressed", "absent", "not_judged")
    return next((name for name in named if getattr(history, name)), "-")


def test_the_history_command_counts_changes_as_the_report_does(tmp_path: Path):
    assert [said(h) for h in recorded(tmp_path, "xx.x...xx")] == [
        "new", "persisting", "absent", "persisting", "absent", "absent", "resolved", "regressed",
        "persisting",
    ]  # fmt: skip


def test_a_run_that_could_not_judge_counts_as_no_absence(tmp_path: Path):
    assert [said(h) for h in recorded(tmp_path, "x?...")] == [
        "new", "not_judged", "absent", "absent", "resolved",
    ]  # fmt: skip


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
