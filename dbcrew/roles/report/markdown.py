"""Escaping for report.md: text from a database, a model or a user is shown, never interpreted.

Object names, statement texts, error messages and the model's summary all reach the Markdown
report. Unescaped, a pipe or a newline breaks a table row, a backtick closes a code span, `<`
opens raw HTML (live script in a renderer that passes HTML through) and `[...]` opens a link.
CommonMark lets a backslash escape any ASCII punctuation, which is what these filters use; `<` is
written as the entity `&lt;` instead, so no tag is in the file for a tool that reads it raw. A control or
format character (ESC, which a terminal showing the file with `cat` would obey; a bidi override) is
written as its escape (`\\x1b`) everywhere, in code blocks too: report.json keeps the exact text.
"""

from __future__ import annotations

import re

from dbcrew.text.untrusted import escaped

_SPECIAL = re.compile(r"([\\`*|\[\]&])")
_NEWLINE = re.compile(r"\r\n|\r|\n")
_TICKS = re.compile(r"`+")
NEWLINE_MARK = (
    "␤"  # a visible stand-in where a line break cannot be (inside a table row or code span)
)


def _shown(value: object) -> str:
    """The text with its control and format characters escaped, line breaks and tabs kept for each filter."""
    return escaped(str(value), keep="\n\t\r")


def md_text(value: object) -> str:
    """Paragraph text: Markdown punctuation escaped, `<` as the entity `&lt;` (so the file itself holds
    no tag a tool reading it raw could take for markup); line breaks kept (they cannot open raw HTML)."""
    return _SPECIAL.sub(r"\\\1", _shown(value)).replace("<", "&lt;")


def md_cell(value: object) -> str:
    """One table cell: escaped text whose line breaks become `<br>` so the row stays one line."""
    return _NEWLINE.sub("<br>", md_text(value))


def md_code(value: object, in_table: bool = False) -> str:
    """An inline code span that no backtick in the text can close, on one line.

    The fence is one backtick longer than the longest run inside (CommonMark) and a line break
    shows as a visible mark; in a table row pipes are escaped too (GFM splits on them even there).
    """
    text = _NEWLINE.sub(NEWLINE_MARK, _shown(value))
    text = text.replace("|", "\\|") if in_table else text
    fence = "`" * (1 + max((len(run) for run in _TICKS.findall(text)), default=0))
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def md_block(value: object) -> str:
    """A code block's text (a statement, a fix's SQL): as written, but for control and format characters."""
    return _shown(value)


def md_fence(value: object) -> str:
    """A fence for a code block that no backtick run inside the block can close."""
    return "`" * max(3, 1 + max((len(run) for run in _TICKS.findall(str(value))), default=0))
