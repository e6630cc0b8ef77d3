"""Console output that never reads text as markup.

Whatever reaches the terminal from a target (schema, table and index names, query texts), from a
user (URLs, alert texts) or from a report (a model's summary) is data: `[bold]x` or `[/tmp]` must
print as written. Both consoles therefore run with markup off, and styled lines are assembled from
`rich.text.Text` pieces whose content is never parsed. Nor is it the terminal's to read: a control or
format character (ESC starts an escape sequence that can clear the screen, retitle the window or
rewrite what was printed; bidi controls reorder what is shown) is printed as its escape (`\x1b`),
so a table named with one shows what it is named. Rich strips only a few control codes itself.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from dbcrew.text.untrusted import escaped

err = Console(stderr=True, soft_wrap=True, markup=False, highlight=False, emoji=False)
out = Console(soft_wrap=True, markup=False, highlight=False, emoji=False)

SEVERITY_STYLES = {"critical": "red", "warning": "yellow", "info": "dim"}


def line(*pieces: str | tuple[str, str]) -> Text:
    """A line of plain strings and (text, style) pairs; no piece is parsed for markup or left to the terminal."""
    return Text.assemble(
        *(escaped(p) if isinstance(p, str) else (escaped(p[0]), p[1]) for p in pieces)
    )


def show(renderable: Text | Table) -> None:
    """A line or a table on stdout."""
    out.print(renderable)


def fail(message: str) -> None:
    """One line on stderr (errors, usage problems)."""
    err.print(Text(escaped(message)))
