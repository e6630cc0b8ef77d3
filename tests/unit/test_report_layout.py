"""The report leads with problems: info findings come after them, one row per code, and out of the
history table, in report.md and report.html alike."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from dbcrew.models import Finding, Report, Severity
from dbcrew.models.report import History, HistoryItem, TargetInfo
from dbcrew.roles.report.reporter import write_report

NOW = datetime(2026, 3, 1, tzinfo=UTC)
PROBLEMS = [
    ("blocking_locks", "pid:42", Severity.CRITICAL),
    ("index_duplicate", "public.dup_idx", Severity.WARNING),
]
INFOS = [("setting_suboptimal", f"setting_{n}", Severity.INFO) for n in range(7)] + [
    ("index_unused", "public.cold_idx", Severity.INFO)
]


def first_report(tmp_path: Path) -> tuple[str, str]:
    findings = [
        Finding(code=c, object=o, severity=s, title=f"title of {o}") for c, o, s in PROBLEMS + INFOS
    ]
    items = [
        HistoryItem(code=f.code, object=f.object, severity=f.severity, first_seen=NOW)
        for f in findings
    ]
    report = Report(
        run_id="r1",
        target=TargetInfo(kind="postgresql", display="postgresql://app@db:5432/shop"),
        scenario="health",
        started_at=NOW,
        finished_at=NOW,
        brain="rules",
        findings=findings,
        history=History(new=items),
    )
    write_report(report, tmp_path)
    return (tmp_path / "report.md").read_text(), (tmp_path / "report.html").read_text()


def test_problems_lead_and_info_follows_grouped_by_code(tmp_path: Path):
    markdown, html = first_report(tmp_path)
    for text, problems, changed, info, shown in (
        (markdown, "## Problems", "## What changed", "## Information", "`setting_4`"),
        (
            html,
            "<h2>Problems</h2>",
            "<h2>What changed</h2>",
            "<h2>Information</h2>",
            "<code>setting_4</code>",
        ),
    ):
        assert text.index(problems) < text.index(changed) < text.index(info)
        head = text[: text.index(info)]
        assert "pid:42" in head and "public.dup_idx" in head
        assert not [o for _, o, _ in INFOS if o in head], (
            "an info finding before the Information section"
        )
        assert text.count(shown) == 1  # once, in its code's group, not in the history table
    rows = [
        ln
        for ln in markdown[markdown.index("## Information") :].splitlines()
        if ln.startswith("| `")
    ]
    assert [r.split("|")[1:3] for r in rows] == [
        [" `index_unused` ", " 1 "],
        [" `setting_suboptimal` ", " 7 "],
    ]
    assert "and 2 more" in rows[1] and "setting_6" not in markdown  # five objects shown per code
    assert (
        "Info findings: 8 new, 0 regressed, 0 resolved, 0 persisting, 0 absent, 0 not judged."
        in markdown
    )
