"""The plan: a team of agents and their tasks, as a DAG of operator calls.

Plan edits (the re-planner's gap-narrow changes) are methods on `Strategy` that return a new
strategy, so a plan is never mutated in place and every edit can be validated before use.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import networkx as nx
from pydantic import BaseModel, ConfigDict, Field

from dbcrew.vocabulary import EditSource


class Role(StrEnum):
    """Worker roles. An operator belongs to exactly one role; an agent has one role."""

    TASKER = "tasker"
    EXTRACTOR = "extractor"
    RETRIEVER = "retriever"
    PAINTER = "painter"


class AgentSpec(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    role: Role
    goal: str
    tools: list[str] = Field(default_factory=list)


class TaskSpec(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    agent: str
    operator: str
    params: dict[str, Any] = Field(default_factory=dict)
    needs: list[str] = Field(
        default_factory=list, description="ids of tasks that must finish first"
    )
    produces: list[str] = Field(default_factory=list, description="workspace artifacts it writes")
    optional: bool = False
    why: str = Field("", description="why the planner put it on the team (the report shows it)")


class EditKind(StrEnum):
    """The plan edits gap-narrow re-planning, monitor instructions and memory lessons make."""

    REPLACE = "replace"  # the task runs another operator or agent
    INSERT = "insert"
    REMOVE = "remove"
    REORDER = "reorder"  # the task's dependencies change
    CHANGE_PARAMS = "change_params"
    ADD_AGENT = "add_agent"


class PlanEdit(BaseModel):
    """One recorded change to a strategy: what it touched, before and after, and who made it why."""

    kind: EditKind
    task_id: str = Field(
        "", description="the task edited (its id before the edit); empty for add_agent"
    )
    before: TaskSpec | None = None
    after: TaskSpec | None = None
    agent: AgentSpec | None = Field(None, description="the agent an add_agent edit brings in")
    source: EditSource = EditSource.REPLAN
    reason: str = ""

    @classmethod
    def of_task(
        cls, kind: EditKind, before: TaskSpec, after: TaskSpec, source: EditSource, reason: str
    ) -> PlanEdit:
        """A change of one task, named by its id before the change."""
        return cls(
            kind=kind, task_id=before.id, before=before, after=after, source=source, reason=reason
        )

    def describe(self) -> str:
        """One line for reports and artifacts."""
        if self.kind is EditKind.ADD_AGENT and self.agent is not None:
            return f"add agent {self.agent.name} ({self.agent.role.value})"
        if self.kind is EditKind.REPLACE and self.before and self.after:
            return f"{self.before.agent}/{self.before.operator} -> {self.after.agent}/{self.after.operator}"
        if self.kind is EditKind.CHANGE_PARAMS and self.before and self.after:
            return f"params {self.before.params} -> {self.after.params}"
        if self.kind is EditKind.REORDER and self.before and self.after:
            return f"needs {self.before.needs} -> {self.after.needs}"
        spec = self.after or self.before
        return f"{self.kind.value} {spec.operator if spec else self.task_id}"


class Strategy(BaseModel):
    """Team + task lists. `round` counts reflection/re-plan rounds that produced it."""

    team: list[AgentSpec]
    tasks: list[TaskSpec]
    rationale: str = ""
    round: int = 0

    def task(self, task_id: str) -> TaskSpec:
        for spec in self.tasks:
            if spec.id == task_id:
                return spec
        raise KeyError(task_id)

    def agent(self, name: str) -> AgentSpec | None:
        return next((a for a in self.team if a.name == name), None)

    def graph(self) -> nx.DiGraph[str]:
        """Edges point from a task to the tasks that need it."""
        graph: nx.DiGraph[str] = nx.DiGraph()
        for spec in self.tasks:
            graph.add_node(spec.id)
        for spec in self.tasks:
            for need in spec.needs:
                graph.add_edge(need, spec.id)
        return graph

    def downstream(self, task_id: str) -> set[str]:
        """The task and everything that depends on it, directly or not."""
        graph = self.graph()
        return {task_id} | nx.descendants(graph, task_id)

    # -- plan edits: each returns a new Strategy ------------------------------------------
    def replace_task(self, task_id: str, new: TaskSpec) -> Strategy:
        """Swap one task for another; tasks that needed the old id now need the new one. A task edited
        in place (same id) keeps its reason for being on the team unless the edit brings its own."""
        tasks = []
        for spec in self.tasks:
            if spec.id == task_id:
                kept = new.why or new.id != task_id
                tasks.append(new if kept else new.model_copy(update={"why": spec.why}))
                continue
            needs = [new.id if n == task_id else n for n in spec.needs]
            tasks.append(spec.model_copy(update={"needs": needs}))
        return self.model_copy(update={"tasks": tasks})

    def remove_tasks(self, task_ids: set[str]) -> Strategy:
        tasks = [
            spec.model_copy(update={"needs": [n for n in spec.needs if n not in task_ids]})
            for spec in self.tasks
            if spec.id not in task_ids
        ]
        return self.model_copy(update={"tasks": tasks})

    def insert_task(self, spec: TaskSpec) -> Strategy:
        return self.model_copy(update={"tasks": [*self.tasks, spec]})

    def change_params(self, task_id: str, params: dict[str, Any]) -> Strategy:
        return self.replace_task(task_id, self.task(task_id).model_copy(update={"params": params}))

    def add_agent(self, agent: AgentSpec) -> Strategy:
        return self.model_copy(update={"team": [*self.team, agent]})

    def apply(self, edit: PlanEdit) -> Strategy:
        """The strategy after one edit (a new object: the plan it was applied to stays as it was)."""
        if edit.kind is EditKind.ADD_AGENT:
            assert edit.agent is not None, "add_agent edit without its agent"
            return self if self.agent(edit.agent.name) is not None else self.add_agent(edit.agent)
        if edit.kind is EditKind.REMOVE:
            return self.remove_tasks({edit.task_id})
        assert edit.after is not None, f"{edit.kind} edit without the task after it"
        if edit.kind is EditKind.INSERT:
            return self.insert_task(edit.after).with_tool(edit.after.agent, edit.after.operator)
        return self.replace_task(edit.task_id, edit.after).with_tool(
            edit.after.agent, edit.after.operator
        )

    def apply_all(self, edits: list[PlanEdit]) -> Strategy:
        strategy = self
        for edit in edits:
            strategy = strategy.apply(edit)
        return strategy

    def with_tool(self, agent_name: str, tool: str) -> Strategy:
        team = [
            a.model_copy(update={"tools": [*a.tools, tool]})
            if a.name == agent_name and tool not in a.tools
            else a
            for a in self.team
        ]
        return self.model_copy(update={"team": team})
