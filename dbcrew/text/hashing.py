"""Hashed n-gram features in plain Python and numpy: scikit-learn's HashingVectorizer without importing it.

The embedder's features are character n-grams within word boundaries (3-5, `char_wb`) and word
unigrams (`\\b\\w\\w+\\b`), of the lower-cased text, each hashed by MurmurHash3 (x86, 32-bit, seed 0)
into one of `dimensions` columns, as scikit-learn computes them: the same column for the same
n-gram, so every cosine, threshold and test written against scikit-learn's vectors holds unchanged
(tests/unit/test_text.py compares the two). Importing scikit-learn's text module costs about a
second of CPU, which a diagnosis's composed plan paid before its window, on the critical path. Here
the n-grams not hashed before are hashed together, with numpy's wrapping uint32 arithmetic over
all n-grams of one byte length at a time, and their columns are kept for the next texts.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)
_SPACES = re.compile(r"\s\s+")
_WORD = re.compile(r"(?u)\b\w\w+\b")
CHAR_NGRAMS = (3, 5)
# Columns of the n-grams hashed so far, by dimensions; cleared past this many (a long-lived worker
# embeds new error texts and alerts for as long as it lives).
_KEPT = 1 << 17
_columns: dict[int, dict[str, int]] = {}


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _mix(k: np.ndarray) -> np.ndarray:
    return _rotl(k * _C1, 15) * _C2


def murmurhash3_32(items: Sequence[bytes]) -> np.ndarray:
    """MurmurHash3 x86 32-bit (seed 0) of each item, as signed 32-bit integers (int64), in order:
    scikit-learn's murmurhash3_32, computed for all items of one length at once."""
    out = np.zeros(len(items), dtype=np.int64)
    by_length: dict[int, list[int]] = {}
    for i, item in enumerate(items):
        by_length.setdefault(len(item), []).append(i)
    with np.errstate(over="ignore"):
        for length, positions in by_length.items():
            data = np.frombuffer(b"".join(items[i] for i in positions), dtype=np.uint8)
            data = data.reshape(len(positions), length).astype(np.uint32)
            h = np.zeros(len(positions), dtype=np.uint32)
            blocks = length // 4
            for b in range(blocks):
                k = data[:, 4 * b : 4 * b + 4]
                word = k[:, 0] | (k[:, 1] << 8) | (k[:, 2] << 16) | (k[:, 3] << 24)
                h = _rotl(h ^ _mix(word), 13) * np.uint32(5) + np.uint32(0xE6546B64)
            if length % 4:
                tail = np.zeros(len(positions), dtype=np.uint32)
                for j in range(length % 4):
                    tail |= data[:, 4 * blocks + j] << np.uint32(8 * j)
                h ^= _mix(tail)
            h ^= np.uint32(length)
            h ^= h >> np.uint32(16)
            h *= np.uint32(0x85EBCA6B)
            h ^= h >> np.uint32(13)
            h *= np.uint32(0xC2B2AE35)
            h ^= h >> np.uint32(16)
            out[positions] = h.view(np.int32)
    return out


def columns(features: Sequence[str], dimensions: int) -> list[int]:
    """The column each feature hashes to (scikit-learn's: |h| mod dimensions, h = -2**31 defined)."""
    known = _columns.setdefault(dimensions, {})
    new = list(dict.fromkeys(f for f in features if f not in known))
    if new:
        if len(known) + len(new) > _KEPT:
            known.clear()
        hashed = murmurhash3_32([f.encode("utf-8") for f in new])
        edge = (2147483647 - (dimensions - 1)) % dimensions  # |-2**31| overflows int32
        for feature, h in zip(new, hashed.tolist()):
            known[feature] = edge if h == -(1 << 31) else abs(h) % dimensions
    return [known[f] for f in features]


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


def hashed_counts(
    texts: Sequence[str], dimensions: int, word_weight: float
) -> list[dict[int, float]]:
    """Per text, column -> count of its character n-grams plus `word_weight` times its words' counts."""
    counted = [(Counter(char_ngrams(text)), Counter(word_unigrams(text))) for text in texts]
    features = [f for chars, words in counted for f in (*chars, *words)]
    where = dict(zip(features, columns(features, dimensions)))
    rows = []
    for chars, words in counted:
        row: dict[int, float] = {}
        for grams, weight in ((chars, 1.0), (words, word_weight)):
            for gram, times in grams.items():
                col = where[gram]
                row[col] = row.get(col, 0.0) + weight * times
        rows.append(row)
    return rows
