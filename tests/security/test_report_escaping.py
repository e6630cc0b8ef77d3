"""Hostile names and model text are shown in report.html and report.md, never interpreted."""

from __future__ import annotations

from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path

from markdown_it import MarkdownIt

from dbcrew.models import Finding, Report, Severity
from dbcrew.models.report import CoverageEntry, CoverageStatus, TargetInfo
from dbcrew.operators.sql import qualified
from dbcrew.roles.report.reporter import write_report

SCRIPT = "<script>alert(1)</script>"
HOSTILE_NAMES = [SCRIPT, "a|b", "line\nbreak", "[bold]", "tick`tock", "[x](javascript:alert(1))"]


class Tags(HTMLParser):
    """Every element a page (or rendered Markdown) would create."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.hrefs += [v or "" for k, v in attrs if k == "href"]


def tags_of(html: str) -> Tags:
    parser = Tags()
    parser.feed(html)
    return parser


def hostile_report() -> Report:
    now = datetime.now(UTC)
    findings = [
        Finding(
            code="table_without_primary_key",
            severity=Severity.WARNING,
            object=qualified("public", name),
            title=f"Table {name} has no primary key",
            recommendation=f"Add a key to {name}",
            fix_sql=f"ALTER TABLE {qualified('public', name)} ADD PRIMARY KEY (id); -- ```",
        )
        for name in HOSTILE_NAMES
    ]
    return Report(
        run_id="r1",
        target=TargetInfo(kind="postgres", display=f"postgresql://u@h/{SCRIPT}"),
        scenario="health",
        started_at=now,
        finished_at=now,
        brain="openai",
        findings=findings,
        coverage=[
            CoverageEntry(
                check="check_sessions",
                status=CoverageStatus.FAILED,
                reason=f"error on {SCRIPT} | x\ny",
            )
        ],
        summary=f"All fine. {SCRIPT} <img src=x onerror=alert(2)> [click](javascript:alert(3))",
    )


def test_report_html_escapes_names_and_model_text(tmp_path: Path) -> None:
    write_report(hostile_report(), tmp_path)
    html = (tmp_path / "report.html").read_text()
    tags = tags_of(html)
    assert "script" not in tags.tags and "img" not in tags.tags, (
        "database or model text became markup"
    )
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert (
        tags.tags.count("tr") == 1 + len(HOSTILE_NAMES) + 2
    )  # findings header + rows, coverage header + row


def test_report_md_keeps_tables_whole_and_text_inert(tmp_path: Path) -> None:
    write_report(hostile_report(), tmp_path)
    markdown = (tmp_path / "report.md").read_text()
    rendered = MarkdownIt("commonmark").enable("table").render(markdown)
    tags = tags_of(rendered)
    assert "script" not in tags.tags and "img" not in tags.tags and not tags.hrefs, (
        "text became markup or a link"
    )
    assert tags.tags.count("table") == 2 and tags.tags.count("tr") == 1 + len(HOSTILE_NAMES) + 2
    findings_table = rendered.split("<table>")[1]
    assert findings_table.count("<td>") == 4 * len(HOSTILE_NAMES), "a pipe or newline split a row"
    assert SCRIPT.replace("<", "&lt;").replace(">", "&gt;") in rendered  # shown, not dropped
    for name in ("a|b", "[bold]", "tick`tock", "line␤break"):
        assert f"<code>public.&quot;{name}&quot;</code>" in rendered, (
            f"{name!r} is shown whole, quoted as an identifier"
        )


def test_report_md_holds_no_character_a_terminal_would_obey(tmp_path: Path) -> None:
    """`cat report.md` must not clear the screen or reorder a line: a name's ESC or bidi override is its escape,
    in text, in code spans and in the code blocks of fixes."""
    name = "clear\x1b[2Jhere\u202eevil"
    now = datetime.now(UTC)
    report = Report(
        run_id="r1",
        target=TargetInfo(kind="postgres", display="postgresql://u@h/db"),
        scenario="health",
        started_at=now,
        finished_at=now,
        brain="rules",
        findings=[
            Finding(
                code="table_without_primary_key",
                severity=Severity.WARNING,
                object=qualified("public", name),
                title=f"Table {name} has no primary key",
                recommendation="Add a key",
                statement=f"SELECT 1 FROM {qualified('public', name)}",
                fix_sql=f"ALTER TABLE {qualified('public', name)} ADD PRIMARY KEY (id);",
            )
        ],
        summary=f"One table: {name}",
    )
    write_report(report, tmp_path)
    markdown = (tmp_path / "report.md").read_text()
    assert "\x1b" not in markdown and "\u202e" not in markdown
    shown = 'public."clear\\x1b[2Jhere\\u202eevil"'
    assert f"`{shown}`" in markdown and f"ALTER TABLE {shown} ADD" in markdown  # shown, not dropped
