"""The product's one Jinja environment: the prompts and the report render through it.

Each layer that owns templates adds its folder under a prefix (`prompts/plan.j2`,
`report/report.html.j2`) with the filters its templates use, so the kernel names no folder above
it. One environment compiles each template once per process (a worker renders many reviews) and
holds one policy for all of them:
- autoescape by template kind: HTML (`*.html.j2`, the report page) is escaped by Jinja; prompts
  and Markdown are text, quoted by their own filters (tojson_pretty and fence_safe inside a
  prompt's <data> fence, md_* in report.md), where HTML escaping would only garble them;
- an undefined name is an error, never an empty string in a prompt or a report;
- a block tag's own line leaves no blank line and no indent (`trim_blocks`, `lstrip_blocks`): a
  tag whose newline is text ends in `+%}`; a template's last newline is kept.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from jinja2 import BaseLoader, Environment, FileSystemLoader, PrefixLoader, StrictUndefined


def autoescaped(name: str | None) -> bool:
    """Jinja escapes HTML templates; the other kinds (prompts, Markdown) quote through filters."""
    return name is not None and name.endswith(".html.j2")


_FOLDERS: dict[str, BaseLoader] = {}
_ENVIRONMENT = Environment(
    loader=PrefixLoader(_FOLDERS),
    autoescape=autoescaped,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)


def add_templates(prefix: str, folder: Path, filters: dict[str, Callable[..., Any]]) -> None:
    """Serve `folder`'s templates as `<prefix>/<name>`, with the filters they use (a filter name
    taken by another folder's different function is refused: every template sees every filter)."""
    clashes = sorted(n for n, f in filters.items() if _ENVIRONMENT.filters.get(n, f) is not f)
    if clashes:
        raise ValueError(f"Jinja filters already defined: {', '.join(clashes)}")
    _FOLDERS[prefix] = FileSystemLoader(folder)
    _ENVIRONMENT.filters.update(filters)


def render(name: str, context: dict[str, Any]) -> str:
    """Template `name` (`<prefix>/<file>`) rendered with `context`."""
    return _ENVIRONMENT.get_template(name).render(**context)
