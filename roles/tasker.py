"""The tasker walks the strategy's DAG: ready tasks run concurrently, failures go to the monitor.

On a failed task the tasker broadcasts the alert: it stops starting tasks, lets running ones
finish and report, then hands the alert and the global state to the monitor. An instruction is
applied at once; a re-plan decision ends this execution so the planner can narrow the gap.
"""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import BaseModel, Field

from dbcrew import progress
from dbcrew.models import Strategy, TaskSpec
from dbcrew.models.crew import Action, Alert, Recommendation
from dbcrew.models.report import Decision
from operators.registry import equivalents
from roles.monitor import GlobalState, Monitor
from roles.worker import Status, TaskOutcome, signature

MAX_INSTRUCTIONS_PER_TASK = 2


class Runner(Protocol):
    """How tasks are run: a plain thread pool, or Prefect tasks (flows/)."""

    def start(self, spec: TaskSpec) -> Any: ...

    def wait_first(self, handles: list[Any]) -> Any: ...

    def outcome(self, handle: Any) -> TaskOutcome: ...


class ExecutionState(BaseModel):
    """Survives re-plans: completed outcomes are reused when their task is unchanged."""

    outcomes: dict[str, TaskOutcome] = Field(default_factory=dict)
    decisions: list[Decision] = Field(default_factory=list)
    alerts: int = 0
    instructions: int = 0
    reused: int = 0
    instructed: dict[str, int] = Field(default_factory=dict)

    def global_state(self) -> GlobalState:
        by = {s: [k for k, o in self.outcomes.items() if o.status is s] for s in Status}
        return GlobalState(done=by[Status.DONE], failed=by[Status.FAILED], skipped=by[Status.SKIPPED])


class ExecutionResult(BaseModel):
    strategy: Strategy
    state: ExecutionState
    replan_for: Alert | None = None
    recommendations: list[Recommendation] = Field(default_factory=list)


def _skip(state: ExecutionState, spec: TaskSpec, reason: str, status: Status = Status.SKIPPED) -> None:
    state.outcomes[spec.id] = TaskOutcome(task_id=spec.id, operator=spec.operator, status=status, reason=reason, signature=signature(spec))


def execute(strategy: Strategy, state: ExecutionState, runner: Runner, monitor: Monitor | None) -> ExecutionResult:
    """Run every task of `strategy` not already completed with the same signature."""
    for spec in strategy.tasks:
        kept = state.outcomes.get(spec.id)
        if kept is not None and kept.status is Status.DONE and kept.signature == signature(spec):
            continue
        state.outcomes.pop(spec.id, None)
    running: dict[str, Any] = {}
    halted = False
    progress.emit("plan", total=len(strategy.tasks), done=sum(1 for t in strategy.tasks if t.id in state.outcomes))
    while True:
        if not halted:
            for spec in _ready(strategy, state, running):
                running[spec.id] = runner.start(spec)
        if not running:
            return ExecutionResult(strategy=strategy, state=state)
        handle = runner.wait_first(list(running.values()))
        task_id = next(k for k, h in running.items() if h is handle)
        del running[task_id]
        outcome = runner.outcome(handle)
        state.outcomes[task_id] = outcome
        progress.emit("task", task_id=task_id, status=outcome.status.value)
        if outcome.status is not Status.FAILED:
            continue
        # Broadcast: start nothing new, let running tasks finish and report their state.
        state.alerts += 1
        spec = strategy.task(task_id)
        alert = Alert(task_id=task_id, agent=spec.agent, operator=spec.operator,
                      error_type=outcome.attempts[-1].error_type if outcome.attempts else "Unknown",
                      message=outcome.reason, attempts=outcome.attempts)
        for other_id, other in list(running.items()):
            state.outcomes[other_id] = runner.outcome(runner.wait_first([other]))
            del running[other_id]
        if monitor is None:
            # Without a monitor (ablation) a failure simply stays failed.
            _fail_downstream(strategy, state, task_id)
            continue
        decision = monitor.decide(alert, state.global_state())
        state.decisions.append(decision.record)
        if decision.replan:
            return ExecutionResult(strategy=strategy, state=state, replan_for=alert, recommendations=decision.recommendations)
        strategy = _apply_instruction(strategy, state, spec, decision.action)


def _ready(strategy: Strategy, state: ExecutionState, running: dict[str, Any]) -> list[TaskSpec]:
    ready = []
    for spec in strategy.tasks:
        if spec.id in state.outcomes or spec.id in running:
            continue
        upstream = [state.outcomes.get(n) for n in spec.needs]
        if any(o is not None and o.status is not Status.DONE for o in upstream):
            blocked = next(o for o in upstream if o is not None and o.status is not Status.DONE)
            _skip(state, spec, f"upstream {blocked.task_id} did not complete")
            continue
        if all(o is not None for o in upstream):
            ready.append(spec)
    return ready


def _fail_downstream(strategy: Strategy, state: ExecutionState, task_id: str) -> None:
    for other in strategy.downstream(task_id) - {task_id}:
        if other not in state.outcomes:
            _skip(state, strategy.task(other), f"upstream {task_id} failed")


def _apply_instruction(strategy: Strategy, state: ExecutionState, spec: TaskSpec, action: Action) -> Strategy:
    state.instructions += 1
    state.instructed[spec.id] = state.instructed.get(spec.id, 0) + 1
    failed = state.outcomes[spec.id]
    if state.instructed[spec.id] > MAX_INSTRUCTIONS_PER_TASK:
        action = Action.SKIP  # no endless retry loops
    if action is Action.RETRY:
        del state.outcomes[spec.id]
        return strategy
    if action is Action.USE_EQUIVALENT:
        alternative = next(iter(equivalents(spec.operator)), None)
        if alternative is not None:
            new = spec.model_copy(update={"id": alternative.name, "operator": alternative.name})
            return strategy.replace_task(spec.id, new).with_tool(spec.agent, alternative.name)
    # SKIP (or no equivalent): the task stays failed, with the reason, and its dependents skip.
    state.outcomes[spec.id] = failed.model_copy(update={"status": Status.FAILED, "reason": f"{failed.reason} (skipped on the monitor's instruction)"})
    _fail_downstream(strategy, state, spec.id)
    return strategy
