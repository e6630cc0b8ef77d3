"""Measure the classifier on the labelled set: accuracy at the top level and at the leaf, and the misses.

The labelled set is split once, by a hash of each message, into a development part (the one
looked at while writing tree.yaml's examples and choosing the classifier's constants) and a
held-out part (never looked at for tuning); accuracy is reported on both and on the whole.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from dbcrew.error_tree.classify import ErrorTree, LabelledError, normalise

HELD_OUT_SHARE = 3  # one case in three (by hash) is held out


def held_out(case: LabelledError) -> bool:
    # Hashed after normalising, so a port or pid that changes when the set is recollected does
    # not move a case between the parts, and near-duplicates land in the same part.
    digest = hashlib.sha256(normalise(f"{case.error_type}: {case.message}").encode()).digest()
    return digest[0] % HELD_OUT_SHARE == 0


def split(cases: Sequence[LabelledError]) -> tuple[list[LabelledError], list[LabelledError]]:
    """(development, held-out)."""
    return [c for c in cases if not held_out(c)], [c for c in cases if held_out(c)]


@dataclass
class Scores:
    total: int = 0
    top_hits: int = 0
    leaf_hits: int = 0
    fallbacks: int = 0
    confusions: Counter[tuple[str, str]] = field(
        default_factory=Counter
    )  # (expected, found) for misses
    missed: list[tuple[LabelledError, str, float]] = field(default_factory=list)

    @property
    def top_accuracy(self) -> float:
        return self.top_hits / self.total if self.total else 0.0

    @property
    def leaf_accuracy(self) -> float:
        return self.leaf_hits / self.total if self.total else 0.0


def evaluate(tree: ErrorTree, cases: Sequence[LabelledError]) -> Scores:
    branch_of = {leaf.name: leaf.path[1] for leaf in tree.leaves}
    scores = Scores()
    for case in cases:
        found = tree.classify(case.error_type, case.message)
        scores.total += 1
        scores.top_hits += found.branch == branch_of[case.leaf]
        scores.leaf_hits += found.leaf == case.leaf
        scores.fallbacks += found.fallback
        if found.leaf != case.leaf:
            scores.confusions[(case.leaf, found.leaf)] += 1
            scores.missed.append((case, found.leaf, found.confidence))
    return scores
