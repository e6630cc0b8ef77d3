"""The process's cache of the agent loops' answers, one per directory (DBCREW_LLM_CACHE_DIR): a diagnosis
or a question asked again, here or in a later run, asks the endpoint nothing twice."""

from __future__ import annotations

from pathlib import Path

from dbcrew.llm.client import ResponseCache, llm_cache_dir

_CACHES: dict[
    Path | None, ResponseCache
] = {}  # the process's answers by request, one cache per directory


def response_cache() -> ResponseCache:
    """The process's cache of answers, kept on disk too when DBCREW_LLM_CACHE_DIR says where: a
    diagnosis run again (here or in a later run) asks nothing twice."""
    directory = llm_cache_dir()
    return _CACHES.setdefault(directory, ResponseCache(directory=directory))
