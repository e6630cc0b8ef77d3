"""The tasker's summary: assemble report.json (schema_version 1) and render report.md and report.html."""

from __future__ import annotations

import base64
import json
import shutil
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dbcrew import templating
from dbcrew.errors import OutNotWritable
from dbcrew.models import Finding, Report
from dbcrew.models.catalogue import CatalogueEntry
from dbcrew.models.plan import EditKind, Strategy
from dbcrew.models.report import (
    CoverageEntry,
    CoverageStatus,
    DiagnosisSection,
    Hypothesis,
    LlmAdditions,
    LlmDiagnosis,
    RootCause,
    SkipCause,
    SkipKind,
    StatementChange,
    TargetInfo,
    TeamMember,
)
from dbcrew.operators.diagnose.attribution import attribute
from dbcrew.operators.diagnose.llm_experts import LLM_ADDITIONS
from dbcrew.operators.diagnose.steps import FACTS_KEY, JOINED_KEY, REVIEW_NOTES_KEY
from dbcrew.operators.registry import catalogue
from dbcrew.operators.statistics_age import just_started
from dbcrew.operators.window.evidence import WindowEvidence
from dbcrew.roles.crew.capabilities import failure_cause, privilege_notes, visibility_notes
from dbcrew.roles.crew.worker import TaskOutcome
from dbcrew.roles.report.deadline import deadline_coverage
from dbcrew.roles.report.markdown import md_block, md_cell, md_code, md_fence, md_text
from dbcrew.roles.report.outage import outage_of, producers_of, touched
from dbcrew.text.untrusted import model_text
from dbcrew.vocabulary import Category, Scenario, TaskStatus
from dbcrew.workspace import Workspace

if TYPE_CHECKING:  # the spine (dbcrew/roles/spine.py) writes reports through this module: no import cycle at run time
    from dbcrew.roles.crew.context import RunContext
    from dbcrew.roles.crew.run import ReviewResult

TEMPLATES = Path(__file__).with_name("templates")
# report.html.j2 is autoescaped by the kernel's one environment; report.md.j2 escapes through md_*
templating.add_templates(
    "report",
    TEMPLATES,
    {
        "md_text": md_text,
        "md_cell": md_cell,
        "md_code": md_code,
        "md_block": md_block,
        "md_fence": md_fence,
    },
)


def coverage_of(review: ReviewResult) -> list[CoverageEntry]:
    """One entry per check operator: what ran, what was skipped (and why), what failed; then the gaps
    the planner reported (a signal the alert names that nothing on this target judges)."""
    planned = {entry.check: entry for entry in review.init.coverage}
    notes = visibility_notes(review.init.brief)
    outcomes = review.result.state.outcomes
    ops = catalogue()
    entries = []
    for op in ops:
        if op.category is not Category.CHECKS:
            continue
        if op.name in planned:
            entries.append(planned[op.name])
            continue
        outcome = outcomes.get(op.name)
        removed = next(
            (e for e in review.edits if e.kind is EditKind.REMOVE and e.task_id == op.name), None
        )
        if outcome is None and removed is not None:
            entries.append(
                CoverageEntry.of(
                    op.name,
                    CoverageStatus.SKIPPED,
                    SkipCause(kind=SkipKind.REMOVED, detail=removed.reason),
                )
            )
        elif outcome is None:
            entries.append(
                CoverageEntry.of(
                    op.name, CoverageStatus.SKIPPED, SkipCause(kind=SkipKind.NOT_PLANNED)
                )
            )
        elif outcome.status is TaskStatus.DONE:
            seen = "; ".join(
                dict.fromkeys(
                    p
                    for p in (
                        outcome.observation.partial if outcome.observation else "",
                        *inherited_partials(op, ops, outcomes),
                    )
                    if p
                )
            )
            reason = "; ".join(
                r for r in (notes.get(op.name, ""), f"partial: {seen}" if seen else "") if r
            )
            entries.append(
                CoverageEntry(
                    check=op.name,
                    status=CoverageStatus.RAN,
                    reason=reason,
                    unjudged=outcome.observation.unjudged if outcome.observation else [],
                )
            )
        else:
            status = (
                CoverageStatus.FAILED
                if outcome.status is TaskStatus.FAILED
                else CoverageStatus.SKIPPED
            )
            entries.append(
                CoverageEntry.of(
                    op.name,
                    status,
                    failure_cause(op.name, outcomes, review.init.brief.current_user),
                )
            )
    # What the planner found no operator for (a signal the alert names): not a check, still a gap.
    names = {op.name for op in ops}
    return entries + [e for e in review.init.coverage if e.check not in names]


def inherited_partials(
    check: CatalogueEntry, ops: list[CatalogueEntry], outcomes: dict[str, TaskOutcome]
) -> list[str]:
    """What the producers of a check's inputs could not see: the check saw no more than they did."""
    return [
        o.observation.partial
        for name in producers_of(check, ops)
        if (o := outcomes.get(name)) and o.observation and o.observation.partial
    ]


def findings_of(review: ReviewResult) -> list[Finding]:
    found = list(review.init.findings)
    for outcome in review.result.state.outcomes.values():
        if outcome.observation is not None:
            found.extend(outcome.observation.findings)
    return sorted(found, key=lambda f: (f.severity.rank, f.code, f.object))


def team_of(strategy: Strategy, outcomes: dict[str, TaskOutcome] | None = None) -> list[TeamMember]:
    """The plan's agents with their tasks, why each task is on the team and what each cost where it ran
    (an agent with no task is left out)."""
    members = []
    ran = {
        task_id: o
        for task_id, o in (outcomes or {}).items()
        if o.status in (TaskStatus.DONE, TaskStatus.FAILED)
    }
    for agent in strategy.team:
        tasks = [t for t in strategy.tasks if t.agent == agent.name]
        if tasks:
            members.append(
                TeamMember(
                    agent=agent.name,
                    role=agent.role.value,
                    tasks=[t.id for t in tasks],
                    why=[t.why for t in tasks],
                    seconds=[o.seconds if (o := ran.get(t.id)) else None for t in tasks],
                    cpu_seconds=[o.cpu_seconds if (o := ran.get(t.id)) else None for t in tasks],
                )
            )
    return members


def build_report(run: RunContext, review: ReviewResult) -> Report:
    """The report of a finished run: the rules' summary (a model's own beside it, as sanitized data),
    then what the brain spent and who answered."""
    coverage = coverage_of(review)
    facts = anomaly_facts(run) if run.scenario is Scenario.DIAGNOSE else {}
    if (
        run.scenario is Scenario.DIAGNOSE
    ):  # a diagnosis plans no health checks; a past interval's says what it could not see
        coverage = [
            c for c in coverage if c.cause is None or c.cause.kind is not SkipKind.NOT_PLANNED
        ] + [CoverageEntry.model_validate(c) for c in facts.get("coverage", [])]
    findings = findings_of(review)
    brain = run.shared_brain
    # In the cross review's order (by the time each explains, the work before its resource): a sort by
    # confidence here put a cause explaining a third of the time before one explaining most of it.
    root_causes = [
        rc
        for o in review.result.state.outcomes.values()
        if o.observation
        for rc in o.observation.root_causes
    ]
    llm_diagnosis: LlmDiagnosis | None = None
    hypotheses: list[Hypothesis] = []
    added = llm_additions(run, review)
    if added is not None:
        # The LLM experts' step (after the cross review, with an LLM brain) stored the causes as they stand
        # once the experts had their say; its LLM-only causes' findings came with its outcome.
        root_causes, hypotheses, llm_diagnosis = (
            added.root_causes,
            added.hypotheses,
            added.diagnosis,
        )
    stood_down = [
        task_id
        for task_id, o in review.result.state.outcomes.items()
        if o.cause is not None and o.cause.kind is SkipKind.DEADLINE
    ]
    coverage = [*coverage, deadline_coverage(run, stood_down)]
    summary, model_summary = brain.summaries(run.scenario, findings, coverage, compared_with(facts))
    unconfirmed = (
        "The model's unconfirmed hypotheses, not root causes (the measurements do not support them): "
        + ", ".join(h.code for h in hypotheses)
        + "."
        if hypotheses
        else ""
    )
    summary = " ".join(s for s in (summary, unconfirmed, started_note(run, review)) if s)
    # Not the run's `partial`: what stood down (charts, a model's additions) judged nothing, and a partial
    # run never resolves a finding in history; the coverage line says what stood down.
    partial = review.partial_reason
    unreachable = max(
        (o.unreachable_seconds for o in review.result.state.outcomes.values()), default=0.0
    )
    outage = outage_of(run, review, gone=unreachable > 0) if run.interval is None else None
    if outage is not None:
        # A review that waited out an outage and went on did not see what a full one sees.
        interrupted = f"incomplete: {outage.note}"
        summary = f"{interrupted}. {summary}"
        partial = "; ".join(p for p in (interrupted, partial) if p)
        coverage = touched(coverage, outage, catalogue())
    if unreachable:
        # Checks that never ran find nothing: "0 problems" alone would read as a clean bill of health.
        gone = f"incomplete: target unreachable for {unreachable:.0f} s"
        summary, partial = f"{gone}. {summary}", "; ".join(p for p in (gone, partial) if p)
    charts = [
        c
        for o in review.result.state.outcomes.values()
        if o.observation
        for c in o.observation.charts
    ]
    captions = {
        c: text
        for o in review.result.state.outcomes.values()
        if o.observation
        for c, text in o.observation.captions.items()
    }
    return Report(
        run_id=run.run_id,
        target=TargetInfo(
            kind=run.target.kind,
            display=run.target.display,
            server_version=review.init.brief.server_version,
        ),
        scenario=run.scenario,
        interval=run.interval,
        started_at=run.started_at,
        finished_at=datetime.now(UTC),
        brain=brain.answered_by(),
        coverage=coverage,
        findings=findings,
        phases=review.phases,
        plan=review.result.strategy.rationale,
        team=team_of(review.result.strategy, review.result.state.outcomes),
        llm=brain.usage.model_copy(),
        summary=summary,
        model_summary=model_text(model_summary),  # whichever brain wrote it: data, bounded
        decisions=review.result.state.decisions,
        charts=sorted(charts),
        captions=captions,
        edits=review.edits,
        declined=review.rejected,
        unfixed_before=unfixed_before(review),
        ablations=run.settings.ablations.off(),
        partial=partial,
        root_causes=root_causes,
        hypotheses=hypotheses,
        notes=privilege_notes(review.init.brief),
        diagnosis=diagnosis_section(run, review, root_causes, facts)
        if run.scenario is Scenario.DIAGNOSE
        else None,
        llm_diagnosis=llm_diagnosis,
        link=run.link,
    )


def llm_additions(run: RunContext, review: ReviewResult) -> LlmAdditions | None:
    """What the LLM experts' step added (dbcrew/operators/diagnose/llm_experts.py), read from the workspace
    when the step completed; None when no step ran or it did not complete (stood down before the deadline,
    or left unfinished when the run stopped waiting for it: what it might still write is not read)."""
    completed = any(
        o.status is TaskStatus.DONE and o.observation and LLM_ADDITIONS in o.observation.artifacts
        for o in review.result.state.outcomes.values()
    )
    body = Workspace(run.workspace_path).observation(LLM_ADDITIONS) if completed else None
    return None if body is None else LlmAdditions.model_validate_json(body)


def started_note(run: RunContext, review: ReviewResult) -> str:
    """What the reader must know of a server that had just started (a cold cache, its checks partial),
    or "": a live run's only, a past interval's probe says nothing of the server then."""
    warm_up = run.settings.thresholds.server_warm_up_seconds
    up = None if run.interval is not None else just_started(review.init.brief, warm_up)
    if up is None:
        return ""
    cold = f"The server started {up:.0f} s before the review: its cache was still filling"
    if run.scenario is Scenario.DIAGNOSE:  # no health check ran; the reads may be the cache warming
        return f"{cold}, and reads from disk may be its warming up rather than the workload's."
    return f"{cold}, so the checks judged on it are partial (see the coverage)."


def anomaly_facts(run: RunContext) -> dict[str, Any]:
    """The diagnosis's facts as the sampler stored them ({} where nothing was sampled), read once: a
    window's facts are large, and a diagnosis of a saturated host pays for every parse."""
    body = Workspace(run.workspace_path).observation(FACTS_KEY)
    facts: dict[str, Any] = {} if body is None else json.loads(body)
    return facts


def compared_with(facts: dict[str, Any]) -> str:
    """What the diagnosis compared its window with, as a clause of the summary ("" where nothing was
    sampled): the baseline and how many metrics left it, or no baseline at all."""
    if not facts:
        return ""
    source = facts.get("baseline_source", "")
    if not source:
        return (
            "the window was compared with no baseline (no --baseline file and no quiet window kept"
            " from an earlier health review of this target), only with the experts' fixed thresholds"
        )
    left = len(facts.get("abnormal", []))
    return f"the window was compared with the baseline ({source}), " + (
        "and no metric left it" if not left else f"which {left} metrics left"
    )


def diagnosis_section(
    run: RunContext, review: ReviewResult, causes: list[RootCause], facts: dict[str, Any]
) -> DiagnosisSection:
    """Title, anomaly description and diagnosis process, from the facts and the experts' outcomes."""
    workspace = Workspace(run.workspace_path)
    notes = workspace.observation(REVIEW_NOTES_KEY) or "[]"
    abnormal = [
        f"{m['name']} {m['baseline_median']:.4g} -> {m['window_median']:.4g}"
        for m in facts.get("abnormal", [])
    ]
    window = facts.get("window", {})
    alert = run.settings.alert or "no alert text"
    title = (
        f"Diagnosis: {', '.join(c.code for c in causes[:2])}"
        if causes
        else "Diagnosis: no root cause found"
    )
    span = (
        f"the past interval {run.interval.describe()}, from "
        + (f"Prometheus at {run.prometheus.address}" if run.prometheus else "the watcher's samples")
        if run.interval
        else f"a {window.get('seconds', 0):.0f}s window"
    )
    source = facts.get("baseline_source", "")
    description = (
        f"{alert}. Over {span}, {len(abnormal)} metrics left the baseline"
        + (f" (strongest: {abnormal[0]})" if abnormal else "")
        + f". {baseline_note(source)}"
        if source
        else f"{alert}. Over {span}: {baseline_note(source)}"  # no baseline for a metric to leave
    )
    outcomes = review.result.state.outcomes
    process, experts = [], []
    for task_id, outcome in outcomes.items():
        if outcome.observation is None:
            continue
        if task_id.startswith("expert_") and "stood down" not in outcome.observation.summary:
            experts.append(task_id.removeprefix("expert_"))
        process.append(f"{task_id}: {outcome.observation.summary}")
    joined = workspace.observation(JOINED_KEY)
    experts += [e for e in (json.loads(joined) if joined else []) if e not in experts]
    process += [
        f"cross review ({n['reviewer']}) on {n['code']}: {n['verdict']}" for n in json.loads(notes)
    ]
    return DiagnosisSection(
        title=title,
        anomaly_description=description,
        abnormal_metrics=abnormal,
        changed_statements=[StatementChange.model_validate(c) for c in facts.get("changed", [])],
        experts=experts,
        process=process,
        time_attribution=attribute(WindowEvidence.model_validate(window)) if window else None,
    )


def baseline_note(source: str) -> str:
    """Where the baseline came from, or what its absence costs the diagnosis."""
    if source:
        return f"Baseline: {source}."
    return (
        "No baseline (no --baseline file and no quiet window kept from an earlier health review of this target):"
        " no metric can be called abnormal, so every expert was called in and no cause was checked against the"
        " target's normal behaviour; expect lower confidence and more candidates."
    )


def render_markdown(report: Report, chart_src: dict[str, str]) -> str:
    return templating.render("report/report.md.j2", {"report": report, "chart_src": chart_src})


def inline_charts(report: Report, run_dir: Path) -> dict[str, str]:
    return {
        c: "data:image/png;base64," + base64.b64encode((run_dir / c).read_bytes()).decode()
        for c in report.charts
    }


def prune_reports(
    root: Path, keep_days: float, max_bytes: int, now: float | None = None
) -> list[Path]:
    """Remove the run directories under `root` (at any depth) whose report is older than `keep_days`, then
    the oldest ones while they hold more than `max_bytes` together; returns them, oldest first.

    Only directories holding a report.json are touched, so a reports folder shared with other files
    loses nothing else; the newest run always stays, even alone past `max_bytes`.
    """
    cutoff = (now if now is not None else time.time()) - keep_days * 86_400
    runs = sorted(
        (report.stat().st_mtime, report.parent)
        for report in (root.rglob("report.json") if root.is_dir() else [])
        if report.parent != root  # a report written into the root itself is no run directory of it
    )
    removed = [folder for mtime, folder in runs if mtime < cutoff]
    kept = [(folder, _bytes_under(folder)) for mtime, folder in runs if mtime >= cutoff]
    held = sum(size for _, size in kept)
    for folder, size in kept[:-1]:
        if held <= max_bytes:
            break
        removed.append(folder)
        held -= size
    for folder in removed:
        shutil.rmtree(folder)
    return removed


# A run's end walks every run folder under the reports root (their report.json, then their files' sizes): with a
# nightly fleet of 1,000 kept 14 days that is 14,000 folders, walked by each of the fleet's reviews, and the walk
# grew with the night (a worker's CPU profiled during bench scale's fleet). Retention is kept in days and a size
# cap: a walk every few minutes per root and process keeps both, a few minutes' reports late at most.
PRUNE_EVERY_S = 300.0
_pruned_at: dict[Path, float] = {}
_pruned_lock = threading.Lock()


def prune_reports_due(
    root: Path, keep_days: float, max_bytes: int, every: float = PRUNE_EVERY_S
) -> list[Path]:
    """`prune_reports`, when this process has not walked `root` in the last `every` seconds; else nothing."""
    now = time.monotonic()
    with _pruned_lock:
        last = _pruned_at.get(root)
        if last is not None and now - last < every:
            return []
        _pruned_at[root] = now
    return prune_reports(root, keep_days, max_bytes)


def _bytes_under(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def report_path(run_dir: Path) -> Path:
    return run_dir / "report.json"


REPORT_FILES = ("report.json", "report.md", "report.html")


def write_report(report: Report, run_dir: Path) -> None:
    """Write report.json, report.md (charts by path) and report.html (charts inline); OutNotWritable when the
    disk refuses one, with none of the three left behind: a truncated report.json would pass for a report."""
    texts = {
        "report.json": lambda: report.model_dump_json(indent=2),
        "report.md": lambda: render_markdown(report, {c: c for c in report.charts}),
        "report.html": lambda: templating.render(
            "report/report.html.j2",
            {"report": report, "chart_src": inline_charts(report, run_dir)},
        ),
    }
    path = run_dir
    begun: list[Path] = []  # a write that fails may leave its file cut short
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        for name in REPORT_FILES:
            path = run_dir / name
            begun.append(path)
            path.write_text(texts[name]())
    except OSError as exc:
        for written in begun:
            if written.is_file():
                written.unlink()
        raise OutNotWritable(path, "report", exc.strerror or type(exc).__name__) from exc


def unfixed_before(review: ReviewResult) -> list[str]:
    """The errors earlier runs left unfixed on the target, each with how its operator ended this time."""
    ended: dict[str, str] = {}
    for outcome in review.result.state.outcomes.values():
        ended[outcome.operator] = outcome.status.value
    return [
        f"{known.describe()}. This run: "
        + (
            f"{known.operator} {ended[known.operator]}"
            if known.operator in ended
            else f"{known.operator} not run"
        )
        for known in review.init.unfixed
    ]
