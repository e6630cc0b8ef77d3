"""The offline embedder puts close spellings near each other; the index ranks by cosine."""

from __future__ import annotations

import numpy as np

from dbcrew.text import VectorIndex, embed, tokens


def test_tokens_split_exception_names_and_drop_stopwords():
    assert tokens("QueryCanceled: canceling the statement due to statement_timeout") == [
        "query",
        "canceled",
        "canceling",
        "statement",
        "statement",
        "timeout",
    ]


def test_embedding_is_normalised_and_empty_text_is_zero():
    vectors = embed(["permission denied for table orders", ""])
    assert vectors.dtype == np.float32
    assert abs(float(np.linalg.norm(vectors[0])) - 1.0) < 1e-5
    assert float(np.abs(vectors[1]).sum()) == 0.0


def test_index_ranks_the_closest_spelling_first():
    index = VectorIndex(
        [
            "canceling statement due to statement timeout",
            "permission denied for table",
            "connection refused",
        ]
    )
    best, score = index.search("statement cancelled because of a timeout", k=3)[0]
    assert best == 0 and score > 0.3
    assert index.scores("privileges denied")[1] == max(index.scores("privileges denied"))
    assert VectorIndex([]).search("anything", 3) == []
