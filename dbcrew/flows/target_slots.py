"""One review per target at a time: a slot of the target's global concurrency limit, leased on the run's own client.

Each target has a global concurrency limit of one slot (`target_limit`, made when the inventory is published),
so a target whose review is still running when another starts (a fleet run beside a schedule's slot, an
incident's diagnosis) is never reviewed twice at once; the limit and its taken slot show in the Prefect UI.

Prefect's `concurrency()` context manager took the slot through a service made once per set of limit names
(a thousand targets: a thousand services in the worker, each with an API client of its own), renewed its lease
at once from a thread of its own, released it on yet another new client (certifi's CA bundle loaded for each,
about 15 ms of CPU), and emitted an event at each end: three requests, two clients, a thread and two events a
review. Here the slot is taken and released on the flow run's own client (`get_client(sync_client=True)` in a
flow run is its engine's): two requests, nothing more. The lease is not renewed: it is taken for the review's
whole deadline plus LEASE_MARGIN_SECONDS, so a worker that dies under a review frees the target's slot once
that time is up, as a lease Prefect stops renewing does after its 300 s.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import httpx
from prefect import get_run_logger
from prefect.client.orchestration import SyncPrefectClient, get_client
from prefect.client.schemas.responses import ConcurrencyLimitWithLeaseResponse

from dbcrew import stopping
from dbcrew.errors import DbcrewError

LEASE_MARGIN_SECONDS = (
    300.0  # beyond the review's deadline: how long a dead worker's slot stays taken at most
)
LOCKED = 423  # the server's answer while the slot is taken: retry after its Retry-After seconds


class StoppedWaiting(DbcrewError):
    """The process was asked to stop while the run waited for its target's slot."""


def target_limit(name: str) -> str:
    """The global concurrency limit that keeps one review per target at a time."""
    return f"dbcrew-target-{name}"


@contextmanager
def target_slot(name: str, seconds: float) -> Iterator[None]:
    """Hold the one review slot of target `name` for the block, waiting while another review holds it; `seconds`:
    how long the block should take at most (the review's deadline), the lease is that plus LEASE_MARGIN_SECONDS.
    Called in a flow run, whose engine's client it uses (not entered again: the worker's runs share one).
    A target with no limit (published before limits were made) is reviewed without one, with a warning."""
    limit = target_limit(name)
    client = get_client(sync_client=True)
    lease = ConcurrencyLimitWithLeaseResponse.model_validate(
        _taken(client, limit, seconds + LEASE_MARGIN_SECONDS).json()
    )
    if not lease.limits:
        get_run_logger().warning(
            "target %s has no concurrency limit %r: reviewed without one (publish the inventory to make it)",
            name,
            limit,
        )
        yield
        return
    try:
        yield
    finally:
        client.release_concurrency_slots_with_lease(lease.lease_id)


def _taken(client: SyncPrefectClient, limit: str, lease_seconds: float) -> httpx.Response:
    """The server's answer granting a slot of `limit`, asked again after each Retry-After while it is taken."""
    while True:
        try:
            return client.increment_concurrency_slots_with_lease(
                names=[limit], slots=1, mode="concurrency", lease_duration=lease_seconds
            )
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code != LOCKED:
                raise
            if stopping.pause(float(exc.response.headers.get("Retry-After", 1.0))):
                raise StoppedWaiting(
                    f"stopped while waiting for the review slot of {limit}"
                ) from None
