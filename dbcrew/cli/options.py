"""The options several commands declare alike, declared once: the same name, type and help in every `--help`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

OutDir = Annotated[
    Path | None, typer.Option("--out", help="directory for report.json/md/html and charts")
]
Brain = Annotated[
    str | None, typer.Option(help="rules (offline) or openai (any OpenAI-compatible endpoint)")
]
