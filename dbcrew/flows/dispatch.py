"""Prefect calls made with `async_dispatch` (Block.load, run_deployment, Flow.to_deployment), from sync code.

Such a call is typed `T | Coroutine[..., T]`: it runs the async implementation when called from an
event loop or an async flow or task, and the sync one otherwise. The crew's flows and its command
line are sync, so they always get the value itself.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def ran_sync(result: T | Coroutine[Any, Any, T]) -> T:
    """The value of an `async_dispatch` call made from sync code (never a coroutine there)."""
    assert not isinstance(result, Coroutine), "an async_dispatch call made from async code"
    return result
