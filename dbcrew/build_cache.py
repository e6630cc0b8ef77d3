"""Objects built once and kept between runs (the manual's search index, the question router).

One home for the cache's rules: a file per content digest under `cache_root()`, written to a
partial file and renamed (a reader never sees half a pickle, and concurrent builders race
harmlessly), and a file holding anything but the expected type is built again, as is one written by
another version whose classes no longer load (a module moved or renamed: the pickle names it).
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import TypeVar

from dbcrew.settings.paths import cache_root

T = TypeVar("T")


def cached_build(kind: str, digest: str, expected: type[T], build: Callable[[], T]) -> T:
    """The `expected` object cached as `kind/digest`, else `build()`, stored for the next run."""
    path = cache_root() / kind / f"{digest}.pickle"
    if path.exists():
        try:
            with path.open("rb") as handle:
                loaded = pickle.load(handle)
        except (ImportError, AttributeError, pickle.UnpicklingError, EOFError):
            loaded = None  # written by another version of the code: built again below
        if isinstance(loaded, expected):
            return loaded
    built = build()
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{id(built)}.partial")
    with partial.open("wb") as handle:
        pickle.dump(built, handle, protocol=pickle.HIGHEST_PROTOCOL)
    partial.replace(path)
    return built
