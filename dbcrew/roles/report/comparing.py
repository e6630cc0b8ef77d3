"""Comparing runs: what changed since the target's previous runs, the timeline of its runs, the trends
chart, and whether a sampled window was quiet enough to be a baseline.

Reads of the store (and of the run's report): nothing here writes to it. dbcrew/roles/report/recording.py
stores a run and asks this module what changed; `dbcrew history` prints `timeline`.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from pydantic import BaseModel

from dbcrew.errors import OutNotWritable
from dbcrew.models import Finding, Report
from dbcrew.models.report import CoverageStatus, History, HistoryItem
from dbcrew.operators.paint import paint_trends
from dbcrew.operators.registry import catalogue
from dbcrew.operators.window.anomaly import abnormal_metrics
from dbcrew.operators.window.evidence import WindowEvidence
from dbcrew.store import RunRecord, RunStatus, Sighting, Store, StoredFinding, Vitals, fingerprint
from dbcrew.vocabulary import FindingCode

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


# -- the trends chart ---------------------------------------------------------------------------
def with_trends_chart(
    report: Report, points: list[tuple[datetime, Vitals]], out_dir: Path
) -> Report:
    """`report` with its trends chart, drawn into `out_dir` from `points` (one per stored run, oldest
    first); unchanged under two points (a trend needs two). A folder that refuses the chart raises
    OutNotWritable, as it would the report."""
    if len(points) < 2:
        return report
    chart = out_dir / TRENDS_CHART
    try:
        paint_trends(points, chart)
    except OSError as exc:  # the run's folder refused it, as it may the report
        raise OutNotWritable(chart, "trends chart", exc.strerror or type(exc).__name__) from exc
    return report.model_copy(
        update={
            "charts": [*report.charts, TRENDS_CHART],
            "captions": {
                **report.captions,
                TRENDS_CHART: TRENDS_CAPTION.format(n=len(points), scenario=report.scenario),
            },
        }
    )


# -- a window quiet enough to be a baseline ----------------------------------------------------
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
