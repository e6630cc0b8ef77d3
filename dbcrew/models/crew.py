"""Messages between the crew's roles: plan requests, validation problems, alerts, recommendations."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field

from dbcrew.models.brief import Brief
from dbcrew.models.catalogue import CatalogueEntry
from dbcrew.models.plan import Strategy


class PlanRequest(BaseModel):
    scenario: str
    brief: Brief
    catalogue: list[CatalogueEntry]
    constraints: list[str] = Field(default_factory=list)


class Problem(BaseModel):
    """A deterministic validator's objection to a plan."""

    task_id: str | None
    kind: str
    message: str


class Attempt(BaseModel):
    params: dict[str, object] = Field(default_factory=dict)
    error_type: str
    message: str
    reflection: str = ""


class Alert(BaseModel):
    """What a worker broadcasts when self-correction is exhausted (ROMAS error alert)."""

    task_id: str
    agent: str
    operator: str
    error_type: str
    message: str
    params: dict[str, object] = Field(default_factory=dict, description="the task's parameters as planned")
    attempts: list[Attempt] = Field(default_factory=list)
    logs: list[str] = Field(default_factory=list, description="the failing worker's log tail")


class WorkerReport(BaseModel):
    """What a paused worker reports when an alert is broadcast: its task and how it ended."""

    agent: str
    task_id: str
    status: str
    summary: str = ""


class Action(StrEnum):
    # instructions the tasker applies at once
    RETRY = "retry"
    USE_EQUIVALENT = "use_equivalent"
    SKIP = "skip"
    CHANGE_PARAMS = "change_params"  # retry with parameters the monitor changed
    REORDER = "reorder"  # run the task after the ones it turned out to depend on
    # re-plan edits
    REPLACE_OPERATOR = "replace_operator"
    ADD_AGENT = "add_agent"
    REMOVE_SUBGRAPH = "remove_subgraph"


class Recommendation(BaseModel):
    action: Action
    task_id: str
    detail: str = ""


class ReplanRequest(BaseModel):
    scenario: str
    brief: Brief
    catalogue: list[CatalogueEntry]
    strategy: Strategy
    completed: list[str] = Field(description="task ids whose results are kept")
    failed: str
    recommendations: list[Recommendation]
