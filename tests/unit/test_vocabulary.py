"""The typed codes and finding-codes.md (the design's source) name the same codes, table by table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dbcrew.vocabulary import FindingCode, RootCauseCode, cause_code

ROOT = Path(__file__).resolve().parents[2]
CODES_DOC = ROOT / "docs" / "finding-codes.md"  # the project's copy of shared/finding-codes.md
SHARED_DOC = ROOT.parent / "shared" / "finding-codes.md"


def codes_under(heading: str, text: str) -> list[str]:
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    return [c for c in re.findall(r"^\| ([a-z_]+) \|", section, flags=re.MULTILINE) if c != "code"]


def test_codes_match_finding_codes_md() -> None:
    text = CODES_DOC.read_text()
    assert codes_under("## Health checks", text) == [c.value for c in FindingCode]
    assert codes_under("## Root causes", text) == [c.value for c in RootCauseCode]


def test_cause_code_takes_both_tables_and_nothing_else() -> None:
    assert cause_code("lock_contention") is RootCauseCode.LOCK_CONTENTION
    assert cause_code("index_missing") is FindingCode.INDEX_MISSING
    with pytest.raises(ValueError):
        cause_code("cosmic_rays")


@pytest.mark.skipif(
    not SHARED_DOC.is_file(), reason="no shared/ design folder beside this checkout (CI)"
)
def test_project_copy_follows_the_design_source() -> None:
    text = SHARED_DOC.read_text()
    assert codes_under("## Health checks", text) == [c.value for c in FindingCode]
    assert codes_under("## Root causes", text) == [c.value for c in RootCauseCode]
