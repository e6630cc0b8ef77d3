"""The root-cause knowledge base (dbcrew/knowledge/*.yaml) and its retrieval.

Chunks follow D-Bot's format (name, content, metrics, steps) plus the root-cause `code` they
explain, the `expert` that owns them, a `solution` and the manual section they rest on (`source`).
Retrieval blends BM25 over the chunks' metric names, queried with the abnormal metrics (D-Bot's
"abnormal metric names <-> chunk metric names" matching), with faiss cosine over the text,
queried with the alert and the candidate causes.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from pathlib import Path
from typing import Any, cast, get_args

import yaml
from pydantic import BaseModel, field_validator

from dbcrew.operators.window.metrics import looks_like_a_metric
from dbcrew.operators.window.metrics import parse as parse_metric
from dbcrew.text import VectorIndex, tokens
from dbcrew.vocabulary import Cause

KNOWLEDGE_DIR = Path(__file__).resolve().parent.parent / "knowledge"
TEXT_WEIGHT = 0.5


class Chunk(BaseModel):
    name: str
    code: Cause
    expert: str
    content: str
    metrics: list[
        str
    ]  # the window's metrics (the catalogue's names), wait events, plan nodes, columns
    steps: str
    solution: str
    source: str

    @field_validator("metrics")
    @classmethod
    def _known_metrics(cls, metrics: list[str]) -> list[str]:
        """A name shaped like a window metric's must be the catalogue's: a misspelt one would never
        match an abnormal metric, and the chunk would silently stop being retrieved by it."""
        for name in metrics:
            if looks_like_a_metric(name):
                parse_metric(name)
        return metrics


class Match(BaseModel):
    chunk: Chunk
    score: float


class KnowledgeBase:
    def __init__(self, chunks: list[Chunk]):
        if not chunks:
            raise ValueError("empty knowledge base")
        self.chunks = chunks
        import bm25s  # here, not at import: it pulls in scipy.sparse, which a run without this index never needs

        logging.getLogger("bm25s").setLevel(
            logging.WARNING
        )  # bm25s sets its own level when imported
        self._bm25 = bm25s.BM25()
        self._bm25.index(
            [tokens(" ".join(c.metrics)) or ["none"] for c in chunks], show_progress=False
        )
        self._vectors = VectorIndex([f"{c.name}. {c.content} {c.steps}" for c in chunks])

    def for_code(self, code: Cause) -> Chunk | None:
        return next((c for c in self.chunks if c.code == code), None)

    def retrieve(
        self, metric_names: list[str], text: str, k: int = 3, expert: str | None = None
    ) -> list[Match]:
        """The k chunks best matching the abnormal metric names and the text (optionally one expert's)."""
        query = tokens(" ".join(metric_names))
        lexical = list(self._bm25.get_scores(query)) if query else [0.0] * len(self.chunks)
        top = max(lexical) or 1.0
        semantic = self._vectors.scores(text) if text.strip() else [0.0] * len(self.chunks)
        scored = [
            Match(chunk=c, score=round(float(lexical[i] / top + TEXT_WEIGHT * semantic[i]), 4))
            for i, c in enumerate(self.chunks)
            if expert is None or c.expert == expert
        ]
        scored.sort(key=lambda m: -m.score)
        return [m for m in scored[:k] if m.score > 0]


def _yaml(path: Path) -> Any:
    """A data file of this folder, parsed by libyaml where PyYAML has it (a tenth of the pure-Python
    parser's CPU: the first plan of a process reads these files before its window)."""
    return yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def load_chunks(folder: Path = KNOWLEDGE_DIR) -> list[Chunk]:
    chunks: list[Chunk] = []
    for path in sorted(folder.glob("*.yaml")):
        chunks.extend(Chunk.model_validate(raw) for raw in _yaml(path) or [])
    return chunks


@lru_cache(maxsize=1)
def chunks() -> tuple[Chunk, ...]:
    """The chunks as written, without the indexes retrieval builds over them (the planner reads only
    their text: building BM25 and faiss here cost seconds the first plan of a process would wait for)."""
    return tuple(load_chunks())


SYMPTOMS_FILE = KNOWLEDGE_DIR / "symptoms" / "codes.yaml"
TERMS_FILE = KNOWLEDGE_DIR / "symptoms" / "terms.yaml"


@lru_cache(maxsize=1)
def symptoms() -> dict[str, str]:
    """How each problem presents to whoever raises an alert about it, by code (dbcrew/knowledge/symptoms/):
    what the planner matches an alert against besides the operators' descriptions."""
    raw = _yaml(SYMPTOMS_FILE) or {}
    return {_code(name).value: " ".join(str(text).split()) for name, text in raw.items()}


@lru_cache(maxsize=1)
def terms() -> dict[str, str]:
    """word -> the head word it names the same thing as (dbcrew/knowledge/symptoms/terms.yaml), heads
    included: what the planner folds an alert's and an operator's words to."""
    raw = _yaml(TERMS_FILE) or {}
    folded: dict[str, str] = {}
    for head, members in raw.items():
        for word in [head, *members]:
            if folded.setdefault(str(word), str(head)) != head:
                raise ValueError(f"{TERMS_FILE}: {word!r} is under two heads")
    return folded


def _code(name: str) -> Cause:
    """A code of finding-codes.md (a root cause or a health check's); ValueError for any other name."""
    for kind in get_args(Cause):
        try:
            return cast(Cause, kind(name))
        except ValueError:
            continue
    raise ValueError(f"{SYMPTOMS_FILE}: {name!r} is not a finding or root-cause code")


@lru_cache(maxsize=1)
def knowledge_base() -> KnowledgeBase:
    return KnowledgeBase(load_chunks())
