"""The LLM experts as a planned step of a diagnosis (dbcrew/operators/diagnose/llm_experts.py): planned after the
cross review only when the run's brain is an LLM, work that can wait under the run's deadline, and read by the
report only from a step that completed."""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dbcrew.deadline import Deadline
from dbcrew.models import AgentSpec, Brief, Role, RootCause, Strategy, TaskSpec
from dbcrew.models.crew import PlanRequest
from dbcrew.models.report import LlmAdditions, LlmDiagnosis, SkipKind
from dbcrew.operators.diagnose.llm_experts import LLM_ADDITIONS
from dbcrew.operators.registry import Observation, OperatorContext, catalogue
from dbcrew.roles.brains.rules import RulesBrain
from dbcrew.roles.crew.capabilities import prune
from dbcrew.roles.crew.context import RunContext, RunsLlmExperts, operator_context
from dbcrew.roles.crew.execution import (
    ExecutionResult,
    ExecutionState,
    FutureRunner,
    can_wait,
    execute,
)
from dbcrew.roles.crew.faults import FaultInjector
from dbcrew.roles.crew.planner import make_plan
from dbcrew.roles.crew.run import ReviewResult
from dbcrew.roles.crew.validators import validate
from dbcrew.roles.crew.worker import TaskOutcome, perform, stood_down
from dbcrew.roles.report.reporter import llm_additions
from dbcrew.settings.run import Settings
from dbcrew.targets import parse_target
from dbcrew.vocabulary import Scenario, TaskStatus
from dbcrew.workspace import Workspace

STEP = "consult_llm_experts"
CHIEF = "cross_review_causes"
BRIEF = Brief(
    server_version="18.1",
    server_version_num=180001,
    database="d",
    current_user="u",
    extensions=["pg_stat_statements"],
    has_statements=True,
)
TARGET = "postgresql://u@127.0.0.1:1/db"  # never reached: nothing here reads the target
# No alert: the playbook; an alert the locks expert matches: a composed team; the same without composition.
PLANS = (("", True), ("updates hang on row locks", True), ("updates hang on row locks", False))


def diagnosis_plans(llm: bool) -> list[tuple[Strategy, PlanRequest]]:
    """The rules' diagnosis plans over the catalogue a run with (or without) an LLM brain is offered."""
    available = prune(BRIEF, catalogue(), llm=llm).available
    planned = []
    for alert, compose in PLANS:
        request = PlanRequest(
            scenario=Scenario.DIAGNOSE,
            brief=BRIEF,
            catalogue=available,
            alert=alert,
            compose=compose,
        )
        planned.append((make_plan(RulesBrain(), request, 2).strategy, request))
    return planned


def test_a_rules_run_is_never_offered_the_llm_experts_and_plans_as_before():
    assert STEP not in {e.name for e in prune(BRIEF, catalogue()).available}
    for strategy, _ in diagnosis_plans(llm=False):
        assert STEP not in {t.operator for t in strategy.tasks}
        assert "llm-experts" not in {a.name for a in strategy.team}


def test_an_llm_run_plans_them_after_the_cross_review_on_their_own_agent():
    for strategy, request in diagnosis_plans(llm=True):
        assert validate(strategy, request.catalogue) == []
        by_operator = {t.operator: t for t in strategy.tasks}
        step, chief = by_operator[STEP], by_operator[CHIEF]
        assert chief.id in step.needs, step.needs  # it reads the cross review's causes
        agent = strategy.agent(step.agent)
        assert agent is not None and (agent.name, agent.role) == ("llm-experts", Role.TASKER)
        assert chief.agent == "chief-dba" and step.optional
        assert step.params == {}  # the team a composed plan tells the chief is not the step's


def test_the_llm_experts_are_work_that_can_wait_and_the_cross_review_is_not():
    assert can_wait(TaskSpec(id=STEP, agent="llm-experts", operator=STEP))
    assert not can_wait(TaskSpec(id=CHIEF, agent="chief-dba", operator=CHIEF))


def test_near_the_deadline_the_step_stands_down_and_the_coverage_can_say_so(tmp_path: Path):
    """The real step in the real execution loop: with less than the reserve left it is not started (it would
    fail at once here: this context has no LLM experts), and its outcome says why."""
    target = parse_target(TARGET)
    ctx = OperatorContext(
        target=target,
        workspace=Workspace(tmp_path / "w.duckdb"),
        settings=Settings(),
        brief=None,
        run_dir=tmp_path,
    )

    class Inline(FutureRunner):
        def start(self, specs: list[TaskSpec]) -> list[Future[TaskOutcome]]:
            handles: list[Future[TaskOutcome]] = []
            for spec in specs:
                handles.append(Future())
                handles[-1].set_result(perform(spec, ctx, FaultInjector([], target), 0))
            return handles

    strategy = Strategy(
        team=[AgentSpec(name="llm-experts", role=Role.TASKER, goal="add")],
        tasks=[TaskSpec(id=STEP, agent="llm-experts", operator=STEP)],
    )
    near = Deadline.after(datetime.now(UTC), seconds=5.0, reserve_seconds=15.0)
    outcome = execute(strategy, ExecutionState(), Inline(), None, near).state.outcomes[STEP]
    assert outcome.status is TaskStatus.SKIPPED
    assert outcome.cause is not None and outcome.cause.kind is SkipKind.DEADLINE
    assert "stood down: the run's deadline was" in outcome.reason


class ReserveBegun(Deadline):
    """A deadline whose reserve has begun once `begun` is set (none of the real clock's time involved)."""

    __slots__ = ()
    begun = threading.Event()

    def left(self) -> float:
        return 0.0 if self.begun.is_set() else 3600.0


def test_a_running_step_is_waited_for_once_the_reserve_begins_since_its_budget_ends_there(
    tmp_path: Path,
):
    """Unlike a chart, the experts' step stops by itself where the reserve begins (its budget), so what
    its experts confirmed in time is written: the run waits for it. Here the reserve begins as soon as
    the step starts, and the step ends only once the run waits for it."""
    ReserveBegun.begun.clear()
    released = threading.Event()
    waited: list[float | None] = []

    def experts(_w: Workspace, _rules: list[RootCause], _t: object) -> LlmAdditions:
        released.wait(timeout=600)
        return LlmAdditions()

    target = parse_target(TARGET)
    ctx = OperatorContext(
        target=target,
        workspace=Workspace(tmp_path / "w.duckdb"),
        settings=Settings(),
        brief=None,
        run_dir=tmp_path,
        llm_experts=experts,
    )

    with ThreadPoolExecutor(1) as pool:

        class Pool(FutureRunner):
            def start(self, specs: list[TaskSpec]) -> list[Future[TaskOutcome]]:
                handles = [
                    pool.submit(perform, spec, ctx, FaultInjector([], target), 0) for spec in specs
                ]
                ReserveBegun.begun.set()
                return handles

            def wait_first(
                self, handles: list[Future[TaskOutcome]], timeout: float | None = None
            ) -> Future[TaskOutcome] | None:
                waited.append(timeout)
                released.set()
                return super().wait_first(handles, timeout)

        strategy = Strategy(
            team=[AgentSpec(name="llm-experts", role=Role.TASKER, goal="add")],
            tasks=[TaskSpec(id=STEP, agent="llm-experts", operator=STEP)],
        )
        deadline = ReserveBegun(due=datetime.now(UTC), reserve_seconds=15.0)
        outcome = execute(strategy, ExecutionState(), Pool(), None, deadline).state.outcomes[STEP]
    assert waited == [None]  # no time limit on the wait, though the reserve had begun
    assert outcome.status is TaskStatus.DONE and outcome.observation is not None
    assert outcome.observation.artifacts == [LLM_ADDITIONS]


def test_only_an_llm_run_binds_llm_experts_into_its_operators_context(tmp_path: Path):
    """Bound, not made: the LLM diagnosis (and the openai client) is imported at the first consultation."""
    rules = RunContext(target=parse_target(TARGET), out_dir=tmp_path, scenario=Scenario.DIAGNOSE)
    llm = rules.model_copy(update={"brain": "openai"})
    assert (rules.consults_llm, llm.consults_llm) == (False, True)
    assert operator_context(rules, BRIEF).llm_experts is None
    assert isinstance(operator_context(llm, BRIEF).llm_experts, RunsLlmExperts)


@pytest.fixture()
def stored(tmp_path: Path) -> RunContext:
    """A run whose workspace holds what an LLM experts' step stored."""
    run = RunContext(target=parse_target(TARGET), out_dir=tmp_path, scenario=Scenario.DIAGNOSE)
    added = LlmAdditions(
        root_causes=[
            RootCause(code="lock_contention", confidence=0.6, evidence={"source": "llm", "llm": []})
        ],
        diagnosis=LlmDiagnosis(experts=["locks"], calls=2),
    )
    Workspace(run.workspace_path).put_observation(LLM_ADDITIONS, added.model_dump_json())
    return run


def reviewed(outcome: TaskOutcome) -> ReviewResult:
    """A review whose only outcome is the step's (the report reads nothing else of it here)."""
    state = ExecutionState(outcomes={STEP: outcome})
    return ReviewResult.model_construct(result=ExecutionResult.model_construct(state=state))


def test_the_report_reads_what_a_completed_step_added(stored: RunContext):
    done = TaskOutcome(
        task_id=STEP,
        operator=STEP,
        status=TaskStatus.DONE,
        observation=Observation(summary="LLM experts (locks): 2 calls", artifacts=[LLM_ADDITIONS]),
    )
    added = llm_additions(stored, reviewed(done))
    assert added is not None and [c.code for c in added.root_causes] == ["lock_contention"]
    assert added.diagnosis is not None and added.diagnosis.experts == ["locks"]


def test_the_report_ignores_what_a_step_left_unfinished_at_the_deadline_may_have_written(
    stored: RunContext,
):
    spec = TaskSpec(id=STEP, agent="llm-experts", operator=STEP)
    passed = Deadline.after(datetime.now(UTC), seconds=1.0, reserve_seconds=15.0)
    assert llm_additions(stored, reviewed(stood_down(spec, passed, running=True))) is None
