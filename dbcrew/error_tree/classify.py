"""Classify an error by walking the tree from the root to a leaf, choosing one child at each level.

Two signals score every leaf against the error text ("ErrorType: message"):
- faiss: cosine between the offline embedding of the error and each of the leaf's examples (and
  its description); the leaf takes its nearest example (hashed character n-grams, so "canceled" and
  "cancelled", "xlog" and "xlogfile" land near each other);
- BM25 over each leaf's document (name, description, examples): rare shared words ("deadlock",
  "quota", "catalogue") weigh more than common ones ("error", "does not exist").
A child at a level stands for the best leaf beneath it. The walk takes the best-scoring child;
the level's confidence is that child's softmax share among its siblings, and the
classification's confidence is the product along the path. A level with no signal (no example
near enough and no shared word) takes the node's declared fall-back child instead.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from pydantic import ValidationError

from dbcrew.models.crew import Remedy
from dbcrew.text import VectorIndex, tokens
from dbcrew.text.tokens import STOPWORDS

TREE_PATH = Path(__file__).with_name("tree.yaml")
LABELLED_PATH = Path(__file__).with_name("labelled.yaml")
# bm25s logs every index build at DEBUG, which Prefect's console handler would print.
logging.getLogger("bm25s").setLevel(logging.WARNING)

EMBEDDING_WEIGHT = 0.5  # the rest goes to BM25, squashed to [0, 1) by bm25 / (bm25 + BM25_HALF)
BM25_HALF = (
    4.0  # the BM25 score that counts as half a match (one rare shared word scores about 2-4)
)
MIN_COSINE = 0.25  # a level has a signal when an example is at least this near...
MIN_BM25 = 2.0  # ...or the error shares at least one rare-ish word with a leaf
TEMPERATURE = 0.05  # softmax temperature that turns sibling scores into a confidence

_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")
_DIGITS = re.compile(r"\d+")
_STOPWORDS = re.compile(r"\b(" + "|".join(sorted(STOPWORDS)) + r")\b", re.IGNORECASE)
# The address preambles that psycopg and PostgresTarget put before every connect-time error.
_CONNECT_PREAMBLE = re.compile(
    r"(cannot connect to \S+: )?(connection (failed|is bad): )?connection to server (at \"[^\"]*\", port \d+|on socket \"[^\"]*\") failed: "
)


def normalise(text: str) -> str:
    """What both examples and errors are compared as: preamble, stop words and numbers dropped, CamelCase split.

    Every error met while connecting starts with the same "connection to server at ... failed:";
    the reason after it (refused, password, too many clients) is what tells them apart. Stop words
    ("the", "of") would make any English sentence look near every example. Ports,
    pids, sizes and line numbers vary between two instances of one error and carry no signal.
    """
    return _STOPWORDS.sub(" ", _DIGITS.sub("0", _CAMEL.sub(" ", _CONNECT_PREAMBLE.sub("", text))))


@dataclass
class ErrorNode:
    """One class of errors in tree.yaml: a branch, or a leaf with its examples and remedy."""

    name: str
    description: str
    path: tuple[str, ...]
    children: list[ErrorNode] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)
    remedy: Remedy | None = None
    fallback: str | None = None

    def leaves(self) -> list[ErrorNode]:
        return [self] if not self.children else [leaf for c in self.children for leaf in c.leaves()]

    def fallback_child(self) -> ErrorNode:
        return next((c for c in self.children if c.name == self.fallback), self.children[0])

    def document(self) -> list[str]:
        return tokens(
            normalise(" ".join([self.name.replace("_", " "), self.description, *self.examples]))
        )


@dataclass(frozen=True)
class Classification:
    leaf: str
    branch: str  # the top-level branch: pipeline or logic
    path: tuple[str, ...]
    confidence: float
    remedy: Remedy
    fallback: bool


def _node(raw: dict[str, Any], path: tuple[str, ...]) -> ErrorNode:
    here = (*path, raw["name"])
    try:
        remedy = Remedy.model_validate(raw["remedy"]) if "remedy" in raw else None
    except ValidationError as exc:  # a typo in tree.yaml: say which leaf, in one line
        raise ValueError(
            f"error tree {'/'.join(here)}: remedy {raw['remedy']}: {exc.errors()[0]['msg']}"
        ) from exc
    return ErrorNode(
        name=raw["name"],
        description=raw.get("description", ""),
        path=here,
        examples=list(raw.get("examples", [])),
        remedy=remedy,
        fallback=raw.get("fallback"),
        children=[_node(c, here) for c in raw.get("children", [])],
    )


class ErrorTree:
    def __init__(self, root: ErrorNode, embedding_weight: float = EMBEDDING_WEIGHT):
        self.root = root
        self.embedding_weight = embedding_weight
        self.leaves = root.leaves()
        self._position = {leaf.name: i for i, leaf in enumerate(self.leaves)}
        texts, owners = [], []
        for i, leaf in enumerate(self.leaves):
            for text in [leaf.description, *leaf.examples]:
                texts.append(normalise(text))
                owners.append(i)
        self._vectors = VectorIndex(texts)
        self._owners = np.array(owners)
        import bm25s  # here, not at import: it pulls in scipy.sparse, which a run without this index never needs

        self._bm25 = bm25s.BM25()
        self._bm25.index([leaf.document() for leaf in self.leaves], show_progress=False)

    def leaf_scores(
        self, error_type: str, message: str
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(combined, cosine, bm25) per leaf, in `self.leaves` order."""
        text = normalise(f"{error_type}: {message}" if error_type else message)
        cosine = np.zeros(len(self.leaves), dtype=np.float32)
        np.maximum.at(cosine, self._owners, self._vectors.scores(text))
        query = tokens(text)
        bm25 = (
            np.asarray(self._bm25.get_scores(query), dtype=np.float32)
            if query
            else np.zeros(len(self.leaves), dtype=np.float32)
        )
        combined = self.embedding_weight * cosine + (1 - self.embedding_weight) * bm25 / (
            bm25 + BM25_HALF
        )
        return combined, cosine, bm25

    def classify(self, error_type: str, message: str) -> Classification:
        combined, cosine, bm25 = self.leaf_scores(error_type, message)
        node, confidence, fallback = self.root, 1.0, False
        while node.children:
            members = [
                [self._position[leaf.name] for leaf in child.leaves()] for child in node.children
            ]
            if (
                max(float(cosine[m].max()) for m in members) < MIN_COSINE
                and max(float(bm25[m].max()) for m in members) < MIN_BM25
            ):
                node, fallback = node.fallback_child(), True
                confidence /= len(members)
                continue
            scores = np.array([combined[m].max() for m in members], dtype=np.float64)
            shares = np.exp((scores - scores.max()) / TEMPERATURE)
            best = int(scores.argmax())
            confidence *= float(shares[best] / shares.sum())
            node = node.children[best]
        assert node.remedy is not None, f"leaf {node.name} has no remedy"
        return Classification(
            leaf=node.name,
            branch=node.path[1],
            path=node.path,
            confidence=round(confidence, 3),
            remedy=node.remedy,
            fallback=fallback,
        )


@dataclass(frozen=True)
class LabelledError:
    """One real error message provoked by bench/collect_errors.py and the leaf it belongs to."""

    leaf: str
    error_type: str
    message: str
    source: str


def load_labelled(path: Path = LABELLED_PATH) -> list[LabelledError]:
    return [LabelledError(**row) for row in yaml.safe_load(path.read_text())]


@lru_cache(maxsize=1)
def load_tree(path: Path = TREE_PATH) -> ErrorTree:
    return ErrorTree(_node(yaml.safe_load(path.read_text()), ()))
