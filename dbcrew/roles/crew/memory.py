"""The crew's memory, in DuckDB: sensory, short-term, long-term, and the hybrid recall the planner uses.

- Sensory: the raw observations of this run (each task's outcome, summary, errors, log), kept in
  the run's workspace.
- Short-term: this run's decisions, plan edits and attempts, also in the workspace.
- Long-term: what runs decided across runs, in the shared store (dbcrew.store: a DuckDB file by
  default, PostgreSQL by `DBCREW_STORE_URL`), outside any run directory, for one target identity
  (the server's system identifier and the database, never a password): lessons (an operator that
  failed, its error class and the change that made its task work) and unfixed errors (an
  operator whose task ended failed or skipped, its error class, what the monitor tried, in how
  many runs). An unfixed error is forgotten once the operator runs to the end on the target.
- Hybrid recall: the lessons for this target whose operator the new plan uses, ranked by how
  often they worked and, when an error is known, by how close their error is to it; the planner
  applies them as plan edits before the first task runs, so a known failure is avoided from the
  start, and a re-plan applies the lesson for the failed operator and its error class itself
  (dbcrew/roles/crew/replanner.py) when the plan did not carry it yet.
- The run reads its short-term memory when it re-plans: the calls that failed so far in this run
  (`failed_calls`) are never brought back by a re-plan, remembered fix or brain proposal alike.

Lessons are a help, never a condition: a store that cannot be used (`StoreUnavailable`: damaged,
unreachable) recalls none and keeps none (`from_memory`), and the review goes on; its report says
the store's fault where the history should be (dbcrew/roles/spine.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TypeVar

import numpy as np
from pydantic import BaseModel, Field

from dbcrew.logs import data_logger
from dbcrew.models import AgentSpec, Brief, CatalogueEntry, Strategy, TaskSpec
from dbcrew.models.crew import FailedCall
from dbcrew.models.plan import EditKind, PlanEdit
from dbcrew.models.report import Decision
from dbcrew.roles.crew.validators import validate
from dbcrew.roles.crew.worker import TaskOutcome
from dbcrew.store import Store, StoreUnavailable, open_store
from dbcrew.targets import PostgresTarget
from dbcrew.text import embed
from dbcrew.vocabulary import EditSource, TaskStatus
from dbcrew.workspace import Workspace

LEARNABLE = (EditKind.REPLACE, EditKind.CHANGE_PARAMS, EditKind.REORDER)
T = TypeVar("T")
log = data_logger(__name__)


def target_identity(target: PostgresTarget, brief: Brief) -> str:
    """The target's identity in the store (Brief.identity: its cluster's system identifier and database)."""
    return brief.identity(target.address)


class Lesson(BaseModel):
    """A fix that worked: on this target, the task that ran `operator` succeeded as `fixed`."""

    target: str
    operator: str
    kind: EditKind
    fixed: TaskSpec
    agent: AgentSpec | None = None
    error: str = ""
    leaf: str = ""
    successes: int = 1
    learned_run: str = ""
    last_run: str = ""

    def describe(self) -> str:
        return f"{self.operator} failed before ({self.leaf or 'error'}: {self.error[:80]}); {self.kind.value} worked"


class UnfixedError(BaseModel):
    """An error a run on this target could not fix: the task of `operator` ended failed or skipped."""

    target: str
    operator: str
    leaf: str
    error: str
    remedy: str = Field(description="what the monitor decided last for it")
    runs: int = 1
    first_run: str = ""
    last_run: str = ""

    def describe(self) -> str:
        times = "1 earlier run" if self.runs == 1 else f"{self.runs} earlier runs"
        return (
            f"{self.operator} left unfixed in {times} (first {self.first_run}, last {self.last_run}):"
            f" {self.leaf or 'error'}: {self.error[:120]}; {self.remedy}"
        )


# -- sensory and short-term memory: this run, in its workspace --------------------------------------
def remember_run(
    workspace: Workspace,
    run_id: str,
    outcomes: dict[str, TaskOutcome],
    decisions: list[Decision],
    edits: list[PlanEdit],
) -> None:
    """Sensory: every raw observation; short-term: every attempt, decision and plan edit of this run."""
    workspace.write_table(
        "memory_sensory",
        [
            ("run_id", "VARCHAR"),
            ("task_id", "VARCHAR"),
            ("operator", "VARCHAR"),
            ("status", "VARCHAR"),
            ("summary", "VARCHAR"),
            ("seconds", "DOUBLE"),
            ("cpu_seconds", "DOUBLE"),
            ("log", "VARCHAR"),
        ],
        [
            (
                run_id,
                o.task_id,
                o.operator,
                o.status.value,
                o.observation.summary if o.observation else o.reason,
                o.seconds,
                o.cpu_seconds,
                "\n".join(o.log),
            )
            for o in outcomes.values()
        ],
    )
    rows = [
        (run_id, "attempt", o.task_id, json.dumps(a.model_dump(), default=str))
        for o in outcomes.values()
        for a in o.attempts
    ]
    rows += [(run_id, "decision", d.task_id, d.model_dump_json()) for d in decisions]
    rows += [(run_id, "edit", e.task_id, e.model_dump_json()) for e in edits]
    workspace.write_table(
        "memory_short_term",
        [("run_id", "VARCHAR"), ("kind", "VARCHAR"), ("task_id", "VARCHAR"), ("body", "VARCHAR")],
        rows,
    )


def lessons_from(
    target: str,
    run_id: str,
    strategy: Strategy,
    outcomes: dict[str, TaskOutcome],
    decisions: list[Decision],
    edits: list[PlanEdit],
) -> list[Lesson]:
    """Each edit whose task then completed is a lesson; edits that led nowhere teach nothing."""
    errors = {d.task_id: d for d in decisions}
    lessons = []
    for edit in edits:
        if edit.kind not in LEARNABLE or edit.before is None or edit.after is None:
            continue
        outcome = outcomes.get(edit.after.id)
        if outcome is None or outcome.status is not TaskStatus.DONE:
            continue
        decision = errors.get(edit.task_id)
        lessons.append(
            Lesson(
                target=target,
                operator=edit.before.operator,
                kind=edit.kind,
                fixed=edit.after,
                agent=strategy.agent(edit.after.agent),
                error=decision.error if decision else edit.reason,
                leaf=decision.leaf if decision else "",
                learned_run=run_id,
                last_run=run_id,
            )
        )
    return lessons


def failed_calls(outcomes: dict[str, TaskOutcome]) -> list[FailedCall]:
    """Short-term memory read back: every call that failed so far in this run, with the parameters of
    its last attempt (a task that was replaced keeps its failed outcome under its own id)."""
    calls = [
        FailedCall(operator=o.operator, params=dict(o.attempts[-1].params) if o.attempts else {})
        for o in outcomes.values()
        if o.status is TaskStatus.FAILED
    ]
    return list(
        {(c.operator, json.dumps(c.params, sort_keys=True, default=str)): c for c in calls}.values()
    )


def repeats(task: TaskSpec, failed: list[FailedCall]) -> bool:
    """Whether `task` is a call that already failed in this run."""
    return any(task.operator == c.operator and task.params == c.params for c in failed)


def unfixed_from(
    target: str,
    run_id: str,
    outcomes: dict[str, TaskOutcome],
    decisions: list[Decision],
    edits: list[PlanEdit],
) -> list[UnfixedError]:
    """Each error whose task did not end done, nor any task an edit put in its place: one per operator
    and error class, with the last decision's remedy."""

    def done(task_id: str) -> bool:
        outcome = outcomes.get(task_id)
        return outcome is not None and outcome.status is TaskStatus.DONE

    fixed = {e.task_id for e in edits if e.after is not None and done(e.after.id)}
    found: dict[tuple[str, str], UnfixedError] = {}
    for decision in decisions:
        outcome = outcomes.get(decision.task_id)
        if outcome is None or done(decision.task_id) or decision.task_id in fixed:
            continue
        found[(outcome.operator, decision.leaf)] = UnfixedError(
            target=target,
            operator=outcome.operator,
            leaf=decision.leaf,
            error=decision.error,
            remedy=f"{decision.remedy}, then {outcome.status.value}",
            first_run=run_id,
            last_run=run_id,
        )
    return list(found.values())


# -- long-term memory: lessons across runs, in the shared store ------------------------------------
class LongTermMemory:
    """Lessons per target identity, kept in the shared store beside the target's history."""

    def __init__(self, store: Store):
        self.store = store

    def learn(self, lessons: list[Lesson]) -> None:
        """Keep one lesson per (target, operator): the latest fix that worked, with its success count."""
        with self.store.transaction():  # one connection for all of them
            for lesson in lessons:
                stored = self.store.lesson(lesson.target, lesson.operator)
                successes = 1
                if stored is not None:
                    known = Lesson.model_validate_json(stored[0])
                    same_fix = (known.kind, known.fixed.operator, known.fixed.params) == (
                        lesson.kind,
                        lesson.fixed.operator,
                        lesson.fixed.params,
                    )
                    successes = stored[1] + 1 if same_fix else 1
                    if same_fix:
                        lesson = lesson.model_copy(
                            update={
                                "error": known.error or lesson.error,
                                "leaf": known.leaf or lesson.leaf,
                                "learned_run": known.learned_run,
                            }
                        )
                lesson = lesson.model_copy(update={"successes": successes})
                self.store.put_lesson(
                    lesson.target,
                    lesson.operator,
                    lesson.kind.value,
                    lesson.model_dump_json(),
                    successes,
                )

    def lessons(self, target: str) -> list[Lesson]:
        return [Lesson.model_validate_json(body) for body in self.store.lessons(target)]

    def keep_unfixed(self, target: str, errors: list[UnfixedError], ran: set[str]) -> None:
        """Keep this run's unfixed errors (counting the runs each was seen in) and forget those of the
        operators that ran to the end (`ran`): their errors are gone from the target."""
        with self.store.transaction():
            for operator in sorted(ran):
                self.store.forget_unfixed_errors(target, operator)
            for error in errors:
                stored = self.store.unfixed_error(target, error.operator, error.leaf)
                if stored is not None:
                    known = UnfixedError.model_validate_json(stored)
                    error = error.model_copy(
                        update={"runs": known.runs + 1, "first_run": known.first_run}
                    )
                self.store.put_unfixed_error(
                    target, error.operator, error.leaf, error.model_dump_json()
                )

    def unfixed(self, target: str) -> list[UnfixedError]:
        """The errors earlier runs left unfixed on the target, latest first."""
        return [UnfixedError.model_validate_json(b) for b in self.store.unfixed_errors(target)]


def from_memory(store_url: str | None, use: Callable[[LongTermMemory], T], without: T) -> T:
    """`use` the long-term memory in the store at `store_url`; `without` (and a warning) when the store cannot be used."""
    try:
        return use(LongTermMemory(open_store(store_url)))
    except StoreUnavailable as exc:
        log.warning("long-term memory not used: %s", exc)
        return without


def recall(
    memory: LongTermMemory,
    target: str,
    strategy: Strategy,
    error: str = "",
    short_term: list[Lesson] | None = None,
) -> list[Lesson]:
    """Hybrid recall: this target's lessons (and this run's) for operators the plan uses, best first.

    Structured match first (same target, operator in the plan); among them, lessons that worked
    more often rank higher, and when an error is given, lessons whose error reads like it.
    """
    planned = {t.operator for t in strategy.tasks}
    found = {
        lesson.operator: lesson for lesson in memory.lessons(target) if lesson.operator in planned
    }
    for lesson in short_term or []:
        if lesson.operator in planned:
            found[lesson.operator] = lesson
    ranked = list(found.values())
    if error and ranked:
        vectors = embed([error, *(lesson.error for lesson in ranked)])
        similarity = vectors[1:] @ vectors[0]
        order = np.argsort(-(similarity + 0.01 * np.array([lesson.successes for lesson in ranked])))
        return [ranked[i] for i in order]
    return sorted(ranked, key=lambda lesson: -lesson.successes)


def remembered_fixes(
    lessons: list[Lesson], operator: str, leaf: str, failed: list[FailedCall]
) -> list[Lesson]:
    """The lessons that fixed `operator` for the same error class (`leaf`) on this target, without the
    fixes that already failed in this run (short-term memory)."""
    return [
        lesson
        for lesson in lessons
        if lesson.operator == operator and lesson.leaf == leaf and not repeats(lesson.fixed, failed)
    ]


def apply_lessons(
    strategy: Strategy,
    lessons: list[Lesson],
    catalogue: list[CatalogueEntry],
    task_id: str | None = None,
) -> tuple[Strategy, list[PlanEdit]]:
    """The plan with each lesson's fix already in it (on the task `task_id` when given, else on the first
    task running the lesson's operator); a lesson that would make the plan invalid is left out."""
    edits: list[PlanEdit] = []
    for lesson in lessons:
        task = next(
            (
                t
                for t in strategy.tasks
                if t.operator == lesson.operator and task_id in (None, t.id)
            ),
            None,
        )
        if task is None or any(e.after is not None and e.after.id == task.id for e in edits):
            continue  # one lesson per task: two lessons must not undo each other
        fixed = lesson.fixed
        ids = {t.id for t in strategy.tasks}
        new = task.model_copy(
            update={
                "id": fixed.operator if fixed.operator != task.operator else task.id,
                "operator": fixed.operator,
                "agent": fixed.agent,
                "params": dict(fixed.params),
                "produces": list(fixed.produces),
                "needs": list(
                    dict.fromkeys(
                        [*task.needs, *(n for n in fixed.needs if n in ids and n != task.id)]
                    )
                ),
            }
        )
        if new == task:
            continue
        reason = f"memory: {lesson.describe()} (worked {lesson.successes}x, first in run {lesson.learned_run})"
        candidate_edits = []
        if strategy.agent(new.agent) is None and lesson.agent is not None:
            candidate_edits.append(
                PlanEdit(
                    kind=EditKind.ADD_AGENT,
                    agent=lesson.agent,
                    source=EditSource.MEMORY,
                    reason=reason,
                )
            )
        candidate_edits.append(PlanEdit.of_task(lesson.kind, task, new, EditSource.MEMORY, reason))
        candidate = strategy.apply_all(candidate_edits)
        if len(validate(candidate, catalogue)) > len(validate(strategy, catalogue)):
            continue
        strategy = candidate
        edits += candidate_edits
    return strategy, edits
