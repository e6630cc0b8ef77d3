"""A worker performs one task: runs its operator, reflects on a failure and retries (at most 2).

What the worker cannot fix becomes a failed outcome carrying every attempt; the tasker turns it
into an error alert for the monitor. Nothing is swallowed: each exception is recorded as an attempt.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Any

import psycopg
from psycopg import errors as pgerrors
from pydantic import BaseModel, Field, ValidationError

from dbcrew import stopping
from dbcrew.deadline import Deadline
from dbcrew.errors import TargetError
from dbcrew.models import TaskSpec
from dbcrew.models.crew import Attempt
from dbcrew.models.report import SkipCause, SkipKind
from dbcrew.operators.registry import Observation, OperatorContext, OperatorMisfit, get
from dbcrew.roles.crew.faults import FaultInjector
from dbcrew.targets.postgres import PostgresTarget, first_line
from dbcrew.vocabulary import TaskStatus

# Failures that the same call will hit again: retrying them only wastes the budget.
NOT_RETRYABLE = (
    OperatorMisfit,
    pgerrors.InsufficientPrivilege,
    pgerrors.UndefinedTable,
    pgerrors.UndefinedFunction,
    pgerrors.UndefinedColumn,
    pgerrors.ObjectNotInPrerequisiteState,
)


# Targets a task of this process waited out in vain: later tasks fail at once instead of waiting
# again (the run stays bounded), until the target answers a probe.
_GONE: set[str] = set()
_GONE_LOCK = threading.Lock()
FIRST_PAUSE = 0.5
UNREACHABLE = "target unreachable for"


def wait_for_target(ctx: OperatorContext) -> float | None:
    """Probe the target with doubling pauses for at most `settings.target_wait_seconds`; None when it
    answers, else the seconds it stayed unreachable. A target already waited out in vain gets one probe."""
    budget = ctx.settings.target_wait_seconds
    with _GONE_LOCK:
        gone = ctx.target.dsn in _GONE
    waited = await_target(ctx.target, 0.0 if gone else budget)
    return None if waited is None else (budget if gone else waited)


def await_target(target: PostgresTarget, budget: float) -> float | None:
    """Probe `target` with doubling pauses for at most `budget` seconds: None when it answers, else the seconds waited.

    The monitor calls it too, with a budget of its own, before a retry of a task the target's outage failed.
    """
    started = time.monotonic()
    pause = FIRST_PAUSE
    while True:
        try:
            with target.session():
                pass
        except TargetError:
            waited = time.monotonic() - started
            if waited >= budget or stopping.pause(min(pause, budget - waited)):
                with _GONE_LOCK:
                    _GONE.add(target.dsn)
                return waited
            pause *= 2
            continue
        with _GONE_LOCK:
            _GONE.discard(target.dsn)
        return None


class TaskOutcome(BaseModel):
    task_id: str
    operator: str
    status: TaskStatus
    observation: Observation | None = None
    attempts: list[Attempt] = Field(default_factory=list)
    seconds: float = 0.0
    cpu_seconds: float = Field(
        0.0,
        description="CPU seconds of the worker's thread over its attempts: the operator's own work in this"
        " process (the database server's is not in it)",
    )
    reason: str = ""
    cause: SkipCause | None = Field(
        None, description="why it was skipped (its upstream task); None unless skipped"
    )
    signature: str = ""
    log: list[str] = Field(
        default_factory=list, description="the worker's own log: attempts, errors, reflections"
    )
    unreachable_seconds: float = Field(
        0.0, description="failed because the target did not answer for this long"
    )

    @property
    def interrupted(self) -> bool:
        """Whether the target went down under this task and came back: its session waited through
        refused connections (an ended session resumed at once is not an outage)."""
        return bool(self.observation and self.observation.refused_connections)


def signature(spec: TaskSpec) -> str:
    """What makes a completed result reusable after a re-plan: same operator and parameters."""
    return f"{spec.operator}:{sorted(spec.params.items())}"


def self_correct(
    exc: BaseException, params: dict[str, Any], timeout_ms: int
) -> tuple[str, dict[str, Any], int, bool]:
    """(reflection, next params, next statement timeout, retry?) for one failure."""
    if isinstance(exc, NOT_RETRYABLE):
        return "the same call would fail again; raising an alert", params, timeout_ms, False
    if isinstance(exc, ValidationError):
        return (
            "parameters did not validate; retrying with the operator's defaults",
            {},
            timeout_ms,
            True,
        )
    if isinstance(exc, pgerrors.QueryCanceled):
        return (
            f"statement timed out; retrying with statement_timeout {timeout_ms * 2} ms",
            params,
            timeout_ms * 2,
            True,
        )
    if isinstance(exc, (psycopg.OperationalError, TargetError)):
        return "connection problem; retrying after a short pause", params, timeout_ms, True
    return "unexpected failure; retrying once as it was", params, timeout_ms, True


def perform(
    spec: TaskSpec, ctx: OperatorContext, injector: FaultInjector, retries: int
) -> TaskOutcome:
    op = get(spec.operator)
    params = dict(spec.params)
    timeout_ms = ctx.target.statement_timeout_ms
    attempts: list[Attempt] = []
    log: list[str] = []
    started = time.monotonic()
    # The worker's own thread runs the operator: its CPU time is the task's, whatever else the process runs.
    cpu_started = time.thread_time()
    for attempt in range(retries + 1):
        if stopping.requested():
            return stopped(spec, log)
        log.append(
            f"attempt {attempt + 1}: {spec.operator} params={params} statement_timeout={timeout_ms}ms"
        )
        try:
            injector.before(spec.operator)
            run_ctx = replace(
                ctx, target=ctx.target.model_copy(update={"statement_timeout_ms": timeout_ms})
            )
            observation = op.run(run_ctx, params)
            if stopping.requested():  # cut short: what it saw is not the window that was asked for
                return stopped(spec, log)
            log.append(f"done: {observation.summary}")
            return TaskOutcome(
                task_id=spec.id,
                operator=spec.operator,
                status=TaskStatus.DONE,
                observation=observation,
                attempts=attempts,
                seconds=time.monotonic() - started,
                cpu_seconds=time.thread_time() - cpu_started,
                signature=signature(spec),
                log=log,
            )
        except Exception as exc:  # noqa: BLE001 - every failure becomes an attempt, then an alert
            message = first_line(exc)
            reflection, params, timeout_ms, retry = self_correct(exc, params, timeout_ms)
            if retries == 0:
                reflection = "self-correction is off: raising an alert"
            attempts.append(
                Attempt(
                    params=params,
                    error_type=type(exc).__name__,
                    message=message,
                    reflection=reflection,
                )
            )
            log += [f"failed: {type(exc).__name__}: {message}", f"reflection: {reflection}"]
            if isinstance(exc, (psycopg.OperationalError, TargetError)) and retries:
                unreachable = wait_for_target(ctx)
                if unreachable is not None:
                    message = f"{UNREACHABLE} {unreachable:.0f} s: {message}"
                    log.append(message)
                    return TaskOutcome(
                        task_id=spec.id,
                        operator=spec.operator,
                        status=TaskStatus.FAILED,
                        attempts=attempts,
                        seconds=time.monotonic() - started,
                        cpu_seconds=time.thread_time() - cpu_started,
                        reason=message,
                        signature=signature(spec),
                        log=log,
                        unreachable_seconds=unreachable,
                    )
            if not retry or attempt == retries:
                break
    return TaskOutcome(
        task_id=spec.id,
        operator=spec.operator,
        status=TaskStatus.FAILED,
        attempts=attempts,
        seconds=time.monotonic() - started,
        cpu_seconds=time.thread_time() - cpu_started,
        reason=attempts[-1].message if attempts else "",
        signature=signature(spec),
        log=log,
    )


def skipped(spec: TaskSpec, cause: SkipCause, log: list[str] | None = None) -> TaskOutcome:
    """The outcome of a task that did not run, and why (its reason is the cause rendered, once)."""
    return TaskOutcome(
        task_id=spec.id,
        operator=spec.operator,
        status=TaskStatus.SKIPPED,
        reason=cause.render(),
        cause=cause,
        signature=signature(spec),
        log=[*(log or []), cause.render()],
    )


def stopped(spec: TaskSpec, log: list[str] | None = None) -> TaskOutcome:
    """The outcome of a task the run was stopped before it completed (Ctrl-C, SIGTERM)."""
    return skipped(spec, SkipCause(kind=SkipKind.STOPPED, detail=stopping.requested()), log)


def stood_down(spec: TaskSpec, deadline: Deadline, running: bool = False) -> TaskOutcome:
    """The outcome of work that can wait, not started because the run's deadline is near, or (`running`)
    started but not waited for once the deadline's reserve began."""
    return skipped(
        spec, SkipCause(kind=SkipKind.DEADLINE, detail=deadline.stand_down_reason(running))
    )


def without_agent(spec: TaskSpec) -> TaskOutcome:
    """The outcome of a task no agent of the team can run: it fails before any call, and says why."""
    message = f"no agent {spec.agent!r} in the team to run {spec.operator}"
    return TaskOutcome(
        task_id=spec.id,
        operator=spec.operator,
        status=TaskStatus.FAILED,
        reason=message,
        attempts=[
            Attempt(
                params=dict(spec.params),
                error_type="MissingAgent",
                message=message,
                reflection="a worker cannot add an agent to the team; raising an alert",
            )
        ],
        signature=signature(spec),
        log=[f"MissingAgent: {message}"],
    )
