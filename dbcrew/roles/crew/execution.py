"""Execution of a strategy: its DAG walked, ready tasks run concurrently, failures go to the monitor.

The alert protocol: a worker whose task failed after its own self-correction broadcasts an alert.
Every worker pauses: nothing new starts, running tasks finish and report their state. The monitor
then sees the global state compacted to key facts and decides. An instruction (retry, use an
equivalent operator, change parameters, reorder, skip) is applied at once as a recorded plan edit;
a re-plan decision ends this execution so the planner can narrow the gap.
"""

from __future__ import annotations

from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import Any, Protocol

from pydantic import BaseModel, Field

from dbcrew import progress, stopping
from dbcrew.deadline import Deadline
from dbcrew.models import Role, Strategy, TaskSpec
from dbcrew.models.crew import Alert, Recommendation, WorkerReport
from dbcrew.models.plan import EditKind, PlanEdit
from dbcrew.models.report import Decision, GlobalStateRecord, SkipCause, SkipKind
from dbcrew.operators.registry import equivalents, get
from dbcrew.progress import ProgressEvent
from dbcrew.roles.crew.monitor import Monitor, MonitorDecision, compact_state
from dbcrew.roles.crew.preparing import start_preparing
from dbcrew.roles.crew.worker import (
    TaskOutcome,
    signature,
    skipped,
    stood_down,
    stopped,
    without_agent,
)
from dbcrew.vocabulary import Action, EditSource, TaskStatus

MAX_INSTRUCTIONS_PER_TASK = 2


class Runner(Protocol):
    """How tasks are run: a plain thread pool, or Prefect tasks (dbcrew/flows/).

    `start` gets the tasks that became ready together and returns one handle per task, in order:
    the monitor sees every task's outcome on its own, whichever way the runner groups them.
    """

    def start(self, specs: list[TaskSpec]) -> list[Any]: ...

    def wait_first(self, handles: list[Any], timeout: float | None = None) -> Any | None: ...

    def outcome(self, handle: Any) -> TaskOutcome: ...


class FutureRunner:
    """Waiting on handles that are `concurrent.futures` futures, one per task (both runners' handles)."""

    def wait_first(
        self, handles: list[Future[TaskOutcome]], timeout: float | None = None
    ) -> Future[TaskOutcome] | None:
        """The first handle done, or None when `timeout` seconds passed first."""
        done, _ = wait(handles, timeout=timeout, return_when=FIRST_COMPLETED)
        return next((h for h in handles if h in done), None)

    def outcome(self, handle: Future[TaskOutcome]) -> TaskOutcome:
        return handle.result()


class ExecutionState(BaseModel):
    """Survives re-plans: completed outcomes are reused when their task is unchanged."""

    outcomes: dict[str, TaskOutcome] = Field(default_factory=dict)
    decisions: list[Decision] = Field(default_factory=list)
    edits: list[PlanEdit] = Field(
        default_factory=list, description="plan edits made on the monitor's instructions"
    )
    alerts: int = 0
    instructions: int = 0
    reused: int = 0
    instructed: dict[str, int] = Field(default_factory=dict)
    original: list[str] = Field(
        default_factory=list, description="task ids of the first strategy executed"
    )
    started: list[str] = Field(default_factory=list, description="every task start, in order")
    reexecuted: int = Field(
        0, description="starts after the first alert of a task already started, or of a new task"
    )
    may_replan: bool = Field(True, description="False once the re-plan budget is spent")
    refused: list[Alert] = Field(
        default_factory=list, description="alerts that needed a re-plan after the budget was spent"
    )

    def record_start(self, task_id: str) -> None:
        if self.alerts and (task_id in self.started or task_id not in self.original):
            self.reexecuted += 1
        self.started.append(task_id)

    def by_status(self, strategy: Strategy) -> dict[str, list[str]]:
        by: dict[str, list[str]] = {
            s: [k for k, o in self.outcomes.items() if o.status is s] for s in TaskStatus
        }
        by["pending"] = [t.id for t in strategy.tasks if t.id not in self.outcomes]
        return by


class ExecutionResult(BaseModel):
    strategy: Strategy
    state: ExecutionState
    replan_for: Alert | None = None
    recommendations: list[Recommendation] = Field(default_factory=list)
    replan_state: GlobalStateRecord | None = Field(
        None, description="the global state the monitor saw at the alert that asks for the re-plan"
    )
    escalated: str = Field(
        "", description="why an instruction became the re-plan; empty for a logic failure"
    )


def _skip(state: ExecutionState, spec: TaskSpec, kind: SkipKind, upstream: str) -> None:
    """Skip `spec` because its upstream task did not complete; the reason is the cause rendered."""
    state.outcomes[spec.id] = skipped(spec, SkipCause(kind=kind, upstream=upstream))


def can_wait(spec: TaskSpec) -> bool:
    """Whether a task is work that can wait for the answer: a painter's chart adds to a report, and so
    does an operator that asks the run's LLM (a diagnosis's LLM experts: a model only adds to the
    rules' causes); a report without them still holds every cause found, so they stand down before a
    run's deadline."""
    op = get(spec.operator)
    return op.role is Role.PAINTER or op.consults_llm


def execute(
    strategy: Strategy,
    state: ExecutionState,
    runner: Runner,
    monitor: Monitor | None,
    deadline: Deadline | None = None,
) -> ExecutionResult:
    """Run every task of `strategy` not already completed with the same signature.

    `monitor=None` is the no-monitor ablation: a failed task stays failed and its dependents skip.
    With a `deadline`, work that can wait (`can_wait`) starts only once no task the answer needs is running or
    ready, so that on a saturated host it never takes CPU from the answer (the process may get 1 % of a
    core there, and each chart's fraction of a CPU-second then costs tens of seconds of the answer's wall).
    Near the deadline, work that can wait stands down instead of starting, and once
    only such work is left running the run stops waiting for it when the deadline's reserve begins: on a
    saturated host a chart started in time took 46 s of wall for a fraction of a CPU-second, and held
    the report past its deadline. Work that bounds its own time by the deadline (`bounds_itself`: the LLM
    experts) is waited for: it stops where the reserve begins.
    """
    for spec in strategy.tasks:
        kept = state.outcomes.get(spec.id)
        if (
            kept is not None
            and kept.status is TaskStatus.DONE
            and kept.signature == signature(spec)
        ):
            continue
        state.outcomes.pop(spec.id, None)
    if not state.original:
        state.original = [t.id for t in strategy.tasks]
    start_preparing(t for t in strategy.tasks if t.id not in state.outcomes)
    running: dict[str, Any] = {}
    unhandled: list[
        TaskOutcome
    ] = []  # failures that finished while the crew was paused for another alert
    progress.emit(
        ProgressEvent.PLAN,
        total=len(strategy.tasks),
        done=sum(1 for t in strategy.tasks if t.id in state.outcomes),
    )
    while True:
        outcome = unhandled.pop(0) if unhandled else None
        if outcome is None and stopping.requested():
            for spec in (
                strategy.tasks
            ):  # nothing new starts; what runs winds down (dbcrew/roles/crew/worker.py)
                if spec.id not in state.outcomes and spec.id not in running:
                    state.outcomes[spec.id] = stopped(spec)
        elif outcome is None:
            batch = []
            ready = _ready(strategy, state, running)
            answering = [s.id for s in ready if not can_wait(s)]
            answering += [t for t in running if not can_wait(strategy.task(t))]
            for spec in ready:
                if deadline is not None and can_wait(spec) and deadline.near():
                    state.outcomes[spec.id] = stood_down(spec, deadline)
                    continue
                if deadline is not None and can_wait(spec) and answering:
                    continue  # after the answer: it starts once nothing the answer needs runs or waits
                state.record_start(spec.id)
                if strategy.agent(spec.agent) is None:
                    outcome = without_agent(spec)
                    break
                batch.append(spec)
            if batch:
                running.update(zip([s.id for s in batch], runner.start(batch), strict=True))
        if outcome is None:
            if not running:
                return ExecutionResult(strategy=strategy, state=state)
            handle = runner.wait_first(
                list(running.values()), _patience(strategy, running, deadline)
            )
            if handle is None and deadline is not None:
                # only work that can wait is left running, and the deadline's reserve began
                for task_id in list(running):
                    del running[task_id]
                    state.outcomes[task_id] = stood_down(
                        strategy.task(task_id), deadline, running=True
                    )
                continue
            task_id = next(k for k, h in running.items() if h is handle)
            del running[task_id]
            outcome = runner.outcome(handle)
        state.outcomes[outcome.task_id] = outcome
        progress.emit(ProgressEvent.TASK, task_id=outcome.task_id, status=outcome.status)
        if outcome.status is not TaskStatus.FAILED or stopping.requested():
            continue
        spec = strategy.task(outcome.task_id)
        alert = broadcast(state, spec, outcome)
        paused = _pause(strategy, state, runner, running, unhandled)
        if monitor is None:
            _fail_downstream(strategy, state, spec.id)
            continue
        decision = monitor.decide(
            alert, compact_state(alert, state.by_status(strategy), paused), state.decisions
        )
        if not decision.replan and state.instructed.get(spec.id, 0) >= MAX_INSTRUCTIONS_PER_TASK:
            decision = monitor.escalate(
                alert, decision, state.instructed[spec.id]
            )  # an instruction that failed twice
        state.decisions.append(decision.record)
        if decision.replan and not state.may_replan:
            # The budget is spent: the failure stays, its dependents skip, everything else still runs.
            decision.record.remedy += " (refused: the re-plan budget is spent)"
            state.refused.append(alert)
            _fail_downstream(strategy, state, spec.id)
            continue
        if decision.replan:
            return ExecutionResult(
                strategy=strategy,
                state=state,
                replan_for=alert,
                recommendations=decision.recommendations,
                replan_state=decision.record.state,
                escalated=decision.escalated,
            )
        if decision.wait and monitor.await_target is not None:
            still = monitor.await_target(decision.wait)
            decision.record.remedy += (
                " (the target answered)"
                if still is None
                else f" (still unreachable after {still:.0f} s)"
            )
        strategy = _apply_instruction(strategy, state, spec, decision)


def bounds_itself(spec: TaskSpec) -> bool:
    """Whether a task started as work that can wait ends by itself where the deadline's reserve begins: an
    operator that asks the run's LLM gets the time left until then as its experts' budget (each call's
    timeout included), so once running it is waited for and what its experts confirmed in time is
    written with the rest, as a budget that runs out leaves it. A chart has no such budget."""
    return get(spec.operator).consults_llm


def _patience(
    strategy: Strategy, running: dict[str, Any], deadline: Deadline | None
) -> float | None:
    """How long to wait for the next running task: without limit while anything running is needed for the
    answer or bounds its own time by the deadline, else until the deadline's reserve begins."""
    if deadline is None or not all(
        can_wait(spec) and not bounds_itself(spec) for spec in (strategy.task(t) for t in running)
    ):
        return None
    return deadline.until_reserve()


def broadcast(state: ExecutionState, spec: TaskSpec, outcome: TaskOutcome) -> Alert:
    """The failing worker's alert: its error, the task's parameters, its attempts and its log."""
    state.alerts += 1
    return Alert(
        task_id=spec.id,
        agent=spec.agent,
        operator=spec.operator,
        error_type=outcome.attempts[-1].error_type if outcome.attempts else "Unknown",
        message=outcome.reason,
        params=dict(spec.params),
        attempts=outcome.attempts,
        logs=outcome.log,
    )


def _pause(
    strategy: Strategy,
    state: ExecutionState,
    runner: Runner,
    running: dict[str, Any],
    unhandled: list[TaskOutcome],
) -> list[WorkerReport]:
    """Start nothing new; let every running task finish and report its state."""
    reports = []
    for task_id, handle in list(running.items()):
        outcome = runner.outcome(handle)
        del running[task_id]
        state.outcomes[task_id] = outcome
        progress.emit(ProgressEvent.TASK, task_id=task_id, status=outcome.status)
        if outcome.status is TaskStatus.FAILED:
            unhandled.append(outcome)
        summary = outcome.observation.summary if outcome.observation else outcome.reason
        reports.append(
            WorkerReport(
                agent=strategy.task(task_id).agent,
                task_id=task_id,
                status=outcome.status,
                summary=summary,
            )
        )
    return reports


def _ready(strategy: Strategy, state: ExecutionState, running: dict[str, Any]) -> list[TaskSpec]:
    ready = []
    for spec in strategy.tasks:
        if spec.id in state.outcomes or spec.id in running:
            continue
        upstream = [state.outcomes.get(n) for n in spec.needs]
        blocked = next(
            (
                o
                for o in upstream
                if o is not None
                and o.status is not TaskStatus.DONE
                and _hard(strategy, spec, o.task_id)
            ),
            None,
        )
        if blocked is not None:
            _skip(state, spec, SkipKind.UPSTREAM_INCOMPLETE, blocked.task_id)
            continue
        if all(o is not None for o in upstream):
            ready.append(spec)
    return ready


def _hard(strategy: Strategy, spec: TaskSpec, upstream_id: str) -> bool:
    """Whether `spec` cannot run without `upstream_id`: it produces something the operator *needs*.

    An artifact the operator only *uses* (reads when present) is a soft dependency: its
    producer's failure degrades the task instead of skipping it.
    """
    try:
        upstream, needed = strategy.task(upstream_id), set(get(spec.operator).needs)
    except KeyError:  # an upstream or operator the plan no longer knows: assume the worst
        return True
    return not upstream.produces or bool(needed & set(upstream.produces))


def _fail_downstream(strategy: Strategy, state: ExecutionState, task_id: str) -> None:
    """Skip what cannot run without `task_id`, following hard dependencies only."""
    for other in strategy.tasks:
        if (
            task_id in other.needs
            and other.id not in state.outcomes
            and _hard(strategy, other, task_id)
        ):
            _skip(state, other, SkipKind.UPSTREAM_FAILED, task_id)
            _fail_downstream(strategy, state, other.id)


def _edit(
    state: ExecutionState,
    strategy: Strategy,
    kind: EditKind,
    spec: TaskSpec,
    new: TaskSpec,
    reason: str,
) -> Strategy:
    """Apply a monitor instruction as a recorded plan edit; the edited task runs again."""
    edit = PlanEdit.of_task(kind, spec, new, EditSource.MONITOR, reason)
    state.edits.append(edit)
    state.outcomes.pop(edit.task_id, None)
    return strategy.apply(edit)


def _apply_instruction(
    strategy: Strategy, state: ExecutionState, spec: TaskSpec, decision: MonitorDecision
) -> Strategy:
    state.instructions += 1
    state.instructed[spec.id] = state.instructed.get(spec.id, 0) + 1
    action = decision.action
    reason = f"monitor: {decision.record.leaf}"
    if action is Action.RETRY:
        del state.outcomes[spec.id]
        return strategy
    if action is Action.USE_EQUIVALENT:
        alternative = next(iter(equivalents(spec.operator)), None)
        if alternative is not None:
            new = spec.model_copy(update={"id": alternative.name, "operator": alternative.name})
            state.instructed[new.id] = state.instructed[spec.id]
            return _edit(state, strategy, EditKind.REPLACE, spec, new, reason)
    if action is Action.CHANGE_PARAMS:
        if decision.params != spec.params:
            new = spec.model_copy(update={"params": decision.params})
            return _edit(state, strategy, EditKind.CHANGE_PARAMS, spec, new, reason)
        del state.outcomes[spec.id]  # nothing to change: the same call once more
        return strategy
    if action is Action.REORDER:
        needs = _producers_of_inputs(strategy, spec)
        if needs != spec.needs:
            new = spec.model_copy(update={"needs": needs})
            return _edit(state, strategy, EditKind.REORDER, spec, new, reason)
    # SKIP (or nothing to change): the task stays failed, with the reason, and its dependents skip.
    failed = state.outcomes[spec.id]
    state.outcomes[spec.id] = failed.model_copy(
        update={
            "status": TaskStatus.FAILED,
            "reason": f"{failed.reason} (skipped on the monitor's instruction)",
        }
    )
    _fail_downstream(strategy, state, spec.id)
    return strategy


def _producers_of_inputs(strategy: Strategy, spec: TaskSpec) -> list[str]:
    """The task's needs plus every task that produces an artifact its operator reads (never its own dependents)."""
    op = get(spec.operator)
    inputs = set(op.needs) | set(op.uses)
    downstream = strategy.downstream(spec.id)
    extra = [t.id for t in strategy.tasks if t.id not in downstream and inputs & set(t.produces)]
    return list(dict.fromkeys([*spec.needs, *extra]))
