"""One Jinja environment renders the prompts and the report: HTML autoescaped, prompts and Markdown
not, and an undefined name an error in both (every section of a report still renders)."""

from __future__ import annotations

import ast
import tomllib
from datetime import UTC, datetime
from pathlib import Path

from dbcrew.models import Finding, Report, Severity
from dbcrew.models.plan import EditKind, PlanEdit
from dbcrew.models.report import (
    CoverageEntry,
    CoverageStatus,
    Decision,
    DiagnosisSection,
    GlobalStateRecord,
    History,
    HistoryItem,
    LlmDiagnosis,
    RootCause,
    TargetInfo,
    TimeAttribution,
    TimeShare,
)
from dbcrew.prompts import render
from dbcrew.roles.report.reporter import write_report
from dbcrew.templating import autoescaped

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PRODUCT = PYPROJECT["tool"]["importlinter"]["root_packages"]
NOW = datetime.now(UTC)


def called_name(node: ast.Call) -> str:
    return node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")


def imports_jinja(tree: ast.Module) -> bool:
    """Whether a module imports jinja2 (an `Environment` elsewhere is another library's, e.g. pydantic-settings')."""
    return any(
        (isinstance(node, ast.Import) and any(a.name.startswith("jinja2") for a in node.names))
        or (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("jinja2"))
        for node in ast.walk(tree)
    )


def test_the_product_builds_one_jinja_environment() -> None:
    trees = {
        path: ast.parse(path.read_text())
        for package in PRODUCT
        for path in sorted((ROOT / package).rglob("*.py"))
    }
    built = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path, tree in trees.items()
        if imports_jinja(tree)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and called_name(node) == "Environment"
    ]
    assert [place.split(":")[0] for place in built] == ["dbcrew/templating.py"], built


def test_html_is_autoescaped_and_prompts_and_markdown_are_not() -> None:
    assert autoescaped("report/report.html.j2")
    assert not any(map(autoescaped, ["report/report.md.j2", "dbcrew/prompts/ask_react.j2", None]))
    prompt = render("ask_task.j2", {"ran": None, "missing": "", "question": "is a < b & c?"})
    assert "is a < b & c?" in prompt  # the model reads the question as written, not &lt; entities


def full_report() -> Report:
    """A report with every optional section filled, so each branch of both templates renders."""
    item = HistoryItem(
        code="index_unused", object="public.i|x", severity=Severity.WARNING, first_seen=NOW
    )
    findings = [
        Finding(
            code="slow_query",
            severity=Severity.CRITICAL,
            object="queryid:1",
            title="slow",
            evidence={"query": "select 1"},
            fix_sql="create index",
        ),
        Finding(code="index_unused", severity=Severity.INFO, object="public.i", title="i"),
    ]
    causes = [
        RootCause(
            code="lock_contention",
            confidence=0.8,
            time_share=0.62,
            solution="shorter transactions",
            evidence={"waits": 3, "knowledge": ["doc"]},
        ),
        RootCause(code="cpu_contention", confidence=0.5),
    ]
    paused = GlobalStateRecord(workers=["w1: done"], reflection="the grant is missing")
    decisions = [
        Decision(
            task_id="t1",
            error="e",
            leaf="l",
            branch="b",
            confidence=0.5,
            remedy="retry",
            detail="d",
            state=paused,
        ),
        Decision(task_id="t2", error="e", leaf="l", branch="b", confidence=0.5, remedy="skip"),
    ]
    return Report(
        run_id="r1",
        target=TargetInfo(kind="postgres", display="pg://h/db", server_version="16"),
        scenario="diagnose",
        started_at=NOW,
        finished_at=NOW,
        brain="rules",
        summary="sum",
        findings=findings,
        root_causes=causes,
        decisions=decisions,
        coverage=[CoverageEntry(check="check_sessions", status=CoverageStatus.FAILED, reason="x")],
        edits=[PlanEdit(kind=EditKind.REMOVE, task_id="t1"), PlanEdit(kind=EditKind.INSERT)],
        declined=["x"],
        ablations=["monitor"],
        partial="re-plan budget spent",
        notes=["superuser"],
        charts=["a.png", "b.png"],
        captions={"a.png": "waits"},
        diagnosis=DiagnosisSection(
            title="Diagnosis",
            anomaly_description="slow",
            abnormal_metrics=["m"],
            experts=["cpu"],
            process=["cpu: busy"],
            time_attribution=TimeAttribution(
                samples=100,
                by_wait_class=[TimeShare(label="Lock", samples=62, share=0.62)],
                by_statement=[TimeShare(label="UPDATE t SET a = $1 | b", samples=70, share=0.7)],
            ),
        ),
        llm_diagnosis=LlmDiagnosis(
            experts=["cpu"],
            corrections={"unknown_tool": 1},
            accepted=["a"],
            rejected=["r"],
            fallbacks=["f"],
            stopped="calls",
        ),
        history=History(
            previous_run_id="r0",
            previous_started_at=NOW,
            new=[item],
            regressed=[item],
            resolved=[item],
            persisting=[item],
        ),
    )


def test_every_report_section_renders_with_undefined_names_as_errors(tmp_path: Path) -> None:
    full = full_report()
    sections = {
        "diagnosis": DiagnosisSection(title="D", anomaly_description="-"),
        "history": History(),
        "llm_diagnosis": LlmDiagnosis(),
        "root_causes": [],
        "findings": [],
        "charts": [],
    }
    empty = full.model_copy(update=sections)  # each section there, with nothing in it
    bare = Report(
        run_id="r2",
        target=TargetInfo(kind="postgres", display="d"),
        scenario="health",
        started_at=NOW,
        finished_at=NOW,
        brain="rules",
    )
    for n, report in enumerate((full, empty, bare)):
        (tmp_path / str(n)).mkdir()
        for chart in report.charts:
            (tmp_path / str(n) / chart).write_bytes(b"png")
        write_report(report, tmp_path / str(n))  # StrictUndefined: a name the templates miss raises
    assert "select 1" in (tmp_path / "0" / "report.md").read_text()
    assert "lock_contention` (0.80, 62% of the time)" in (tmp_path / "0" / "report.md").read_text()
    assert (
        "| statement | `UPDATE t SET a = $1 \\| b` | 70% | 70 |"
        in (tmp_path / "0" / "report.md").read_text()
    )
    assert "the grant is missing" in (tmp_path / "0" / "report.html").read_text()
