"""Things built once and kept between runs as pickles in the cache directory (the manual's index, the router).

The file's name carries the fingerprint of what it was built from, so a changed input builds a new
one; a file that holds something else (an older class) is built again. The write goes through a
partial file that replaces the old one, so a reader never sees half a pickle.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def cached(path: Path, kind: type[T], build: Callable[[], T]) -> T:
    """The `kind` pickled at `path`, else `build()`'s result, pickled there."""
    if path.exists():
        with path.open("rb") as handle:
            loaded = pickle.load(handle)
        if isinstance(loaded, kind):
            return loaded
    built = build()
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    with partial.open("wb") as handle:
        pickle.dump(built, handle, protocol=pickle.HIGHEST_PROTOCOL)
    partial.replace(path)
    return built
