"""Knowledge extraction from documents (D-Bot's doc2knowledge), for when an LLM brain is set.

Three steps over a folder of text documents (.md, .txt):
1. chapter split: headings (Markdown `#`, or numbered section titles such as `28.4 Asynchronous
   Commit`) cut each document into chapters;
2. summary tree: the LLM summarises every chapter, then the document from its chapter summaries,
   so each extraction sees where its chapter sits;
3. extraction: per chapter, the LLM proposes chunks in D-Bot's format for the root-cause codes we
   know; a chunk naming an unknown code is dropped, never invented into the vocabulary.
The chunks cite their document and chapter as `source`. Offline (rules brain) nothing runs: the
shipped dbcrew/knowledge/ is written by hand from the manual.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field

from dbcrew.operators.knowledge import Chunk

HEADING = re.compile(r"^(#{1,3}\s+.+|\d+(\.\d+)*\.?\s+[A-Z].{2,80})$", re.MULTILINE)
MAX_CHAPTER_CHARS = 12_000

Ask = Callable[[str, dict[str, Any], type[BaseModel]], BaseModel]


class Chapter(BaseModel):
    document: str
    title: str
    text: str


class KnowledgeSummary(BaseModel):
    """The answer to knowledge_summary.j2: one chapter's summary, or the document's from them."""

    summary: str


class ProposedChunk(BaseModel):
    name: str
    code: str
    content: str
    metrics: list[str] = Field(min_length=1)
    steps: str
    solution: str = ""


class ChunkProposals(BaseModel):
    """The chunks a model proposes from one chapter."""

    chunks: list[ProposedChunk] = Field(default_factory=list)


class SummaryTree(BaseModel):
    document: str
    summary: str
    chapters: list[tuple[str, str]] = Field(description="(chapter title, chapter summary)")


def split_chapters(document: str, text: str) -> list[Chapter]:
    """Cut at headings; text before the first heading is its own chapter when not empty."""
    marks = [(m.start(), m.group(0).lstrip("# ").strip()) for m in HEADING.finditer(text)]
    if not marks:
        return (
            [Chapter(document=document, title=document, text=text.strip()[:MAX_CHAPTER_CHARS])]
            if text.strip()
            else []
        )
    chapters = []
    if text[: marks[0][0]].strip():
        chapters.append(
            Chapter(
                document=document,
                title=document,
                text=text[: marks[0][0]].strip()[:MAX_CHAPTER_CHARS],
            )
        )
    for (start, title), (end, _next) in zip(marks, [*marks[1:], (len(text), "")]):
        body = text[start:end].split("\n", 1)[1].strip() if "\n" in text[start:end] else ""
        if body:
            chapters.append(Chapter(document=document, title=title, text=body[:MAX_CHAPTER_CHARS]))
    return chapters


def summary_tree(document: str, chapters: list[Chapter], ask: Ask) -> SummaryTree:
    leaves = []
    for chapter in chapters:
        answer = ask(
            "knowledge_summary.j2", {"title": chapter.title, "text": chapter.text}, KnowledgeSummary
        )
        assert isinstance(answer, KnowledgeSummary)
        leaves.append((chapter.title, answer.summary))
    root = ask(
        "knowledge_summary.j2",
        {"title": document, "text": "\n".join(f"{t}: {s}" for t, s in leaves)},
        KnowledgeSummary,
    )
    assert isinstance(root, KnowledgeSummary)
    return SummaryTree(document=document, summary=root.summary, chapters=leaves)


def extract_chunks(folder: Path, ask: Ask, experts_by_code: dict[str, str]) -> list[Chunk]:
    """Every chunk the LLM extracts from the documents in `folder`, for the known codes only."""
    chunks: list[Chunk] = []
    for path in sorted(p for p in folder.iterdir() if p.suffix in (".md", ".txt")):
        chapters = split_chapters(path.name, path.read_text())
        if not chapters:
            continue
        tree = summary_tree(path.name, chapters, ask)
        for chapter, (_title, chapter_summary) in zip(chapters, tree.chapters):
            proposal = ask(
                "knowledge_extract.j2",
                {
                    "document_summary": tree.summary,
                    "chapter_summary": chapter_summary,
                    "title": chapter.title,
                    "text": chapter.text,
                    "codes": sorted(experts_by_code),
                },
                ChunkProposals,
            )
            assert isinstance(proposal, ChunkProposals)
            for found in proposal.chunks:
                if found.code not in experts_by_code:
                    continue  # the vocabulary is an API: an unknown code is dropped, never added
                chunks.append(
                    Chunk(
                        name=found.name,
                        code=found.code,
                        expert=experts_by_code[found.code],
                        content=found.content,
                        metrics=found.metrics,
                        steps=found.steps,
                        solution=found.solution,
                        source=f"{path.name}, {chapter.title}",
                    )
                )
    return chunks


def write_chunks(chunks: list[Chunk], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        yaml.safe_dump(
            [c.model_dump(mode="json") for c in chunks], sort_keys=False, allow_unicode=True
        )
    )
    return path
