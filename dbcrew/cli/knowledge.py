"""`dbcrew extract-knowledge`: root-cause knowledge chunks drawn from documents by the LLM brain."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dbcrew.cli.console import line, show
from dbcrew.errors import UsageError


def extract_knowledge(
    documents: Annotated[
        Path, typer.Argument(help="folder of .md/.txt documents (e.g. manual chapters)")
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            help="YAML file for the extracted chunks (review, then move into dbcrew/knowledge/)",
        ),
    ],
) -> None:
    """Extract root-cause knowledge chunks from documents with the LLM brain (chapter split, summary tree, extraction)."""
    from dbcrew.operators.diagnose.experts import experts_by_code
    from dbcrew.operators.diagnose.extraction import extract_chunks, write_chunks
    from dbcrew.prompts import render
    from dbcrew.roles.brains import default_brain
    from dbcrew.roles.brains.openai import OpenAIBrain

    if default_brain() != "openai":
        raise UsageError(
            "knowledge extraction needs the LLM brain: set DBCREW_LLM_BASE_URL or OPENAI_API_KEY"
        )
    if not documents.is_dir():
        raise UsageError(f"{documents}: not a folder")
    chunks = extract_chunks(documents, OpenAIBrain(render).ask, experts_by_code())
    show(line(f"{len(chunks)} chunks: {write_chunks(chunks, out)}"))
