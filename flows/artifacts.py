"""Reports, plans and monitor decisions as Prefect artifacts (keyed, so the UI keeps their history)."""

from __future__ import annotations

import re

from prefect.artifacts import create_markdown_artifact, create_table_artifact

from dbcrew.models import Report, Strategy
from roles.replanner import PlanEdit
from roles.reporter import inline_charts, render_markdown
from roles.crew import RunContext


def artifact_key(run: RunContext, kind: str) -> str:
    """Lowercase letters, digits and dashes only (Prefect's rule for keys)."""
    slug = re.sub(r"[^a-z0-9]+", "-", run.target.display.split("://", 1)[-1].lower()).strip("-")
    return f"dbcrew-{kind}-{slug}"[:100]


def post_strategy(run: RunContext, strategy: Strategy, title: str) -> None:
    lines = [f"# {title}", "", strategy.rationale, "", "| task | agent | operator | needs |", "|---|---|---|---|"]
    lines += [f"| {t.id} | {t.agent} | {t.operator} | {', '.join(t.needs)} |" for t in strategy.tasks]
    create_markdown_artifact("\n".join(lines), key=artifact_key(run, "plan"), description=title)


def post_edits(run: RunContext, edits: list[PlanEdit], regenerated: list[str]) -> None:
    lines = ["# Re-plan (gap narrow)", "", "| edit | task | detail |", "|---|---|---|"]
    lines += [f"| {e.kind} | {e.task_id} | {e.detail} |" for e in edits]
    if regenerated:
        lines += ["", f"Differences regenerated to respect the gap-narrow rules: {', '.join(regenerated)}"]
    create_markdown_artifact("\n".join(lines), key=artifact_key(run, "replan"), description="plan edits")


def post_report(run: RunContext, report: Report) -> None:
    markdown = render_markdown(report, inline_charts(report, run.out_dir))
    create_markdown_artifact(markdown, key=artifact_key(run, "report"), description=f"{run.scenario} review")
    rows = [{"severity": f.severity.value, "code": f.code, "object": f.object, "title": f.title,
             "recommendation": f.recommendation} for f in report.findings]
    create_table_artifact(rows or [{"severity": "-", "code": "-", "object": "-", "title": "no findings", "recommendation": ""}],
                          key=artifact_key(run, "findings"), description="findings")
    if report.decisions:
        create_table_artifact([d.model_dump() for d in report.decisions], key=artifact_key(run, "monitor"),
                              description="monitor decisions")
