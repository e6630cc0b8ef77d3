"""The steps of one review's phases: initialize, execute, re-plan, remember, and the book kept of them.

The loop that sequences them, initialize -> execute -> (re-plan -> execute)*, is dbcrew/roles/spine.py's;
these steps call nothing above them, so the same steps run as Prefect flows or as plain calls.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

from pydantic import BaseModel, Field

from dbcrew import stopping
from dbcrew.llm.base import Brain
from dbcrew.models import Brief, Finding, Strategy, TaskSpec
from dbcrew.models.crew import FailedCall, PlanRequest, Recommendation, ReplanRequest
from dbcrew.models.plan import PlanEdit
from dbcrew.models.report import CoverageEntry, CoverageStatus, Phases, SkipCause, SkipKind
from dbcrew.operators.checks.age_history import stage_earlier_age
from dbcrew.operators.collect import probe
from dbcrew.operators.diagnose.baselines import stage_stored_baseline
from dbcrew.operators.registry import catalogue
from dbcrew.roles.brains.rules import RulesBrain
from dbcrew.roles.brains.team_fit import uncovered
from dbcrew.roles.crew.capabilities import plan_constraints, prune
from dbcrew.roles.crew.context import RunContext, operator_context
from dbcrew.roles.crew.execution import ExecutionResult, ExecutionState, FutureRunner, execute
from dbcrew.roles.crew.faults import FaultInjector, damage_plan
from dbcrew.roles.crew.memory import (
    Lesson,
    LongTermMemory,
    UnfixedError,
    apply_lessons,
    failed_calls,
    from_memory,
    lessons_from,
    recall,
    remember_run,
    remembered_fixes,
    target_identity,
    unfixed_from,
)
from dbcrew.roles.crew.planner import make_plan
from dbcrew.roles.crew.replanner import replan
from dbcrew.roles.crew.worker import TaskOutcome, perform
from dbcrew.vocabulary import Scenario, TaskStatus
from dbcrew.workspace import Workspace


class Initialized(BaseModel):
    brief: Brief
    strategy: Strategy
    coverage: list[CoverageEntry]
    findings: list[Finding]
    reflection_rounds: int
    identity: str = Field("", description="the target's identity in long-term memory (no password)")
    edits: list[PlanEdit] = Field(
        default_factory=list, description="lessons from long-term memory applied to the plan"
    )
    unfixed: list[UnfixedError] = Field(
        default_factory=list,
        description="errors earlier runs left unfixed on this target (long-term memory)",
    )


class ReplanOutcome(BaseModel):
    strategy: Strategy
    edits: list[PlanEdit]
    rejected: list[str]
    regenerations: int = 0


def planning_brain(run: RunContext) -> Brain:
    """Who plans the run: the run's brain, except for a live diagnosis, whose evidence is the window
    it samples now. The anomaly it is asked about may be over by the time a model has planned and
    critiqued (7.5 minutes with a small local model on 2 cores), so the rules plan it (the team the
    alert calls for, else the playbook) and sampling starts at once; the model's part in a diagnosis, its experts, comes after."""
    if run.scenario is Scenario.DIAGNOSE and run.interval is None:
        return RulesBrain()
    return run.shared_brain


def initialize(run: RunContext) -> Initialized:
    """Probe the target into a brief, prune the catalogue by it, plan, reflect, then apply known lessons."""
    run.out_dir.mkdir(parents=True, exist_ok=True)
    brief = probe(operator_context(run, None))
    known_as = target_identity(run.target, brief)  # the target's identity in the store
    if run.scenario is Scenario.DIAGNOSE and not run.settings.baseline_path:
        stage_stored_baseline(Workspace(run.workspace_path), known_as, run.settings.store_url)
    if run.scenario is Scenario.HEALTH:
        stage_earlier_age(Workspace(run.workspace_path), known_as, run.settings.store_url)
    caps = prune(brief, catalogue(), llm=run.consults_llm)
    request = PlanRequest(
        scenario=run.scenario,
        brief=brief,
        catalogue=caps.available,
        constraints=plan_constraints(brief, run.deadline.left()),
        alert=run.settings.alert,
        signals=run.signals,
        compose=run.settings.ablations.composition,
    )
    planned = make_plan(
        planning_brain(run),
        request,
        run.settings.max_reflection_rounds,
        reflection=run.settings.ablations.reflection,
        draft=lambda strategy: damage_plan(strategy, run.faults),
    )
    strategy, rounds = planned.strategy, len(planned.rounds)
    identity = ""
    edits: list[PlanEdit] = []
    unfixed: list[UnfixedError] = []
    if run.settings.ablations.memory:
        identity = known_as

        def known(memory: LongTermMemory) -> tuple[list[Lesson], list[UnfixedError]]:
            return recall(memory, identity, strategy), memory.unfixed(identity)

        nothing: tuple[list[Lesson], list[UnfixedError]] = ([], [])
        lessons, unfixed = from_memory(run.settings.store_url, known, nothing)
        strategy, edits = apply_lessons(strategy, lessons, caps.available)
    return Initialized(
        brief=brief,
        strategy=strategy,
        coverage=[*caps.coverage, *signal_gaps(request, strategy)],
        findings=caps.findings,
        reflection_rounds=rounds,
        identity=identity,
        edits=edits,
        unfixed=unfixed,
    )


def signal_gaps(request: PlanRequest, strategy: Strategy) -> list[CoverageEntry]:
    """A signal the alert names that no operator on the team judges, said in the coverage (never a
    silent all-clear): reflection adds the operator that judges it when this target can run one."""
    return [
        CoverageEntry.of(
            f"signal {metric}",
            CoverageStatus.SKIPPED,
            SkipCause(
                kind=SkipKind.NO_SOURCE,
                detail=f"the alert names {metric}, and no operator this target can run judges it",
            ),
        )
        for metric in uncovered(request, strategy)
    ]


def replan_phase(run: RunContext, brief: Brief, result: ExecutionResult) -> ReplanOutcome:
    assert result.replan_for is not None
    caps = prune(brief, catalogue(), llm=run.consults_llm)
    done = [
        k
        for k, o in result.state.outcomes.items()
        if o.status is TaskStatus.DONE and k in {t.id for t in result.strategy.tasks}
    ]
    ablations = run.settings.ablations
    recommendations = result.recommendations
    remembered: list[Lesson] = []
    failed_before = failed_calls(result.state.outcomes) if ablations.memory else []
    if ablations.memory:
        recommendations = with_remembered_fixes(run, brief, result)
        remembered = fixes_for_the_failure(run, brief, result, failed_before)
    request = ReplanRequest(
        scenario=run.scenario,
        brief=brief,
        catalogue=caps.available,
        strategy=result.strategy,
        completed=done,
        failed=result.replan_for.task_id,
        recommendations=recommendations,
        alert=result.replan_for,
        state=result.replan_state,
        escalated=result.escalated,
        failed_before=failed_before,
    )
    planned = replan(
        run.shared_brain,
        request,
        run.settings.max_reflection_rounds,
        gap_narrow=ablations.gap_narrow,
        reflection=ablations.reflection,
        max_regenerations=run.settings.max_regenerations,
        remembered=remembered,
    )
    return ReplanOutcome(
        strategy=planned.strategy,
        edits=planned.edits,
        rejected=planned.rejected,
        regenerations=planned.regenerations,
    )


def with_remembered_fixes(
    run: RunContext, brief: Brief, result: ExecutionResult
) -> list[Recommendation]:
    """The monitor's recommendations, each told what fixed the failed operator before (hybrid recall by the error)."""
    alert = result.replan_for
    assert alert is not None
    identity = target_identity(run.target, brief)
    lessons: list[Lesson] = from_memory(
        run.settings.store_url,
        lambda memory: recall(
            memory, identity, result.strategy, error=f"{alert.error_type}: {alert.message}"
        ),
        [],
    )
    known = next((lesson for lesson in lessons if lesson.operator == alert.operator), None)
    if known is None:
        return result.recommendations
    hint = f"memory: {known.describe()}, running it as {known.fixed.operator} {known.fixed.params}"
    return [
        r.model_copy(update={"detail": f"{r.detail}; {hint}" if r.detail else hint})
        for r in result.recommendations
    ]


def fixes_for_the_failure(
    run: RunContext, brief: Brief, result: ExecutionResult, failed_before: list[FailedCall]
) -> list[Lesson]:
    """The lessons that fixed the failed operator for the error class the monitor just classified, on
    this target, less the fixes that already failed in this run: the re-plan applies the first that
    improves the plan."""
    alert = result.replan_for
    assert alert is not None
    leaf = next(
        (d.leaf for d in reversed(result.state.decisions) if d.task_id == alert.task_id), ""
    )
    identity = target_identity(run.target, brief)
    lessons: list[Lesson] = from_memory(
        run.settings.store_url, lambda memory: memory.lessons(identity), []
    )
    return remembered_fixes(lessons, alert.operator, leaf, failed_before)


class ThreadRunner(FutureRunner):
    """Runs tasks on a bounded thread pool: the plain (non-Prefect) runner."""

    def __init__(self, run: RunContext, brief: Brief, pool: ThreadPoolExecutor):
        self._ctx = operator_context(run, brief)
        self._injector = FaultInjector(run.faults, run.target)
        self._retries = run.worker_retries
        self._pool = pool

    def start(self, specs: list[TaskSpec]) -> list[Future[TaskOutcome]]:
        return [
            self._pool.submit(perform, spec, self._ctx, self._injector, self._retries)
            for spec in specs
        ]


def execute_plain(
    run: RunContext, brief: Brief, strategy: Strategy, state: ExecutionState
) -> ExecutionResult:
    pool = ThreadPoolExecutor(
        max_workers=run.settings.max_workers, thread_name_prefix="dbcrew-task"
    )
    try:
        return execute(strategy, state, ThreadRunner(run, brief, pool), run.monitor(), run.deadline)
    finally:
        # Not waited for: a chart the run stopped waiting for at its deadline finishes on its own
        # (execute returns only once every task the answer needs is done).
        pool.shutdown(wait=False, cancel_futures=True)


class ReviewResult(BaseModel):
    """What the phases produced; the report is built from it and the run's brain."""

    init: Initialized
    result: ExecutionResult
    phases: Phases
    edits: list[PlanEdit] = Field(
        default_factory=list, description="memory, monitor and re-plan edits, in order"
    )
    rejected: list[str] = Field(
        default_factory=list,
        description="re-plan edits refused by the gap-narrow rules or dropped as not improving the plan",
    )
    partial: bool = False
    partial_reason: str = ""


class PhaseLog:
    """The book of one review's phases, kept as dbcrew/roles/spine.py's loop runs them: the edits made and refused,
    the re-plans and their budget, the tasks a re-plan kept. `concluded` turns it into the ReviewResult."""

    def __init__(self, run: RunContext, init: Initialized):
        self.run = run
        self.init = init
        self.edits: list[PlanEdit] = list(init.edits)
        self.rejected: list[str] = []
        self.replans = self.regenerations = 0
        self._kept_done = 0  # completed tasks the last re-plan kept: reused, not run again
        self._instructed = 0  # monitor edits recorded before the last execution

    def first_state(self) -> ExecutionState:
        return ExecutionState(may_replan=self.run.settings.max_replans > 0)

    def executed(self, result: ExecutionResult) -> ExecutionResult:
        """Record what an execution did: its monitor edits, the kept tasks it reused."""
        result.state.reused += self._kept_done
        self.edits += result.state.edits[self._instructed :]
        return result

    def replan_due(self, result: ExecutionResult) -> bool:
        """A task needs a re-plan, the budget allows one, and no stop was asked for."""
        return (
            result.replan_for is not None
            and self.replans < self.run.settings.max_replans
            and not stopping.requested()
        )

    def next_state(self, result: ExecutionResult, outcome: ReplanOutcome) -> ExecutionState:
        """The state the re-planned strategy executes from: completed tasks it kept are reused, unless the
        gap-narrow rules are switched off (the whole new plan then runs again, from scratch)."""
        self.replans += 1
        self.edits += outcome.edits
        self.rejected += outcome.rejected
        self.regenerations += outcome.regenerations
        state = result.state
        if not self.run.settings.ablations.gap_narrow:
            state.outcomes.clear()
        kept = {t.id for t in outcome.strategy.tasks}
        self._kept_done = sum(
            1 for k, o in state.outcomes.items() if o.status is TaskStatus.DONE and k in kept
        )
        self._instructed = len(state.edits)
        state.may_replan = self.replans < self.run.settings.max_replans
        return state

    def concluded(self, result: ExecutionResult) -> ReviewResult:
        """The phases' result, partial when the re-plan budget ran out on a failing task or a stop cut tasks."""
        state = result.state
        partial_reason = ""
        stuck = state.refused[0] if state.refused else None
        if stuck is not None:
            partial_reason = (
                f"stopped re-planning after {self.replans} re-plans (the budget): {stuck.task_id} still"
                f" failed with {stuck.error_type}: {stuck.message}"
            )
        cut = [
            k
            for k, o in state.outcomes.items()
            if o.cause is not None and o.cause.kind is SkipKind.STOPPED
        ]
        if cut:
            stopped_by = f"{stopping.requested()}: {len(cut)} of {len(state.outcomes)} tasks did not complete"
            partial_reason = "; ".join(p for p in (stopped_by, partial_reason) if p)
        counters = Phases(
            plans=1 + self.replans,
            replans=self.replans,
            alerts=state.alerts,
            instructions=state.instructions,
            reused_tasks=state.reused,
            reexecuted_tasks=state.reexecuted,
            lessons_applied=len(self.init.edits),
            regenerations=self.regenerations,
        )
        return ReviewResult(
            init=self.init,
            result=result,
            phases=counters,
            edits=self.edits,
            rejected=self.rejected,
            partial=bool(partial_reason),
            partial_reason=partial_reason,
        )


def remember(run: RunContext, review: ReviewResult) -> None:
    """Sensory and short-term memory into the run's workspace; lessons that worked into long-term memory."""
    state = review.result.state
    remember_run(
        Workspace(run.workspace_path), run.run_id, state.outcomes, state.decisions, review.edits
    )
    if run.settings.ablations.memory and review.init.identity:
        lessons = lessons_from(
            review.init.identity,
            run.run_id,
            review.result.strategy,
            state.outcomes,
            state.decisions,
            review.edits,
        )
        if lessons:  # most runs learn nothing: no store connection for them
            from_memory(run.settings.store_url, lambda memory: memory.learn(lessons), None)
        unfixed = unfixed_from(
            review.init.identity, run.run_id, state.outcomes, state.decisions, review.edits
        )
        # What ran to the end, or was fixed by an edit that worked, has no error left on the target.
        ran = {o.operator for o in state.outcomes.values() if o.status is TaskStatus.DONE}
        ran |= {lesson.operator for lesson in lessons}
        if unfixed or review.init.unfixed:  # errors to keep, or known ones that may be gone now
            from_memory(
                run.settings.store_url,
                lambda memory: memory.keep_unfixed(review.init.identity, unfixed, ran),
                None,
            )
