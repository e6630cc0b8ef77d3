"""What the planner (and any brain) may know about an operator: data, not code."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from dbcrew.artifacts import Artifact
from dbcrew.models.plan import Role
from dbcrew.vocabulary import Category, Scenario


class CatalogueEntry(BaseModel):
    name: str
    role: Role
    category: Category
    description: str
    needs: list[Artifact] = Field(default_factory=list)
    produces: list[Artifact] = Field(default_factory=list)
    uses: list[Artifact] = Field(default_factory=list)
    checks: list[str] = Field(default_factory=list)
    requires: list[str] = Field(
        default_factory=list, description="target capabilities it cannot run without"
    )
    equivalent_of: str | None = None
    params_schema: dict[str, Any] = Field(default_factory=dict)
    planned_for: list[Scenario] = Field(
        default_factory=list,
        description="scenarios whose every plan carries it (declared, never chosen by the alert)",
    )
    signals: list[str] = Field(
        default_factory=list, description="metric-name prefixes whose abnormality it judges"
    )
    knowledge: str | None = Field(
        None, description="whose knowledge chunks describe what it finds (their `expert`)"
    )
    consults_llm: bool = Field(
        False,
        description="asks the run's LLM: offered only when the run's brain is one, and work that can wait",
    )
