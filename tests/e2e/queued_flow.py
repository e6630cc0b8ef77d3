"""A flow for the worker's own tests: installed (a module path), quick, and touching nothing."""

from __future__ import annotations

from prefect import flow


@flow(name="queued_noop")
def queued_noop() -> int:
    return 1
