"""An offline embedder and a faiss index over its vectors.

Nothing may download a model at run time, so the vectors are hashed character n-grams (within
word boundaries) plus word unigrams: close spellings ("canceling"/"cancelled", "privilege"/
"privileges") land near each other, which is the similarity error texts and knowledge chunks need.
Vectors are L2-normalised, so faiss's inner product is the cosine. The hashing is plain Python
(dbcrew/text/hashing.py: scikit-learn's HashingVectorizer, column for column, without its second of
import); faiss loads on first use (about 0.1 s of CPU), which a flow run that embeds nothing never
pays.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dbcrew.text.hashing import hashed_counts

DIMENSIONS = 2**14
WORD_WEIGHT = 2.0  # a whole word shared counts twice one of its n-grams


def _counts(texts: Sequence[str]) -> np.ndarray:
    """The texts' hashed feature counts, one dense float64 row per text, unnormalised."""
    matrix = np.zeros((len(texts), DIMENSIONS), dtype=np.float64)
    for row, text in enumerate(texts):
        counts = hashed_counts(text, DIMENSIONS, WORD_WEIGHT)
        if counts:
            matrix[row, list(counts)] = list(counts.values())
    return matrix


def embed(texts: Sequence[str], weights: np.ndarray | None = None) -> np.ndarray:
    """One L2-normalised float32 row per text; an empty text embeds to the zero vector.

    `weights` (one per feature) scale the counts before normalising: a corpus's inverse document
    frequencies, so what every text of it shares weighs little (see VectorIndex)."""
    matrix = _counts(texts)
    if weights is not None:
        matrix *= weights.reshape(1, -1)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0.0] = 1.0
    rows: np.ndarray = (matrix / norms).astype(np.float32)
    return rows


def inverse_frequencies(texts: Sequence[str]) -> np.ndarray:
    """Smoothed inverse document frequency of every feature over `texts` (scikit-learn's formula)."""
    present = (_counts(texts) > 0).sum(axis=0)
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
