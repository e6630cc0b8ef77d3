"""Error-tree classification accuracy on the labelled set of real error messages (issue 5, acceptance 2).

Prints accuracy at the top level (pipeline vs logic) and at the leaf on the whole set, on the
development part (looked at while writing the tree's examples) and on the held-out part (never
used for tuning), for the two signals alone and combined; then, for the classifier as shipped,
the misses grouped by expected -> found leaf, and leaves the labelled set does not cover.
Targets: >= 90% top, >= 80% leaf.
"""

from __future__ import annotations

import time
from collections import Counter

from dbcrew.error_tree.classify import EMBEDDING_WEIGHT, ErrorTree, load_labelled, load_tree
from dbcrew.error_tree.evaluate import evaluate, split

TOP_TARGET, LEAF_TARGET = 0.90, 0.80


def main() -> None:
    shipped = load_tree()
    cases = load_labelled()
    development, held_out = split(cases)
    per_leaf = Counter(c.leaf for c in cases)
    print(
        f"labelled set: {len(cases)} real messages, {len(per_leaf)} of {len(shipped.leaves)} leaves covered; "
        f"development {len(development)}, held out {len(held_out)}"
    )
    print(f"{'signal':<24}{'part':<13}{'n':>5}{'top':>9}{'leaf':>9}{'fallbacks':>11}{'ms/msg':>9}")
    shipped.classify("QueryCanceled", "warm-up: the first call pays for loading the embedder")
    variants = [
        ("faiss only", 1.0),
        ("bm25 only", 0.0),
        (f"combined (w={EMBEDDING_WEIGHT})", EMBEDDING_WEIGHT),
    ]
    for label, weight in variants:
        tree = (
            shipped
            if weight == EMBEDDING_WEIGHT
            else ErrorTree(shipped.root, embedding_weight=weight)
        )
        for part, subset in [("all", cases), ("development", development), ("held out", held_out)]:
            started = time.perf_counter()
            scores = evaluate(tree, subset)
            ms = (time.perf_counter() - started) * 1000 / max(len(subset), 1)
            print(
                f"{label:<24}{part:<13}{scores.total:>5}{scores.top_accuracy:>9.1%}{scores.leaf_accuracy:>9.1%}"
                f"{scores.fallbacks:>11}{ms:>9.2f}"
            )
    scores = evaluate(shipped, cases)
    verdict = (
        "meets"
        if scores.top_accuracy >= TOP_TARGET and scores.leaf_accuracy >= LEAF_TARGET
        else "MISSES"
    )
    print(
        f"shipped classifier {verdict} the targets (top >= {TOP_TARGET:.0%}, leaf >= {LEAF_TARGET:.0%}) on all "
        f"{scores.total}: top {scores.top_accuracy:.1%}, leaf {scores.leaf_accuracy:.1%}"
    )
    print("confidence as a guide (shipped classifier, all cases):")
    found = [(shipped.classify(c.error_type, c.message), c) for c in cases]
    for low, high in [(0.9, 1.01), (0.6, 0.9), (0.0, 0.6)]:
        bucket = [(f, c) for f, c in found if low <= f.confidence < high]
        right = sum(f.leaf == c.leaf for f, c in bucket)
        share = f"{right / len(bucket):.1%}" if bucket else "-"
        print(
            f"  confidence {low:.1f}-{min(high, 1.0):.1f}: {len(bucket):>4} cases, leaf right {share}"
        )
    held = {id(c) for c in held_out}
    print("misses (expected -> found: count), then each miss:")
    for (expected, found), count in scores.confusions.most_common():
        print(f"  {expected} -> {found}: {count}")
    for case, found, confidence in scores.missed:
        where = "held out" if id(case) in held else "development"
        print(
            f"    [{where}, conf {confidence:.2f}] {case.leaf} -> {found}: {case.error_type}: {case.message[:100]}"
        )
    uncovered = [leaf.name for leaf in shipped.leaves if leaf.name not in per_leaf]
    print(f"leaves without labelled messages: {', '.join(uncovered) or 'none'}")
