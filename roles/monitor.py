"""The monitor: classifies each alert through the error tree and decides the remedy.

A pipeline leaf yields an instruction the tasker applies at once; a logic leaf yields
recommendations and sends the planner back to re-plan (gap narrow).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dbcrew.llm.base import Brain
from dbcrew.models.crew import Action, Alert, Recommendation
from dbcrew.models.report import Decision
from error_tree import ErrorTree


@dataclass
class GlobalState:
    """What the monitor sees when all workers have paused: compacted to key facts."""

    done: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def compact(self) -> str:
        return f"{len(self.done)} done, {len(self.failed)} failed ({', '.join(self.failed) or '-'}), {len(self.skipped)} skipped"


@dataclass
class MonitorDecision:
    action: Action
    replan: bool
    recommendations: list[Recommendation]
    record: Decision


class Monitor:
    def __init__(self, tree: ErrorTree, brain: Brain):
        self.tree = tree
        self.brain = brain

    def decide(self, alert: Alert, state: GlobalState) -> MonitorDecision:
        found = self.tree.classify(alert.error_type, alert.message)
        action = Action(found.remedy.action)
        replan = found.remedy.kind == "replan"
        recommendations = self.brain.recommend(alert, found.leaf, action.value) if replan else []
        record = Decision(
            task_id=alert.task_id, error=f"{alert.error_type}: {alert.message}", leaf=found.leaf, branch=found.branch,
            confidence=found.confidence, remedy=("replan: " if replan else "instruction: ") + action.value,
            detail=state.compact(),
        )
        return MonitorDecision(action=action, replan=replan, recommendations=recommendations, record=record)
