"""Classify an error by walking the tree from the root to a leaf, choosing a child at each level.

Each child is scored by BM25 between the error text and the descriptions and examples of the
leaves beneath it (the best leaf stands for the subtree). A level with no signal falls back to the
subtree's designated fall-back (the first child), and the confidence says so.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import bm25s
import yaml

from dbcrew.text import tokens

TREE_PATH = Path(__file__).with_name("tree.yaml")
LABELLED_PATH = Path(__file__).with_name("labelled.yaml")
# bm25s logs every index build at DEBUG, which Prefect's console handler would print.
logging.getLogger("bm25s").setLevel(logging.WARNING)


@dataclass(frozen=True)
class Remedy:
    kind: str  # instruction | replan
    action: str


@dataclass
class Node:
    name: str
    description: str
    path: tuple[str, ...]
    children: list[Node] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)
    remedy: Remedy | None = None

    def leaves(self) -> list[Node]:
        return [self] if not self.children else [leaf for c in self.children for leaf in c.leaves()]

    def document(self) -> list[str]:
        return tokens(" ".join([self.name.replace("_", " "), self.description, *self.examples]))



@dataclass(frozen=True)
class Classification:
    leaf: str
    branch: str  # the top-level branch: pipeline or logic
    path: tuple[str, ...]
    confidence: float
    remedy: Remedy
    fallback: bool


def _node(raw: dict[str, Any], path: tuple[str, ...]) -> Node:
    here = (*path, raw["name"])
    remedy = Remedy(**raw["remedy"]) if "remedy" in raw else None
    return Node(
        name=raw["name"], description=raw.get("description", ""), path=here, examples=list(raw.get("examples", [])),
        remedy=remedy, children=[_node(c, here) for c in raw.get("children", [])],
    )


class ErrorTree:
    def __init__(self, root: Node):
        self.root = root
        self._leaves = root.leaves()
        self._bm25 = bm25s.BM25()
        self._bm25.index([leaf.document() for leaf in self._leaves], show_progress=False)

    def classify(self, error_type: str, message: str) -> Classification:
        query = tokens(f"{error_type} {message}")
        scores = dict(zip((leaf.name for leaf in self._leaves), self._bm25.get_scores(query) if query else [0.0] * len(self._leaves)))
        node, confidence, fallback = self.root, 1.0, False
        while node.children:
            child_scores = [max(scores[leaf.name] for leaf in child.leaves()) for child in node.children]
            total = sum(child_scores)
            if total <= 0:
                node, fallback = node.children[0], True
                confidence *= 1.0 / len(child_scores)
                continue
            best = max(range(len(child_scores)), key=child_scores.__getitem__)
            confidence *= child_scores[best] / total
            node = node.children[best]
        assert node.remedy is not None, f"leaf {node.name} has no remedy"
        return Classification(
            leaf=node.name, branch=node.path[1], path=node.path, confidence=round(float(confidence), 3),
            remedy=node.remedy, fallback=fallback,
        )


@lru_cache(maxsize=1)
def load_tree(path: Path = TREE_PATH) -> ErrorTree:
    return ErrorTree(_node(yaml.safe_load(path.read_text()), ()))
