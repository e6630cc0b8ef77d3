"""An offline embedder and a faiss index over its vectors.

Nothing may download a model at run time, so the vectors are hashed character n-grams (within
word boundaries) plus word unigrams: close spellings ("canceling"/"cancelled", "privilege"/
"privileges") land near each other, which is the similarity error texts and knowledge chunks need.
Vectors are L2-normalised, so faiss's inner product is the cosine. scikit-learn and faiss load on
first use: they cost over a second of CPU to import, which every flow run in a process worker would
otherwise pay whether or not it embeds anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

import numpy as np

DIMENSIONS = 2**14


@cache
def _vectorizers() -> tuple[Any, Any]:
    """Character n-grams within word boundaries, and word unigrams, hashed into DIMENSIONS."""
    from sklearn.feature_extraction.text import HashingVectorizer

    chars = HashingVectorizer(
        analyzer="char_wb",
        ngram_range=(3, 5),
        n_features=DIMENSIONS,
        alternate_sign=False,
        norm=None,
        lowercase=True,
    )
    words = HashingVectorizer(
        analyzer="word", n_features=DIMENSIONS, alternate_sign=False, norm=None, lowercase=True
    )
    return chars, words


def _counts(texts: Sequence[str]) -> Any:
    """The texts' hashed feature counts (sparse), unnormalised."""
    chars, words = _vectorizers()
    return chars.transform(texts) + 2.0 * words.transform(texts)


def embed(texts: Sequence[str], weights: np.ndarray | None = None) -> np.ndarray:
    """One L2-normalised float32 row per text; an empty text embeds to the zero vector.

    `weights` (one per feature) scale the counts before normalising: a corpus's inverse document
    frequencies, so what every text of it shares weighs little (see VectorIndex)."""
    from sklearn.preprocessing import normalize

    matrix = _counts(texts)
    if weights is not None:
        matrix = matrix.multiply(weights.reshape(1, -1)).tocsr()
    rows: np.ndarray = normalize(matrix, norm="l2").toarray().astype(np.float32)
    return rows


def inverse_frequencies(texts: Sequence[str]) -> np.ndarray:
    """Smoothed inverse document frequency of every feature over `texts` (sklearn's formula)."""
    present = (_counts(texts) > 0).sum(axis=0).A1
    weights: np.ndarray = (np.log((1 + len(texts)) / (1 + present)) + 1.0).astype(np.float32)
    return weights


class VectorIndex:
    """Exact cosine search over a small corpus (error-tree leaves, knowledge chunks).

    `weighted`: features are weighted by their inverse frequency over the corpus, so texts that all
    share a vocabulary (the operators' descriptions all speak of tables, statements and indexes) are
    told apart by what only some of them say."""

    def __init__(self, texts: Sequence[str], weighted: bool = False):
        import faiss

        self.size = len(texts)
        self._weights = inverse_frequencies(texts) if weighted and texts else None
        self._index = faiss.IndexFlatIP(DIMENSIONS)
        if texts:
            self._index.add(embed(texts, self._weights))

    def scores(self, text: str) -> np.ndarray:
        """Cosine similarity of `text` to every indexed text, in index order."""
        if not self.size:
            return np.zeros(0, dtype=np.float32)
        found, ids = self._index.search(embed([text], self._weights), self.size)
        out = np.zeros(self.size, dtype=np.float32)
        out[ids[0]] = found[0]
        return out

    def search(self, text: str, k: int) -> list[tuple[int, float]]:
        """The k nearest texts as (position, cosine), best first."""
        if not self.size:
            return []
        found, ids = self._index.search(embed([text], self._weights), min(k, self.size))
        return [(int(i), float(s)) for i, s in zip(ids[0], found[0]) if i >= 0]
