"""Hashed n-gram features in plain Python: scikit-learn's HashingVectorizer without importing it.

The embedder's features are character n-grams within word boundaries (3-5, `char_wb`) and word
unigrams (`\\b\\w\\w+\\b`), of the lower-cased text, each hashed by MurmurHash3 (32-bit, seed 0) into
one of `dimensions` columns, as scikit-learn computes them: the same column for the same n-gram,
so every cosine, threshold and test written against scikit-learn's vectors holds unchanged
(tests/unit/test_text.py compares the two). Importing scikit-learn's text module costs about a
second of CPU, which a diagnosis's composed plan paid before its window, on the critical path; the
hashing here costs milliseconds for the catalogue's passages (the columns of n-grams already seen
are cached).
"""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache

_MASK = 0xFFFFFFFF
_C1, _C2 = 0xCC9E2D51, 0x1B873593
_SPACES = re.compile(r"\s\s+")
_WORD = re.compile(r"(?u)\b\w\w+\b")
CHAR_NGRAMS = (3, 5)


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK


def murmurhash3_32(data: bytes, seed: int = 0) -> int:
    """MurmurHash3 x86 32-bit of `data`, as a signed 32-bit integer (scikit-learn's murmurhash3_32)."""
    h = seed & _MASK
    end = len(data) & ~3
    for i in range(0, end, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (_rotl((k * _C1) & _MASK, 15) * _C2) & _MASK
        h = (_rotl(h ^ k, 13) * 5 + 0xE6546B64) & _MASK
    tail = data[end:]
    if tail:
        k = int.from_bytes(tail, "little")
        h ^= (_rotl((k * _C1) & _MASK, 15) * _C2) & _MASK
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK
    h ^= h >> 16
    return h - (1 << 32) if h & 0x80000000 else h


@lru_cache(maxsize=1 << 16)
def column(feature: str, dimensions: int) -> int:
    """The column a feature hashes to (scikit-learn's: |h| mod dimensions, h = -2**31 defined)."""
    h = murmurhash3_32(feature.encode("utf-8"))
    if h == -(1 << 31):
        return (2147483647 - (dimensions - 1)) % dimensions
    return abs(h) % dimensions


def char_ngrams(text: str) -> list[str]:
    """Character n-grams within word boundaries, each word padded with a space (`char_wb`)."""
    low, high = CHAR_NGRAMS
    grams: list[str] = []
    for word in _SPACES.sub(" ", text.lower()).split():
        padded = f" {word} "
        for n in range(low, high + 1):
            if len(padded) <= n:  # a word shorter than n counts once, as itself, and ends the sizes
                grams.append(padded)
                break
            grams.extend(padded[i : i + n] for i in range(len(padded) - n + 1))
    return grams


def word_unigrams(text: str) -> list[str]:
    """Words of two or more word characters, lower-cased (scikit-learn's default token pattern)."""
    return _WORD.findall(text.lower())


def hashed_counts(text: str, dimensions: int, word_weight: float) -> dict[int, float]:
    """column -> count of `text`'s character n-grams plus `word_weight` times its words' counts."""
    counts: dict[int, float] = {}
    for grams, weight in ((char_ngrams(text), 1.0), (word_unigrams(text), word_weight)):
        for gram, times in Counter(grams).items():
            col = column(gram, dimensions)
            counts[col] = counts.get(col, 0.0) + weight * times
    return counts
