"""Word tokens for BM25: CamelCase exception names split, stop words dropped."""

from __future__ import annotations

import re

_WORD = re.compile(r"[A-Za-z][a-z]+|[A-Z]+(?![a-z])|\d+")
STOPWORDS = frozenset(
    "a an the of to for in on is be by or and not no it its this that with due".split()
)


def tokens(text: str) -> list[str]:
    """Words, with CamelCase exception names split (QueryCanceled -> query, canceled)."""
    return [w.lower() for w in _WORD.findall(text) if w.lower() not in STOPWORDS]
