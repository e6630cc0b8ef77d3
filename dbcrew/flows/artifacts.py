"""Reports, plans and monitor decisions as Prefect artifacts (keyed, so the UI keeps their history)."""

from __future__ import annotations

import re

from prefect.artifacts import create_markdown_artifact, create_table_artifact

from dbcrew.models import Report, Strategy
from dbcrew.models.plan import PlanEdit
from dbcrew.roles.crew.context import RunContext
from dbcrew.roles.report.reporter import inline_charts, render_markdown


def artifact_key(run: RunContext, kind: str) -> str:
    """Lowercase letters, digits and dashes only (Prefect's rule for keys)."""
    slug = re.sub(r"[^a-z0-9]+", "-", run.target.display.split("://", 1)[-1].lower()).strip("-")
    return f"dbcrew-{kind}-{slug}"[:100]


def post_strategy(run: RunContext, strategy: Strategy, title: str) -> None:
    lines = [
        f"# {title}",
        "",
        strategy.rationale,
        "",
        "| task | agent | operator | needs |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {t.id} | {t.agent} | {t.operator} | {', '.join(t.needs)} |" for t in strategy.tasks
    ]
    create_markdown_artifact("\n".join(lines), key=artifact_key(run, "plan"), description=title)


def post_edits(
    run: RunContext,
    edits: list[PlanEdit],
    rejected: list[str],
    title: str = "Re-plan (gap narrow)",
    kind: str = "replan",
) -> None:
    lines = [
        f"# {title}",
        "",
        "| edit | task | before -> after | source | why |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {e.kind.value} | {e.task_id or '-'} | {_cell(e.describe())} | {e.source} | {_cell(e.reason)} |"
        for e in edits
    ]
    if rejected:
        lines += [
            "",
            "Proposed edits refused by the gap-narrow rules or dropped as not improving the plan:",
            *(f"- {r}" for r in rejected),
        ]
    create_markdown_artifact("\n".join(lines), key=artifact_key(run, kind), description=title)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


OUTCOME = "outcome"
STATEMENT_CHARS = 300  # a table cell's share of a statement's text; the report has all of it


def shorten(text: str) -> str:
    """A statement on one line, cut to what a table cell shows."""
    flat = " ".join(text.split())
    return flat if len(flat) <= STATEMENT_CHARS else flat[: STATEMENT_CHARS - 1] + "…"


def outcome_row(report: Report) -> dict[str, object]:
    """One line a fleet summary reads back: the worst severity, the problems, and the problems new (or back,
    regressed) and resolved since the target's previous run (None: the run has no history to compare).
    Like alerts, it counts problems only: `info` findings come and go with the workload."""
    problems = [f for f in report.findings if f.is_problem]
    worst = min((f.severity for f in problems), key=lambda s: s.rank, default=None)
    history = report.history
    return {
        "target": report.target.display,
        "worst": worst.value if worst else "none",
        "problems": len(problems),
        "new": sum(i.is_problem for i in [*history.new, *history.regressed]) if history else None,
        "resolved": sum(i.is_problem for i in history.resolved) if history else None,
        "summary": report.summary,
    }


def post_alert(run: RunContext, outcome: str, detail: str) -> None:
    """What became of the run's alert (sent, or why not), next to its report in the UI; the detail (it names
    the target) in a code block, so the UI's markdown neither links nor formats it."""
    text = f"# Alert\n\n{outcome}\n\n```text\n{detail.replace('`', chr(39))}\n```"
    create_markdown_artifact(text, key=artifact_key(run, "alert"), description="the run's alert")


def post_report(run: RunContext, report: Report) -> None:
    create_table_artifact(
        [outcome_row(report)], key=artifact_key(run, OUTCOME), description="outcome of the review"
    )
    markdown = render_markdown(report, inline_charts(report, run.out_dir))
    create_markdown_artifact(
        markdown, key=artifact_key(run, "report"), description=f"{run.scenario} review"
    )
    rows: list[dict[str, object]] = [
        {
            "severity": f.severity.value,
            "code": f.code,
            "object": f.object,
            "statement": shorten(f.statement),
            "title": f.title,
            "recommendation": f.recommendation,
        }
        for f in report.findings
    ]
    create_table_artifact(
        rows
        or [
            {
                "severity": "-",
                "code": "-",
                "object": "-",
                "statement": "",
                "title": "no findings",
                "recommendation": "",
            }
        ],
        key=artifact_key(run, "findings"),
        description="findings",
    )
    if report.decisions:
        rows = [
            {
                "task": d.task_id,
                "error": d.error,
                "leaf": f"{d.branch}/{d.leaf}",
                "confidence": d.confidence,
                "remedy": d.remedy,
                "state": d.detail,
                "workers": "; ".join(d.state.workers) if d.state else "",
                "reflection": d.state.reflection if d.state else "",
            }
            for d in report.decisions
        ]
        create_table_artifact(
            rows, key=artifact_key(run, "monitor"), description="monitor decisions"
        )
    if report.edits:
        rows = [
            {
                "edit": e.kind.value,
                "task": e.task_id,
                "change": e.describe(),
                "source": e.source,
                "why": e.reason,
            }
            for e in report.edits
        ]
        create_table_artifact(
            rows, key=artifact_key(run, "edits"), description="every plan edit of the run"
        )
