"""Operator registry: name -> typed function, its role, category and the artifacts it reads and writes.

This is D-Bot's categories -> tools -> APIs hierarchy as data: the planner reads the catalogue,
validators check plans against it, and a brain's output can never name a tool outside it.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from dbcrew.errors import DbcrewError
from dbcrew.models import Brief, CatalogueEntry, Finding, Role, RootCause
from dbcrew.settings import Settings
from dbcrew.targets import PostgresTarget, Resumable, resumable
from dbcrew.vocabulary import Category, FindingCode
from dbcrew.workspace import Workspace


class NoParams(BaseModel):
    model_config = ConfigDict(extra="forbid")


class OperatorMisfit(DbcrewError):
    """The operator cannot serve its goal on this target; another operator (or plan) is needed."""


class Observation(BaseModel):
    """What one operator call returns: a short summary, findings, and the workspace keys it wrote."""

    summary: str
    findings: list[Finding] = Field(default_factory=list)
    artifacts: list[str] = Field(default_factory=list)
    charts: list[str] = Field(default_factory=list)
    captions: dict[str, str] = Field(
        default_factory=dict, description="chart path -> what it shows and how to read its axes"
    )
    partial: str = Field(
        "", description="what this call could not see (coverage says 'ran, partial')"
    )
    root_causes: list[RootCause] = Field(
        default_factory=list, description="diagnosis only: the cross review's causes"
    )


@dataclass
class OperatorContext:
    """Everything an operator may touch. Targets are reached only through read-only sessions."""

    target: PostgresTarget
    workspace: Workspace
    settings: Settings
    brief: Brief | None
    run_dir: Path

    def resuming(self) -> dict[str, Any]:
        """How a session reading across the window outlives its backend (`resumable`'s options): resumed on
        a new one when the server ends it, waiting (target_wait_seconds) for a restarting server.
        Reconnect-and-resume is the worker correcting itself, so `--no-reflection` turns it off: the
        first ended session is the task's failure."""
        return {
            "wait": self.settings.target_wait_seconds,
            "resume": self.settings.ablations.reflection,
        }

    def session(self) -> AbstractContextManager[Resumable]:
        """A session for reads across the window (see `resuming`)."""
        return resumable(self.target, **self.resuming())

    def server_version(self) -> int:
        """The target's server_version_num: the probe's, or asked of the server when an operator runs without a
        brief (never assumed: a wrong guess picks a statistics view the server does not have)."""
        if self.brief is not None:
            return self.brief.server_version_num
        with self.target.session() as conn:
            return conn.info.server_version

    def window(self, requested: float | None) -> float:
        """The seconds a task samples: a plan may ask for less than the run's window, never more,
        so a model's parameters cannot outgrow the user's `--window`."""
        run = self.settings.window_seconds
        return run if requested is None else min(requested, run)


@dataclass(frozen=True)
class Operator:
    name: str
    role: Role
    category: Category
    description: str
    fn: Callable[[OperatorContext, BaseModel], Observation]
    params_model: type[BaseModel]
    needs: tuple[str, ...] = ()
    produces: tuple[str, ...] = ()
    uses: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()
    equivalent_of: str | None = None
    checks: tuple[FindingCode, ...] = field(
        default=(), metadata={"doc": "finding codes it can emit"}
    )
    prepare: Callable[[], None] | None = field(
        default=None,
        metadata={
            "doc": "work the operator's first call would wait for (loading a library), done before it runs; see roles/preparing.py"
        },
    )

    def run(self, ctx: OperatorContext, params: dict[str, Any]) -> Observation:
        return self.fn(ctx, self.params_model.model_validate(params))

    def entry(self) -> CatalogueEntry:
        return CatalogueEntry(
            name=self.name,
            role=self.role,
            category=self.category,
            description=self.description,
            needs=list(self.needs),
            produces=list(self.produces),
            uses=list(self.uses),
            checks=list(self.checks),
            requires=list(self.requires),
            equivalent_of=self.equivalent_of,
            params_schema=copy.deepcopy(self._params_schema),
        )

    @cached_property
    def _params_schema(self) -> dict[str, Any]:
        """The parameters' JSON schema, built once: pydantic builds it anew on every call (~1 ms an
        operator), and every review's planner reads the whole catalogue. Entries get copies to edit."""
        return self.params_model.model_json_schema()


REGISTRY: dict[str, Operator] = {}


def operator(
    *,
    role: Role,
    category: Category,
    needs: tuple[str, ...] = (),
    produces: tuple[str, ...] = (),
    uses: tuple[str, ...] = (),
    requires: tuple[str, ...] = (),
    equivalent_of: str | None = None,
    checks: tuple[FindingCode, ...] = (),
    prepare: Callable[[], None] | None = None,
) -> Callable[[Callable[..., Observation]], Callable[..., Observation]]:
    """Register a function `fn(ctx, params) -> Observation`; its docstring is what the planner reads.

    `needs` are artifacts it cannot run without; `uses` are artifacts it reads when the plan has them.
    """

    def register(fn: Callable[..., Observation]) -> Callable[..., Observation]:
        signature = inspect.signature(fn, eval_str=True)
        params = list(signature.parameters.values())
        model = params[1].annotation if len(params) > 1 else NoParams
        name = fn.__name__
        if name in REGISTRY:
            raise ValueError(f"operator {name} registered twice")
        REGISTRY[name] = Operator(
            name=name,
            role=role,
            category=category,
            description=inspect.getdoc(fn) or "",
            fn=fn if len(params) > 1 else (lambda ctx, _p: fn(ctx)),
            params_model=model,
            needs=needs,
            produces=produces,
            uses=uses,
            requires=requires,
            equivalent_of=equivalent_of,
            checks=checks,
            prepare=prepare,
        )
        return fn

    return register


def get(name: str) -> Operator:
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown operator {name!r}") from None


def equivalents(name: str) -> list[Operator]:
    """Operators that produce the same artifacts by other means (for 'use an equivalent operator')."""
    base = get(name)
    root = base.equivalent_of or base.name
    return [
        op
        for op in REGISTRY.values()
        if op.name != name and (op.name == root or op.equivalent_of == root)
    ]


def catalogue() -> list[CatalogueEntry]:
    return [op.entry() for op in REGISTRY.values()]
