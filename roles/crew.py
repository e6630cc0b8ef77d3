"""One review as plain Python: initialize -> execute -> (re-plan -> execute)* -> report.

`run_review` owns the loop; the phases it calls come from a `Phases` object, so the same loop
runs under Prefect (flows/) or directly (tests, the benchmark's baseline).
"""

from __future__ import annotations

import uuid
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, Field

from dbcrew.models import Brief, Finding, Strategy, TaskSpec
from dbcrew.models.crew import PlanRequest, ReplanRequest
from dbcrew.models.faults import FaultSpec
from dbcrew.models.report import CoverageEntry, LlmUsage, Phases
from dbcrew.settings import Settings
from dbcrew.targets import PostgresTarget
from dbcrew.workspace import Workspace
from error_tree import load_tree
from operators.collect import probe
from operators.registry import OperatorContext, catalogue
from roles.brains import make_brain
from roles.capabilities import prune
from roles.faults import FaultInjector
from roles.monitor import Monitor
from roles.planner import make_plan
from roles.replanner import PlanEdit, replan
from roles.tasker import ExecutionResult, ExecutionState, execute
from roles.worker import TaskOutcome, perform


class RunContext(BaseModel):
    """Everything a phase needs, password-free and serializable (it is a flow parameter)."""

    run_id: str = Field(default_factory=lambda: uuid.uuid4().hex[:12])
    target: PostgresTarget
    scenario: str = "health"
    settings: Settings = Field(default_factory=Settings)
    out_dir: Path
    brain: str = "rules"
    faults: list[FaultSpec] = Field(default_factory=list)
    started_at: datetime = Field(default_factory=lambda: datetime.now(UTC))

    @property
    def workspace_path(self) -> Path:
        return self.out_dir / "workspace.duckdb"


class Initialized(BaseModel):
    brief: Brief
    strategy: Strategy
    coverage: list[CoverageEntry]
    findings: list[Finding]
    reflection_rounds: int
    usage: LlmUsage


class ReplanOutcome(BaseModel):
    strategy: Strategy
    edits: list[PlanEdit]
    regenerated: list[str]
    usage: LlmUsage


def operator_context(run: RunContext, brief: Brief | None) -> OperatorContext:
    return OperatorContext(target=run.target, workspace=Workspace(run.workspace_path), settings=run.settings,
                           brief=brief, run_dir=run.out_dir)


def initialize(run: RunContext) -> Initialized:
    """Probe the target into a brief, prune the catalogue by it, plan and reflect."""
    run.out_dir.mkdir(parents=True, exist_ok=True)
    brief = probe(operator_context(run, None))
    caps = prune(brief, catalogue())
    brain = make_brain(run.brain)
    request = PlanRequest(scenario=run.scenario, brief=brief, catalogue=caps.available)
    planned = make_plan(brain, request, run.settings.max_reflection_rounds)
    return Initialized(brief=brief, strategy=planned.strategy, coverage=caps.coverage, findings=caps.findings,
                       reflection_rounds=len(planned.rounds), usage=brain.usage)


def replan_phase(run: RunContext, brief: Brief, result: ExecutionResult) -> ReplanOutcome:
    brain = make_brain(run.brain)
    assert result.replan_for is not None
    caps = prune(brief, catalogue())
    done = [k for k, o in result.state.outcomes.items() if o.status == "done" and k in {t.id for t in result.strategy.tasks}]
    request = ReplanRequest(scenario=run.scenario, brief=brief, catalogue=caps.available, strategy=result.strategy,
                            completed=done, failed=result.replan_for.task_id, recommendations=result.recommendations)
    planned = replan(brain, request, run.settings.max_reflection_rounds)
    return ReplanOutcome(strategy=planned.strategy, edits=planned.edits, regenerated=planned.regenerated, usage=brain.usage)


class ThreadRunner:
    """Runs tasks on a bounded thread pool: the plain (non-Prefect) runner."""

    def __init__(self, run: RunContext, brief: Brief, pool: ThreadPoolExecutor):
        self._ctx = operator_context(run, brief)
        self._injector = FaultInjector(run.faults, run.target)
        self._retries = run.settings.worker_retries
        self._pool = pool

    def start(self, spec: TaskSpec) -> Future[TaskOutcome]:
        return self._pool.submit(perform, spec, self._ctx, self._injector, self._retries)

    def wait_first(self, handles: list[Future[TaskOutcome]]) -> Future[TaskOutcome]:
        done, _ = wait(handles, return_when=FIRST_COMPLETED)
        return next(h for h in handles if h in done)

    def outcome(self, handle: Future[TaskOutcome]) -> TaskOutcome:
        return handle.result()


def execute_plain(run: RunContext, brief: Brief, strategy: Strategy, state: ExecutionState) -> ExecutionResult:
    with ThreadPoolExecutor(max_workers=run.settings.max_workers, thread_name_prefix="dbcrew-task") as pool:
        return execute(strategy, state, ThreadRunner(run, brief, pool), Monitor(load_tree(), make_brain(run.brain)))


class PhaseRunner(Protocol):
    def initialize(self, run: RunContext) -> Initialized: ...

    def execute(self, run: RunContext, brief: Brief, strategy: Strategy, state: ExecutionState) -> ExecutionResult: ...

    def replan(self, run: RunContext, brief: Brief, result: ExecutionResult) -> ReplanOutcome: ...


class PlainPhases:
    initialize = staticmethod(initialize)
    execute = staticmethod(execute_plain)
    replan = staticmethod(replan_phase)


class ReviewResult(BaseModel):
    init: Initialized
    result: ExecutionResult
    phases: Phases
    edits: list[PlanEdit] = Field(default_factory=list)
    usage: LlmUsage = Field(default_factory=LlmUsage)
    partial: bool = False


def _add(a: LlmUsage, b: LlmUsage) -> LlmUsage:
    return LlmUsage(calls=a.calls + b.calls, prompt_tokens=a.prompt_tokens + b.prompt_tokens,
                    completion_tokens=a.completion_tokens + b.completion_tokens)


def run_review(run: RunContext, phases: PhaseRunner) -> ReviewResult:
    init = phases.initialize(run)
    usage = init.usage
    result = phases.execute(run, init.brief, init.strategy, ExecutionState())
    edits: list[PlanEdit] = []
    replans = 0
    while result.replan_for is not None and replans < run.settings.max_replans:
        replans += 1
        outcome = phases.replan(run, init.brief, result)
        usage = _add(usage, outcome.usage)
        edits += outcome.edits
        kept = {t.id for t in outcome.strategy.tasks}
        before = {k for k, o in result.state.outcomes.items() if o.status == "done" and k in kept}
        result = phases.execute(run, init.brief, outcome.strategy, result.state)
        result.state.reused += len(before)
    state = result.state
    counters = Phases(plans=1 + replans, replans=replans, alerts=state.alerts, instructions=state.instructions,
                      reused_tasks=state.reused)
    return ReviewResult(init=init, result=result, phases=counters, edits=edits, usage=usage,
                        partial=result.replan_for is not None)
