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


def test_the_embedding_is_scikit_learns_without_importing_it():
    """dbcrew/text/hashing.py replaces HashingVectorizer (char_wb 3-5 + 2 x words) and the embedder
    sklearn's idf and L2 normalisation: the same vectors to the bit, so every cosine and threshold
    written against scikit-learn's holds."""
    from sklearn.feature_extraction.text import HashingVectorizer
    from sklearn.preprocessing import normalize

    from dbcrew.operators.knowledge import load_chunks
    from dbcrew.text.embedding import DIMENSIONS, WORD_WEIGHT, inverse_frequencies

    texts = [
        "QueryCanceled: canceling the statement due to statement_timeout",
        "",
        "a ab abc abcd abcde",  # words shorter than, equal to and longer than the n-gram sizes
        "Ünïcode naïve café ½ — ﬁle",
        "  runs   of\t\tspaces\nand newlines ",
        *(f"{c.name}. {c.content} {c.steps}" for c in load_chunks()),
    ]
    options = {"n_features": DIMENSIONS, "alternate_sign": False, "norm": None}
    chars = HashingVectorizer(analyzer="char_wb", ngram_range=(3, 5), **options)
    words = HashingVectorizer(analyzer="word", **options)
    counts = chars.transform(texts) + WORD_WEIGHT * words.transform(texts)
    present = (counts > 0).sum(axis=0).A1
    idf = (np.log((1 + len(texts)) / (1 + present)) + 1.0).astype(np.float32)
    assert np.array_equal(inverse_frequencies(texts), idf)
    plain = normalize(counts, norm="l2").toarray().astype(np.float32)
    weighted = normalize(counts.multiply(idf.reshape(1, -1)).tocsr(), norm="l2")
    assert np.array_equal(embed(texts), plain)
    assert np.array_equal(embed(texts, idf), weighted.toarray().astype(np.float32))
