"""History across runs, from the shared store: what changed since last time, trends, baselines.

`reviewed(run, review)` is the one hook of the review path: it runs the review, stores the run
(findings with fingerprints, vital signs), compares it with the target's previous run of the same
scenario and the runs before it (new, persisting, absent, resolved, regressed, each with its
first-seen date; resolved only after RESOLVED_AFTER_ABSENT_RUNS runs without it), draws the trends
chart, keeps a health review's sampled window as the target's baseline when it was quiet, and
writes the report. A review that raises is stored as a failed run, and the error goes on; a store
that cannot be used costs the report its history, not the report; a report that cannot be written
is stored as a failed run. (A diagnosis reads the latest baseline back through
operators/diagnose/baselines.py.)
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel

from dbcrew.errors import OutNotWritable
from dbcrew.models import Brief, Finding, Report
from dbcrew.models.report import (
    CoverageStatus,
    History,
    HistoryItem,
    HistoryUnavailable,
    TargetInfo,
)
from dbcrew.store import (
    Baseline,
    RunRecord,
    RunStatus,
    Sighting,
    Store,
    StoredFinding,
    StoreUnavailable,
    Vitals,
    fingerprint,
    open_store,
)
from dbcrew.targets.postgres import first_line
from dbcrew.vocabulary import FindingCode, Scenario
from dbcrew.workspace import Workspace
from operators.diagnose.steps import HEALTH_WINDOW_KEY
from operators.paint import paint_trends
from operators.registry import catalogue
from operators.window.anomaly import abnormal_metrics
from operators.window.evidence import WindowEvidence
from roles.crew.memory import target_identity
from roles.report.reporter import write_report

if TYPE_CHECKING:  # the crew stages baselines through this module: no import cycle at run time
    from roles.crew.run import RunContext

log = logging.getLogger(__name__)
TREND_RUNS = 30
TRENDS_CHART = "charts/trends.png"
TRENDS_CAPTION = (
    "Trends over this target's last {n} {scenario} reviews, one point per run (x: run start, UTC): findings by"
    " severity, cache hit ratio, dead tuples, the database's transaction ID age and its size."
)
# Findings that say the window was not a normal period: it must not become what "normal" means.
BUSY_CODES = (
    FindingCode.BLOCKING_LOCKS,
    FindingCode.LONG_RUNNING_QUERY,
    FindingCode.CONNECTIONS_SATURATION,
)


# -- what one run leaves in the store -----------------------------------------------------------
def brief_of(run: RunContext) -> Brief | None:
    """The probe's brief from the run's workspace (None when the run failed before the probe)."""
    if not run.workspace_path.exists():
        return None
    rows = Workspace(run.workspace_path).query("SELECT body FROM observations WHERE key = 'brief'")
    return Brief.model_validate_json(rows[0]["body"]) if rows else None


def identity_for(run: RunContext, store: Store) -> str:
    """The target's identity: from the probe, else the one last recorded for its display, else the display."""
    brief = brief_of(run)
    if brief is not None:
        return target_identity(run.target, brief)
    return store.identity_of(run.target.display) or run.target.display


def _one(workspace: Workspace, table: str, sql: str, params: list[object] | None = None) -> object:
    """One value from a table the review may not have collected (a skipped collector): None then."""
    if not workspace.has(table):
        return None
    rows = workspace.query(sql, params)
    return next(iter(rows[0].values())) if rows else None


def vitals_of(run: RunContext, report: Report) -> Vitals:
    """Vital signs from the run's workspace: cache hit ratio over the window, dead tuples, XID age, size."""
    counts = {
        s: sum(f.severity.value == s for f in report.findings)
        for s in ("critical", "warning", "info")
    }
    brief = brief_of(run)
    if brief is None:
        return Vitals(**counts)
    workspace = Workspace(run.workspace_path)
    hits = (
        workspace.query(
            "SELECT blks_hit, blks_read, blks_hit_delta, blks_read_delta FROM database_stats"
        )
        if workspace.has("database_stats")
        else []
    )
    ratio = None
    if hits:
        row = hits[0]
        hit, read = (
            (row["blks_hit_delta"], row["blks_read_delta"])
            if row["blks_hit_delta"] + row["blks_read_delta"] > 0
            else (row["blks_hit"], row["blks_read"])
        )  # an idle window: the ratio since the statistics began
        ratio = hit / (hit + read) if hit + read > 0 else None
    dead = _one(workspace, "table_stats", "SELECT sum(n_dead_tup) FROM table_stats")
    xid = _one(
        workspace,
        "wraparound",
        "SELECT max(xid_age) FROM wraparound WHERE scope = 'database' AND name = ?",
        [brief.database],
    )
    return Vitals(
        cache_hit_ratio=ratio,
        dead_tuples=None if dead is None else int(dead),  # type: ignore[call-overload]
        oldest_xid_age=None if xid is None else int(xid),  # type: ignore[call-overload]
        database_bytes=brief.database_size_bytes,
        **counts,
    )


def stored_findings(identity: str, findings: list[Finding]) -> list[StoredFinding]:
    return [
        StoredFinding(
            fingerprint=fingerprint(identity, f.code, f.object),
            code=f.code,
            object=f.object,
            severity=f.severity,
            title=f.title,
        )
        for f in findings
    ]


def unverified_codes(report: Report) -> set[str]:
    """Codes this run could not judge: those of the checks that did not run, and those a check that
    ran could not judge (counters too young, a restart, a privilege): their earlier findings cannot
    be called resolved."""
    not_ran = {c.check for c in report.coverage if c.status is not CoverageStatus.RAN}
    unjudged = {code for c in report.coverage for code in c.unjudged}
    return unjudged | {
        code for entry in catalogue() if entry.name in not_ran for code in entry.checks
    }


# -- what changed ------------------------------------------------------------------------------
# A finding is called resolved only once it has been absent from this many runs in a row. A
# condition that hovers at its threshold (a ratio near its limit, a statement near the top five)
# is absent from some runs by chance: with one absence enough, a finding absent from a run with
# probability p flips between resolved and back with probability p every run; three in a row cut
# that to p**3 (1 in 8 runs for p = 1/2, 1 in 125 for p = 1/5), at the cost of calling a real fix
# resolved two runs later. Until then it is "absent": said as such, never as persisting.
RESOLVED_AFTER_ABSENT_RUNS = 3


def runs_since_seen(fp: str, recent: list[list[StoredFinding]]) -> int | None:
    """How many of the recent runs (the previous one first) came after the last one that saw `fp`, plus one;
    None when none of them saw it."""
    for age, findings in enumerate(recent, start=1):
        if any(f.fingerprint == fp for f in findings):
            return age
    return None


def worst_recent(fp: str, recent: list[list[StoredFinding]]) -> StoredFinding | None:
    """`fp` at its worst severity over the recent runs: a severity hovering at a threshold is no regression."""
    seen = [f for findings in recent for f in findings if f.fingerprint == fp]
    return min(seen, key=lambda f: f.severity.rank) if seen else None


def compare(
    current: list[StoredFinding],
    recent: list[list[StoredFinding]],
    sightings: dict[str, Sighting],
    now: datetime,
    unverified: set[str],
) -> tuple[list[HistoryItem], ...]:
    """(new, persisting, resolved, regressed, absent) of `current` against the recent runs' findings
    (`recent`: the last RESOLVED_AFTER_ABSENT_RUNS runs, the previous one first) and all earlier sightings.

    new: never seen before. persisting: seen within the recent runs (absent from fewer than
    RESOLVED_AFTER_ABSENT_RUNS in a row, so never called resolved), not worse than at its worst
    there. regressed: worse than that, or back after it had been called resolved. absent: seen in
    a recent run, not in this one, not yet absent long enough to be resolved. resolved: absent from
    exactly RESOLVED_AFTER_ABSENT_RUNS runs in a row now (only when the check that finds it ran).
    """

    def item(f: StoredFinding) -> HistoryItem:
        seen = sightings.get(f.fingerprint)
        return HistoryItem(
            code=f.code,
            object=f.object,
            severity=f.severity,
            first_seen=seen.first_seen if seen else now,
        )

    new: list[HistoryItem] = []
    persisting: list[HistoryItem] = []
    regressed: list[HistoryItem] = []
    for finding in current:
        worst = worst_recent(finding.fingerprint, recent)
        if worst is None:
            (regressed if finding.fingerprint in sightings else new).append(
                item(finding)
            )  # back after being resolved
        elif finding.severity.rank < worst.severity.rank:
            regressed.append(item(finding))
        else:
            persisting.append(item(finding))
    seen_now = {f.fingerprint for f in current}
    resolved: list[HistoryItem] = []
    absent: list[HistoryItem] = []
    gone = {
        f.fingerprint: f for findings in reversed(recent) for f in findings
    }  # latest sighting wins
    for fp, f in gone.items():
        if fp in seen_now:
            continue
        if runs_since_seen(fp, recent) == RESOLVED_AFTER_ABSENT_RUNS and f.code not in unverified:
            resolved.append(item(f))
        else:
            absent.append(item(f))
    return new, persisting, resolved, regressed, absent


def carried(
    current: list[StoredFinding], earlier: list[StoredFinding], unverified: set[str]
) -> list[StoredFinding]:
    """The previous run's findings this run could not judge (their code is unverified) and did not
    see: their last known state stands, so they are stored with this run, and neither this run nor
    the next calls them resolved, or regressed when they are seen again."""
    seen_now = {f.fingerprint for f in current}
    return [f for f in earlier if f.fingerprint not in seen_now and f.code in unverified]


def history_of(
    store: Store, identity: str, report: Report, current: list[StoredFinding]
) -> tuple[History, list[StoredFinding]]:
    """What changed since the previous runs, and the earlier findings this run carries (`carried`)."""
    runs = store.previous_runs(
        identity, report.scenario, report.started_at, RESOLVED_AFTER_ABSENT_RUNS
    )
    if not runs:
        return History(
            new=[
                HistoryItem(
                    code=f.code, object=f.object, severity=f.severity, first_seen=report.started_at
                )
                for f in current
            ]
        ), []
    recent = [store.findings(run.run_id) for run in runs]
    sightings = store.sightings(identity, report.scenario, report.started_at)
    unverified = unverified_codes(report)
    kept = carried(current, recent[0], unverified)
    new, persisting, resolved, regressed, absent = compare(
        current, recent, sightings, report.started_at, unverified
    )
    carried_now = {f.fingerprint for f in kept}
    not_judged = [
        HistoryItem(
            code=f.code,
            object=f.object,
            severity=f.severity,
            first_seen=seen.first_seen
            if (seen := sightings.get(f.fingerprint))
            else runs[0].started_at,
        )
        for f in kept
    ]
    history = History(
        previous_run_id=runs[0].run_id,
        previous_started_at=runs[0].started_at,
        new=new,
        persisting=persisting,
        resolved=resolved,
        regressed=regressed,
        absent=[i for i in absent if fingerprint(identity, i.code, i.object) not in carried_now],
        not_judged=not_judged,
    )
    return history, kept


# -- baselines ---------------------------------------------------------------------------------
def judge_quiet(
    window: WindowEvidence, findings: list[Finding], previous: WindowEvidence | None
) -> tuple[bool, str]:
    """Quiet: no session blocked, no busy-workload finding, and (when one exists) nothing left the last baseline."""
    if window.blocked:
        return False, f"{len(window.blocked)} sessions were blocked during the window"
    busy = sorted({f.code for f in findings if f.is_problem and f.code in BUSY_CODES})
    if busy:
        return False, f"the review found {', '.join(busy)}"
    if previous is not None:
        moved = abnormal_metrics(window, previous)
        if moved:
            return (
                False,
                f"{len(moved)} metrics left the previous baseline ({', '.join(m.name for m in moved[:3])})",
            )
    return True, "no blocked session, no busy-workload finding" + (
        ", nothing left the previous baseline" if previous else ""
    )


def keep_baseline(store: Store, identity: str, run: RunContext, report: Report) -> Baseline | None:
    """Store a health review's sampled window, marked quiet or not; None when the review sampled none."""
    rows = Workspace(run.workspace_path).query(
        "SELECT body FROM observations WHERE key = ?", [HEALTH_WINDOW_KEY]
    )
    if not rows:
        return None
    window = WindowEvidence.model_validate_json(rows[0]["body"])
    latest = store.latest_baseline(identity)
    quiet, reason = judge_quiet(
        window,
        report.findings,
        WindowEvidence.model_validate_json(latest.window_json) if latest else None,
    )
    baseline = Baseline(
        target=identity,
        run_id=report.run_id,
        taken_at=report.started_at,
        quiet=quiet,
        reason=reason,
        window_json=rows[0]["body"],
    )
    store.save_baseline(baseline)
    return baseline


# -- the hook ------------------------------------------------------------------------------------
def failed_report(run: RunContext, error: BaseException) -> Report:
    """The report of a run that raised: no findings, the error in one line (for the store and alerts)."""
    return Report(
        run_id=run.run_id,
        target=TargetInfo(kind=run.target.kind, display=run.target.display),
        scenario=run.scenario,
        started_at=run.started_at,
        finished_at=datetime.now(UTC),
        brain=run.brain,
        link=run.link,
        error=f"{type(error).__name__}: {first_line(error)}",
        summary=f"The review failed: {type(error).__name__}: {first_line(error)}",
    )


def record_history(run: RunContext, report: Report, store: Store | None = None) -> Report:
    """Store the run; the report with its history and trends chart (a failed run is stored, nothing compared)."""
    store = store or open_store(run.settings.store_url)
    with store.transaction():  # one connection for the run's reads and writes, committed together
        identity = identity_for(run, store)
        status = (
            RunStatus.FAILED
            if report.error
            else RunStatus.PARTIAL
            if report.partial
            else RunStatus.COMPLETED
        )
        record = RunRecord(
            run_id=report.run_id,
            target=identity,
            display=report.target.display,
            scenario=report.scenario,
            started_at=report.started_at,
            finished_at=report.finished_at,
            status=status,
            report=str((run.out_dir / "report.json").resolve()) if not report.error else "",
            link=report.link,
            error=report.error,
        )
        if report.error:
            store.record_run(record, [])
            return report
        current = stored_findings(identity, report.findings)
        history, kept = history_of(store, identity, report, current)
        store.record_run(record, current + kept, vitals_of(run, report))
        if report.scenario != Scenario.HEALTH:
            return report.model_copy(
                update={"history": history}
            )  # a diagnosis neither samples a baseline nor measures vitals
        keep_baseline(store, identity, run, report)
        points = [(r.started_at, v) for r, v in store.trends(identity, report.scenario, TREND_RUNS)]
    update: dict[str, object] = {"history": history}
    if len(points) >= 2:  # drawn after the commit: the store is not held while matplotlib draws
        chart = run.out_dir / TRENDS_CHART
        try:
            paint_trends(points, chart)
        except OSError as exc:  # the run's folder refused it, as it may the report
            raise OutNotWritable(chart, "trends chart", exc.strerror or type(exc).__name__) from exc
        update["charts"] = [*report.charts, TRENDS_CHART]
        update["captions"] = {
            **report.captions,
            TRENDS_CHART: TRENDS_CAPTION.format(n=len(points), scenario=report.scenario),
        }
    return report.model_copy(update=update)


def reviewed(run: RunContext, review: Callable[[], Report], store: Store | None = None) -> Report:
    """Run the review, record it in the target's history, write the report into the run's folder.

    Each fault costs only what it touches. A review that raises is recorded as failed. A store that
    cannot be used costs the history: the report is written, saying why it has none. A report that
    cannot be written (OutNotWritable) leaves the run recorded as failed, not as completed with a
    report that does not exist."""
    try:
        report = review()
    except Exception as exc:
        record_failure(run, exc, store)
        raise
    try:
        try:
            report = record_history(
                run, report, store
            )  # its trends chart goes into the run's folder
        except StoreUnavailable as exc:
            log.warning("%s", exc)
            report = report.model_copy(
                update={
                    "history_unavailable": HistoryUnavailable(store=exc.location, reason=exc.reason)
                }
            )
        write_report(report, run.out_dir)
    except OutNotWritable as exc:
        if report.history_unavailable is None:
            record_failure(run, exc, store)
        raise
    return report


def record_failure(run: RunContext, error: Exception, store: Store | None = None) -> None:
    """Record the run as failed with `error`; a store that cannot be used says so on the error, which goes on."""
    try:
        record_history(run, failed_report(run, error), store)
    except StoreUnavailable as exc:
        error.add_note(f"not recorded in the history: {exc}")
        log.warning("run %s not recorded in the history: %s", run.run_id, exc)


# -- the timeline `dbcrew history` prints --------------------------------------------------------
class RunChanges(BaseModel):
    """One stored run with its vital signs and its counts of change against the run before it."""

    run: RunRecord
    vitals: Vitals | None
    new: int = 0
    regressed: int = 0
    resolved: int = 0


def timeline(store: Store, identity: str, scenario: str, limit: int) -> list[RunChanges]:
    """The target's last `limit` runs of `scenario`, oldest first, each compared with the run before it."""
    vitals = {r.run_id: v for r, v in store.trends(identity, scenario)}
    sightings: dict[str, Sighting] = {}
    recent: list[list[StoredFinding]] = []  # the findings of the last runs, the latest first
    rows = []
    for run in (r for r in store.runs(identity) if r.scenario == scenario):
        if run.status is RunStatus.FAILED:
            rows.append(RunChanges(run=run, vitals=None))
            continue
        current = store.findings(run.run_id)
        new, _, resolved, regressed, _ = compare(current, recent, sightings, run.started_at, set())
        rows.append(
            RunChanges(
                run=run,
                vitals=vitals.get(run.run_id),
                new=len(new),
                regressed=len(regressed),
                resolved=len(resolved),
            )
        )
        for finding in current:
            seen = sightings.get(finding.fingerprint)
            sightings[finding.fingerprint] = Sighting(
                first_seen=seen.first_seen if seen else run.started_at, last_seen=run.started_at
            )
        recent = [current, *recent][:RESOLVED_AFTER_ABSENT_RUNS]
    return rows[-limit:]
