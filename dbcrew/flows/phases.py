"""The three phases, initialize, execute and replan, as Prefect flows (`PrefectPhases`, what a review run
of `health_review` uses): each a subflow run of the review's flow run, with its artifacts. The same dbcrew/roles/
steps run as plain calls in dbcrew/roles/spine.py (`PlainPhases`), whose loop takes either, and as plain calls
inside the review's own flow run with the same artifacts (`InRunPhases`, what a review of the pool runs).

Why a review of the pool (`review_target`: the fleet, the schedules, the on-demand form, an incident's
diagnosis) runs its phases in its own flow run: each subflow is a flow run of its own and each batch of
operators a task run (two to three subflows and about nine task runs a health review), each with its
states, its parent task run and its parameters walked and sent to the server, which a fleet of a
thousand reviews pays a thousand times, on the worker and on the server. The review's flow run stays
the UI's unit per target, with its plan, re-plan, report, findings and outcome artifacts."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import Any, cast

from prefect import Flow, flow
from prefect.futures import PrefectFuture, wait
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from dbcrew.flows.artifacts import post_edits, post_strategy
from dbcrew.flows.heartbeats import without_heartbeats
from dbcrew.flows.runner import Bundle, PrefectRunner
from dbcrew.models import Brief, Strategy
from dbcrew.roles.crew import run as steps  # the phases' steps (a flow parameter is named run)
from dbcrew.roles.crew.context import RunContext, operator_context
from dbcrew.roles.crew.execution import ExecutionResult, ExecutionState, execute
from dbcrew.roles.crew.faults import FaultInjector
from dbcrew.roles.crew.run import Initialized, ReplanOutcome


def initialized_and_posted(run: RunContext) -> Initialized:
    """Probe the target, plan the team and its tasks, reflect on the plan; post the plan (and the lessons
    from memory applied to it) to the flow run it runs in."""
    init = steps.initialize(run)
    post_strategy(run, init.strategy, f"Plan for the {run.scenario} review")
    if init.edits:
        post_edits(
            run, init.edits, [], title="Lessons from memory applied to the plan", kind="memory"
        )
    return init


def replanned_and_posted(run: RunContext, brief: Brief, result: ExecutionResult) -> ReplanOutcome:
    """Gap-narrow re-plan: the smallest change that closes the gap the monitor found; its edits posted to
    the flow run it runs in."""
    outcome = steps.replan_phase(run, brief, result)
    post_edits(run, outcome.edits, outcome.rejected)
    return outcome


@flow(name="initialize", flow_run_name="initialize-{run.run_id}", validate_parameters=False)
def initialize(run: RunContext) -> Initialized:
    """Probe the target, plan the team and its tasks, reflect on the plan."""
    return initialized_and_posted(run)


@flow(name="execute", flow_run_name="execute-{run.run_id}", validate_parameters=False)
def execute_phase(
    run: RunContext, brief: Brief, strategy: Strategy, state: ExecutionState
) -> ExecutionResult:
    """Walk the plan's DAG; ready tasks run concurrently, each batch started together as one Prefect task."""
    with ThreadPoolExecutor(
        max_workers=run.settings.max_workers, thread_name_prefix="dbcrew-operator"
    ) as pool:
        bundle = Bundle(
            ctx=operator_context(run, brief),
            injector=FaultInjector(run.faults, run.target),
            retries=run.worker_retries,
            pool=pool,
        )
        runner = PrefectRunner(bundle)
        result = execute(strategy, state, runner, run.monitor(), run.deadline)
        wait(
            runner.task_runs
        )  # every task run has its final state before the flow run gets its own
    return result


@flow(name="replan", flow_run_name="replan-{run.run_id}", validate_parameters=False)
def replan(run: RunContext, brief: Brief, result: ExecutionResult) -> ReplanOutcome:
    """Gap-narrow re-plan: the smallest change that closes the gap the monitor found."""
    return replanned_and_posted(run, brief, result)


class PrefectPhases:
    """The phases as flows: each a subflow run of the review's flow run, with its artifacts."""

    @staticmethod
    def initialize(run: RunContext) -> Initialized:
        with without_heartbeats():
            return initialize(run)

    @staticmethod
    def execute(
        run: RunContext, brief: Brief, strategy: Strategy, state: ExecutionState
    ) -> ExecutionResult:
        with without_heartbeats():
            return execute_with(run.settings.max_workers)(run, brief, strategy, state)

    @staticmethod
    def replan(run: RunContext, brief: Brief, result: ExecutionResult) -> ReplanOutcome:
        with without_heartbeats():
            return replan(run, brief, result)


class InRunPhases:
    """The phases as plain calls inside the review's own flow run, which gets their artifacts: no subflow
    runs, no task runs (the module's docstring says why a review of the pool runs them so)."""

    initialize = staticmethod(initialized_and_posted)
    execute = staticmethod(steps.execute_plain)
    replan = staticmethod(replanned_and_posted)


@cache
def execute_with(max_workers: int) -> Flow[..., ExecutionResult]:
    """The execute flow on a pool of `max_workers` threads; made once per size (a flow's copy builds its parameter
    schema, which a worker running many reviews would otherwise pay for each one). Each call gets its own pool."""
    # Prefect types the option invariant in the future type, so no concrete runner fits it without
    # this cast (its own default, in Flow.__init__, is cast the same way).
    runner = cast(TaskRunner[PrefectFuture[Any]], ThreadPoolTaskRunner(max_workers=max_workers))
    return execute_phase.with_options(task_runner=runner)
