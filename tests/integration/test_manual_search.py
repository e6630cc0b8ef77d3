"""Search of the real PostgreSQL manual (Debian's postgresql-doc-15, which `make test` installs).

The index is the user's cached one, which the documented `dbcrew ask` commands build first
(tests/e2e/test_docs_commands.py); the questions here are none of the benchmark's.
"""

from __future__ import annotations

import pytest

from dbcrew.operators.docs import DEBIAN_MANUAL, docs_index

pytestmark = pytest.mark.skipif(
    not DEBIAN_MANUAL.is_dir(), reason="no postgresql-doc-15 (make test installs it as root)"
)


def sections(question: str) -> list[str]:
    return [h.passage.section for h in docs_index(DEBIAN_MANUAL).search(question, 3)]


def test_a_long_section_whose_title_says_the_questions_phrase_is_among_those_cited():
    """Short mentions of wraparound (basics, multixacts, a setting) outrank the long section on words
    alone; its title, "Preventing Transaction ID Wraparound Failures", brings it in."""
    found = sections("why should I care about transaction ID wraparound?")
    assert "routine-vacuuming.html#VACUUM-FOR-WRAPAROUND" in found, found


def test_a_dbas_words_find_the_manuals_terms():
    assert any(
        s.startswith("pgstatstatements.html")
        for s in sections("which queries are the slowest here?")
    )
    online = sections("can an index be added to a busy table without blocking writers?")
    assert "sql-createindex.html#SQL-CREATEINDEX-CONCURRENTLY" in online, online
