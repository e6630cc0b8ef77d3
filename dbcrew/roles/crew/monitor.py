"""The monitor: classifies each alert through the error tree and decides the remedy.

When a worker's alert is broadcast, every worker pauses (running tasks finish, nothing new starts)
and reports; the monitor then sees the whole crew's state compacted to key facts: which tasks are
done, failed, skipped, were running or wait, and the failing task's error, log tail, attempt
history and reflection. A pipeline leaf yields an instruction the tasker applies at once; a logic
leaf yields recommendations and sends the planner back to re-plan (gap narrow). An instruction
that already failed twice on a task is escalated: the planner re-plans with the alert, the
worker's reflection, the global state and the recommendations (the tasker calls `escalate`).

The monitor reads the run's short-term memory while it runs: its earlier decisions. A target that
could not be reached (or ended the session) again, after an earlier failure of the same kind in
this run, is in an outage longer than a worker's own wait: retrying at once fails again and spends
the instruction budget. The retry then waits for the target to answer first, twice as long for
each earlier failure of the kind (at most OUTAGE_WAIT_MAX seconds), and for at most the run's
`outage_wait_seconds` in all: a target that never comes back must not hold every later retry for a
minute (a gone target's review stays bounded).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from pydantic import ValidationError

from dbcrew.error_tree import ErrorTree
from dbcrew.llm.base import Brain
from dbcrew.models.crew import Alert, Recommendation, WorkerReport
from dbcrew.models.report import Decision, GlobalStateRecord
from dbcrew.operators.registry import get
from dbcrew.vocabulary import Action, RemedyKind, TaskStatus

LOG_TAIL = 6
UNREACHABLE_LEAVES = frozenset(
    {"connection", "connection_dropped"}
)  # dbcrew/error_tree/tree.yaml: reach
OUTAGE_WAIT_FIRST = 2.0
OUTAGE_WAIT_MAX = 60.0


def compact_state(
    alert: Alert, by_status: dict[str, list[str]], paused: list[WorkerReport]
) -> GlobalStateRecord:
    """The global state as key information only: task ids per status and the failing worker's own account."""
    return GlobalStateRecord(
        done=sorted(by_status.get(TaskStatus.DONE, [])),
        failed=sorted(by_status.get(TaskStatus.FAILED, [])),
        skipped=sorted(by_status.get(TaskStatus.SKIPPED, [])),
        running=sorted(r.task_id for r in paused),
        pending=sorted(by_status.get("pending", [])),
        error=f"{alert.error_type}: {alert.message}",
        logs=alert.logs[-LOG_TAIL:],
        history=[f"{a.error_type}: {a.message} (params {a.params})" for a in alert.attempts],
        reflection=alert.attempts[-1].reflection if alert.attempts else "",
        workers=[
            f"{r.agent} finished {r.task_id}: {r.status}" + (f" ({r.summary})" if r.summary else "")
            for r in paused
        ],
    )


def repaired_params(operator: str, params: dict[str, Any]) -> dict[str, Any]:
    """The parameters the operator accepts: each one kept only if it validates on its own."""
    model = get(operator).params_model
    kept: dict[str, Any] = {}
    for key, value in params.items():
        try:
            model.model_validate({**kept, key: value})
        except ValidationError:
            continue
        kept[key] = value
    return kept


@dataclass
class MonitorDecision:
    action: Action
    replan: bool
    recommendations: list[Recommendation]
    record: Decision
    params: dict[str, Any] = field(default_factory=dict)
    escalated: str = ""  # why an instruction became a re-plan; empty otherwise
    wait: float = 0.0  # seconds to wait for the target to answer before the retry (an outage seen before in this run)


def outage_wait(leaf: str, action: Action, earlier: list[Decision]) -> float:
    """How long a retry waits for the target: 0 unless the same kind of unreachable failure happened before in this run."""
    if leaf not in UNREACHABLE_LEAVES or action is not Action.RETRY:
        return 0.0
    seen = sum(1 for d in earlier if d.leaf in UNREACHABLE_LEAVES)
    return min(OUTAGE_WAIT_FIRST * 2 ** (seen - 1), OUTAGE_WAIT_MAX) if seen else 0.0


class Monitor:
    """Decides on alerts. The error tree (its vector and BM25 indexes, and the libraries behind them) is
    built at the first alert: most runs have none and should not pay for it."""

    def __init__(
        self,
        tree: Callable[[], ErrorTree],
        brain: Brain,
        *,
        await_target: Callable[[float], float | None] | None = None,
        outage_budget: float = OUTAGE_WAIT_MAX,
    ):
        self._load_tree = tree
        self.brain = brain
        self.await_target = await_target  # None: the run's memory is not read while it runs (the no-memory ablation)
        self.outage_left = (
            outage_budget  # seconds the run's retries may still wait for the target, in all
        )

    @cached_property
    def tree(self) -> ErrorTree:
        return self._load_tree()

    def decide(
        self, alert: Alert, state: GlobalStateRecord, earlier: list[Decision] | None = None
    ) -> MonitorDecision:
        """The remedy for `alert`; `earlier` is the run's short-term memory (its decisions so far), read when it is on."""
        found = self.tree.classify(alert.error_type, alert.message)
        action = found.remedy.action
        replan = found.remedy.kind is RemedyKind.REPLAN
        recommendations = self.brain.recommend(alert, found.leaf, action, state) if replan else []
        params = (
            repaired_params(alert.operator, dict(alert.params))
            if action is Action.CHANGE_PARAMS
            else {}
        )
        wait = (
            min(outage_wait(found.leaf, action, earlier or []), self.outage_left)
            if self.await_target is not None
            else 0.0
        )
        self.outage_left -= wait
        remedy = (
            ("replan: " if replan else "instruction: ")
            + action.value
            + (f" {params}" if action is Action.CHANGE_PARAMS else "")
            + (
                f" once the target answers (waits up to {wait:.0f} s: the same failure happened earlier in this run)"
                if wait
                else ""
            )
        )
        record = Decision(
            task_id=alert.task_id,
            error=f"{alert.error_type}: {alert.message}",
            leaf=found.leaf,
            branch=found.branch,
            confidence=found.confidence,
            remedy=remedy,
            detail=f"{len(state.done)} done, {len(state.failed)} failed ({', '.join(state.failed) or '-'}),"
            f" {len(state.skipped)} skipped, {len(state.running)} finished while paused, {len(state.pending)} pending",
            state=state,
        )
        return MonitorDecision(
            action=action,
            replan=replan,
            recommendations=recommendations,
            record=record,
            params=params,
            wait=wait,
        )

    def escalate(
        self, alert: Alert, decision: MonitorDecision, instructions: int
    ) -> MonitorDecision:
        """The re-plan an instruction becomes when it already failed `instructions` times on this task.

        The leaf still says what failed; the planner now gets the alert, the worker's reflection,
        the global state and the recommendations, and may change what the instruction could not:
        an equivalent operator, or the failed subgraph removed.
        """
        action = Action.REPLACE_OPERATOR
        state = decision.record.state
        recommendations = self.brain.recommend(alert, decision.record.leaf, action, state)
        why = (
            f"{instructions} instructions failed ({decision.record.leaf}: {decision.action.value})"
        )
        record = decision.record.model_copy(
            update={"remedy": f"replan (escalated: {why}): {action.value}"}
        )
        return MonitorDecision(
            action=action,
            replan=True,
            recommendations=recommendations,
            record=record,
            escalated=why,
        )
