"""Operator registry: name -> typed function, its role, category and the artifacts it reads and writes.

This is D-Bot's categories -> tools -> APIs hierarchy as data: the planner reads the catalogue,
validators check plans against it, and a brain's output can never name a tool outside it. It is
the one list of tools: the review's tasks, the MCP server's operator tools, ask's look-ups and the
LLM diagnosis's observations are all operators here, and each consumer offers `exposed(surface)`
with the operators' own parameter models, never a list of definitions of its own.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol, get_origin

from pydantic import BaseModel, ConfigDict, Field

from dbcrew.artifacts import Artifact
from dbcrew.errors import DbcrewError
from dbcrew.models import Brief, CatalogueEntry, Finding, Role, RootCause
from dbcrew.models.interval import PastInterval
from dbcrew.models.prometheus import PrometheusSource
from dbcrew.models.report import LlmAdditions
from dbcrew.settings.run import Settings
from dbcrew.settings.thresholds import Thresholds
from dbcrew.targets import PostgresTarget, Resumable, resumable
from dbcrew.vocabulary import Category, FindingCode, Scenario
from dbcrew.workspace import Workspace


class NoParams(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Surface(StrEnum):
    """Who offers an operator, and so what its first argument is (the operator's `context`).

    PLAN: a task of a review's strategy, in the planner's catalogue; called with an OperatorContext.
    MCP: a tool of `dbcrew mcp`, run on its own against a target (dbcrew/roles/ask/lookup.py).
    ASK: a look-up of `dbcrew ask` (the rules' slot filling and the model's ReAct loop), called with
    the question's one read-only session.
    DIAGNOSIS: a view the LLM diagnosis's experts observe, called with the sampled facts record.
    """

    PLAN = "plan"
    MCP = "mcp"
    ASK = "ask"
    DIAGNOSIS = "diagnosis"


class OperatorMisfit(DbcrewError):
    """The operator cannot serve its goal on this target; another operator (or plan) is needed."""


class Observation(BaseModel):
    """What one operator call returns: a short summary, findings, and the workspace keys it wrote."""

    summary: str
    findings: list[Finding] = Field(default_factory=list)
    artifacts: list[Artifact] = Field(default_factory=list)
    charts: list[str] = Field(default_factory=list)
    captions: dict[str, str] = Field(
        default_factory=dict, description="chart path -> what it shows and how to read its axes"
    )
    partial: str = Field(
        "", description="what this call could not see (coverage says 'ran, partial')"
    )
    refused_connections: int = Field(
        0,
        description="connection attempts the target refused while this call waited to resume its"
        " session (a restart, an outage): what it read spans the outage",
    )
    unjudged: list[FindingCode] = Field(
        default_factory=list,
        description="codes this call could not judge (too young counters, an outage, a privilege): an"
        " earlier finding of one that is missing now is not resolved",
    )
    root_causes: list[RootCause] = Field(
        default_factory=list, description="diagnosis only: the cross review's causes"
    )
    rows: list[dict[str, Any]] = Field(
        default_factory=list, description="the rows a look-up read (it writes no workspace table)"
    )


class LlmExperts(Protocol):
    """The run's LLM experts as an operator consults them (an operator declared `consults_llm`): the crew
    binds them to the run's brain and deadline (dbcrew/roles/diagnosis/review.py), so an operator asks a
    model without importing a role. `rules` are the cross review's causes; the experts read the sampled
    window (and the librarian's chunks) from `workspace` and keep their long observations there."""

    def __call__(
        self, workspace: Workspace, rules: list[RootCause], thresholds: Thresholds
    ) -> LlmAdditions: ...


@dataclass
class OperatorContext:
    """Everything an operator may touch. Targets are reached only through read-only sessions."""

    target: PostgresTarget
    workspace: Workspace
    settings: Settings
    brief: Brief | None
    run_dir: Path
    interval: PastInterval | None = (
        None  # a diagnosis of the past: its window comes from the stored samples
    )
    prometheus: PrometheusSource | None = (
        None  # with interval: the past is read from this Prometheus instead of the store
    )
    llm_experts: LlmExperts | None = (
        None  # the run's LLM experts; None when its brain is the rules (no `consults_llm` operator is planned)
    )

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
    fn: Callable[[Any, BaseModel], Observation]
    params_model: type[BaseModel]
    context: type = field(
        default=OperatorContext,
        metadata={
            "doc": "what the first argument is: an OperatorContext, a read-only session, a facts record (see Surface)"
        },
    )
    surfaces: frozenset[Surface] = frozenset({Surface.PLAN})
    needs: tuple[Artifact, ...] = ()
    produces: tuple[Artifact, ...] = ()
    uses: tuple[Artifact, ...] = ()
    requires: tuple[str, ...] = ()
    equivalent_of: str | None = None
    checks: tuple[FindingCode, ...] = field(
        default=(), metadata={"doc": "finding codes it can emit"}
    )
    prepare: Callable[[], None] | None = field(
        default=None,
        metadata={
            "doc": "work the operator's first call would wait for (loading a library), done before it runs; see dbcrew/roles/crew/preparing.py"
        },
    )
    planned_for: frozenset[Scenario] = field(
        default=frozenset(),
        metadata={
            "doc": "scenarios whose every plan carries it, whatever the alert (the window's sampling, the cross review)"
        },
    )
    signals: tuple[str, ...] = field(
        default=(),
        metadata={"doc": "metric-name prefixes whose abnormality it judges (an expert's)"},
    )
    knowledge: str | None = field(
        default=None,
        metadata={
            "doc": "the knowledge chunks it owns (their `expert`), read by the planner's matching"
        },
    )
    consults_llm: bool = field(
        default=False,
        metadata={
            "doc": "asks the run's LLM (its context's `llm_experts`): in the catalogue only when the run's"
            " brain is one, and work that can wait (a model only adds to the rules' answer)"
        },
    )

    def run(self, ctx: Any, params: dict[str, Any]) -> Observation:
        """Validate `params` against the operator's model (pydantic.ValidationError when they do not fit) and call it."""
        return self.fn(ctx, self.params_model.model_validate(params))

    def params_schema(self) -> dict[str, Any]:
        """The parameters' JSON schema, a copy the caller may edit (a tool spec, a catalogue entry)."""
        return copy.deepcopy(self._params_schema)

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
            params_schema=self.params_schema(),
            planned_for=sorted(self.planned_for),
            signals=list(self.signals),
            knowledge=self.knowledge,
            consults_llm=self.consults_llm,
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
    needs: tuple[Artifact, ...] = (),
    produces: tuple[Artifact, ...] = (),
    uses: tuple[Artifact, ...] = (),
    requires: tuple[str, ...] = (),
    equivalent_of: str | None = None,
    checks: tuple[FindingCode, ...] = (),
    prepare: Callable[[], None] | None = None,
    surfaces: frozenset[Surface] | None = None,
    planned_for: frozenset[Scenario] = frozenset(),
    signals: tuple[str, ...] = (),
    knowledge: str | None = None,
    consults_llm: bool = False,
) -> Callable[[Callable[..., Observation]], Callable[..., Observation]]:
    """Register a function `fn(ctx, params) -> Observation`; its docstring is what the planner (or a model) reads.

    `needs` are artifacts it cannot run without; `uses` are artifacts it reads when the plan has them;
    all three are keys declared beside their producers (dbcrew/artifacts.py), never bare names.
    `surfaces` default to the plan, and the MCP server too for a collector that needs nothing from
    upstream (it stands alone); the type of `ctx` is the operator's `context`. `planned_for`, `signals`
    and `knowledge` are what the planner composes a team by (dbcrew/roles/brains/composing.py).
    `consults_llm`: it asks the run's LLM (OperatorContext.llm_experts), so only an LLM run's catalogue
    holds it (dbcrew/roles/crew/capabilities.py) and it is work that can wait (dbcrew/roles/crew/execution.py).
    """

    def register(fn: Callable[..., Observation]) -> Callable[..., Observation]:
        signature = inspect.signature(fn, eval_str=True)
        params = list(signature.parameters.values())
        model = params[1].annotation if len(params) > 1 else NoParams
        context = params[0].annotation
        name = fn.__name__
        if name in REGISTRY:
            raise ValueError(f"operator {name} registered twice")
        if context is inspect.Parameter.empty:
            raise TypeError(
                f"operator {name}: annotate its first parameter, the context its surfaces call it with"
            )
        REGISTRY[name] = Operator(
            name=name,
            role=role,
            category=category,
            description=inspect.getdoc(fn) or "",
            fn=fn if len(params) > 1 else (lambda ctx, _p: fn(ctx)),
            params_model=model,
            context=get_origin(context) or context,
            surfaces=_surfaces(role, category, needs) if surfaces is None else surfaces,
            needs=needs,
            produces=produces,
            uses=uses,
            requires=requires,
            equivalent_of=equivalent_of,
            checks=checks,
            prepare=prepare,
            planned_for=planned_for,
            signals=signals,
            knowledge=knowledge,
            consults_llm=consults_llm,
        )
        return fn

    return register


def _surfaces(role: Role, category: Category, needs: tuple[Artifact, ...]) -> frozenset[Surface]:
    standalone = role is Role.EXTRACTOR and category is Category.COLLECT and not needs
    return frozenset({Surface.PLAN, Surface.MCP} if standalone else {Surface.PLAN})


def exposed(surface: Surface) -> list[Operator]:
    """The operators `surface` offers, in registration order."""
    return [op for op in REGISTRY.values() if surface in op.surfaces]


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
    """What the planner may put in a strategy: the operators of the plan surface."""
    return [op.entry() for op in exposed(Surface.PLAN)]
