"""Recording a run in the shared store: its findings with fingerprints, its vital signs, a health
review's sampled window as the target's baseline, and a failed run as failed.

`record_history` stores one run and returns its report with what changed since the target's
previous runs of the same scenario and its trends chart (both dbcrew/roles/report/comparing.py's). It
raises what goes wrong (StoreUnavailable, OutNotWritable): what each fault costs a review is the
spine's to say (dbcrew/roles/spine.py). (A diagnosis reads the latest baseline back through
dbcrew/operators/diagnose/baselines.py.)
"""

from __future__ import annotations

from datetime import UTC, datetime

from dbcrew.artifacts import Artifact
from dbcrew.models import Finding, Report
from dbcrew.models.report import TargetInfo
from dbcrew.operators.collect.catalog import WRAPAROUND
from dbcrew.operators.diagnose.steps import HEALTH_WINDOW_KEY
from dbcrew.operators.stat_views import DATABASE_STATS, TABLE_STATS
from dbcrew.operators.window.evidence import WindowEvidence
from dbcrew.roles.crew.context import RunContext, brief_of, identity_for
from dbcrew.roles.report.comparing import TREND_RUNS, history_of, judge_quiet, with_trends_chart
from dbcrew.store import (
    Baseline,
    RunRecord,
    RunStatus,
    Store,
    StoredFinding,
    Vitals,
    fingerprint,
    open_store,
)
from dbcrew.targets.postgres import first_line
from dbcrew.vocabulary import Scenario
from dbcrew.workspace import Workspace


# -- what one run leaves in the store -----------------------------------------------------------
def _one(
    workspace: Workspace, table: Artifact, sql: str, params: list[object] | None = None
) -> object:
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
        if workspace.has(DATABASE_STATS.table)
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
    dead = _one(workspace, TABLE_STATS.table, "SELECT sum(n_dead_tup) FROM table_stats")
    xid = _one(
        workspace,
        WRAPAROUND,
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


# -- baselines ---------------------------------------------------------------------------------
def keep_baseline(store: Store, identity: str, run: RunContext, report: Report) -> Baseline | None:
    """Store a health review's sampled window, marked quiet or not; None when the review sampled none."""
    body = Workspace(run.workspace_path).observation(HEALTH_WINDOW_KEY)
    if body is None:
        return None
    window = WindowEvidence.model_validate_json(body)
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
        window_json=body,
    )
    store.save_baseline(baseline)
    return baseline


# -- the record of one run ----------------------------------------------------------------------
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
    return with_trends_chart(
        report.model_copy(update={"history": history}), points, run.out_dir
    )  # drawn after the commit: the store is not held while matplotlib draws
