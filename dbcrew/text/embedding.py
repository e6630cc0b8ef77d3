"""An offline embedder and a faiss index over its vectors.

Nothing may download a model at run time, so the vectors are hashed character n-grams (within
word boundaries) plus word unigrams: close spellings ("canceling"/"cancelled", "privilege"/
"privileges") land near each other, which is the similarity error texts and knowledge chunks need.
Vectors are L2-normalised, so faiss's inner product is the cosine. The hashing is plain Python and
numpy (dbcrew/text/hashing.py: scikit-learn's HashingVectorizer, column for column, without its
second of import); faiss loads on first use (about 0.1 s of CPU), which a flow run that embeds nothing never
pays.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dbcrew.text.hashing import hashed_counts

DIMENSIONS = 2**14
WORD_WEIGHT = 2.0  # a whole word shared counts twice one of its n-grams


Rows = list[tuple[np.ndarray, np.ndarray]]  # per text: its columns, and their counts (float64)


def _rows(texts: Sequence[str]) -> Rows:
    """The texts' hashed feature counts, sparse: a text holds a few hundred of the columns."""
    return [
        (np.fromiter(counts, dtype=np.int64, count=len(counts)), np.array(list(counts.values())))
        for counts in hashed_counts(texts, DIMENSIONS, WORD_WEIGHT)
    ]


def embed(texts: Sequence[str], weights: np.ndarray | None = None) -> np.ndarray:
    """One L2-normalised float32 row per text; an empty text embeds to the zero vector.

    `weights` (one per feature) scale the counts before normalising: a corpus's inverse document
    frequencies, so what every text of it shares weighs little (see VectorIndex)."""
    return _normalised(_rows(texts), weights)


def _normalised(rows: Rows, weights: np.ndarray | None) -> np.ndarray:
    """The rows weighted and L2-normalised in float64, as dense float32 rows (what faiss holds)."""
    out = np.zeros((len(rows), DIMENSIONS), dtype=np.float32)
    for i, (cols, counts) in enumerate(rows):
        values = counts * weights[cols] if weights is not None else counts
        norm = np.sqrt(np.add.reduce(values * values))
        if norm:
            out[i, cols] = values / norm
    return out


def inverse_frequencies(texts: Sequence[str]) -> np.ndarray:
    """Smoothed inverse document frequency of every feature over `texts` (scikit-learn's formula)."""
    return _inverse_frequencies(_rows(texts))


def _inverse_frequencies(rows: Rows) -> np.ndarray:
    present = np.zeros(DIMENSIONS, dtype=np.int64)
    for cols, _counts in rows:
        present[cols] += 1
    weights: np.ndarray = (np.log((1 + len(rows)) / (1 + present)) + 1.0).astype(np.float32)
    return weights


class VectorIndex:
    """Exact cosine search over a small corpus (error-tree leaves, knowledge chunks).

    `weighted`: features are weighted by their inverse frequency over the corpus, so texts that all
    share a vocabulary (the operators' descriptions all speak of tables, statements and indexes) are
    told apart by what only some of them say."""

    def __init__(self, texts: Sequence[str], weighted: bool = False):
        import faiss

        self.size = len(texts)
        self._weights: np.ndarray | None = None
        self._index = faiss.IndexFlatIP(DIMENSIONS)
        if texts:
            rows = _rows(texts)  # hashed once, for the weights and the vectors
            if weighted:
                self._weights = _inverse_frequencies(rows)
            self._index.add(_normalised(rows, self._weights))

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
