"""The worker's API client with its reads of deployments and flows kept for a while (`KeptReads`).

Before it runs a flow run, Prefect's worker reads the run's deployment twice (a check that it still
exists, then its job configuration) and its flow once, and the in-process worker reads the deployment
once more for its entrypoint: four requests a review, the same four answers for every review of a
fleet (one deployment, one flow), each a request the Prefect server answers and a response the worker
validates. Kept for KEEP_SECONDS, a fleet slot's reviews read them about once: measured on
`bench fleet`, 4.4 of the server's 46 requests a review. A deployment changed meanwhile (a
re-published inventory) is read again within KEEP_SECONDS; every other call goes to the client as is.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast
from uuid import UUID

from prefect.client.orchestration import PrefectClient
from prefect.client.schemas.objects import Flow
from prefect.client.schemas.responses import DeploymentResponse
from pydantic import BaseModel

KEEP_SECONDS = 30.0

M = TypeVar("M", bound=BaseModel)


class KeptReads:
    """`client` (the worker's), whose `read_deployment` and `read_flow` answers are kept KEEP_SECONDS by id.

    Each caller gets its own deep copy: Prefect's worker merges a run's job variables into the
    deployment's in place (`resolve_for_flow_run`), which must not reach the next run."""

    def __init__(self, client: PrefectClient, keep_seconds: float = KEEP_SECONDS) -> None:
        self._client = client
        self._keep = keep_seconds
        self._kept: dict[tuple[str, UUID], tuple[float, BaseModel]] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    async def read_deployment(self, deployment_id: UUID) -> DeploymentResponse:
        return await self._kept_read("deployment", deployment_id, self._client.read_deployment)

    async def read_flow(self, flow_id: UUID) -> Flow:
        return await self._kept_read("flow", flow_id, self._client.read_flow)

    async def _kept_read(self, kind: str, key: UUID, read: Callable[[UUID], Awaitable[M]]) -> M:
        now = time.monotonic()
        held = self._kept.get((kind, key))
        if held is None or now - held[0] > self._keep:
            held = (now, await read(key))  # a read that fails (ObjectNotFound) is not kept
            self._kept[(kind, key)] = held
        return cast(M, held[1].model_copy(deep=True))
