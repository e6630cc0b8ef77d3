"""Deterministic plan validators: the first half of self-reflection, applied to every brain's output."""

from __future__ import annotations

import networkx as nx
from pydantic import ValidationError

from dbcrew.artifacts import UnknownArtifact, parse
from dbcrew.models import CatalogueEntry, Strategy
from dbcrew.models.crew import Problem
from dbcrew.operators.registry import REGISTRY
from dbcrew.vocabulary import ProblemKind


def validate(strategy: Strategy, catalogue: list[CatalogueEntry]) -> list[Problem]:
    """Every objection the plan deserves; [] means it may run.

    Operators must be in the (pruned) catalogue and belong to their agent's role; the task graph
    must be a DAG over existing ids; every artifact a task says it produces must be a declared one
    (dbcrew/artifacts.py: the plan holds names, the workspace takes keys); every needed artifact
    must come from an upstream task; parameters must validate against the operator's model.
    """
    allowed = {e.name: e for e in catalogue}
    problems: list[Problem] = []
    if not strategy.tasks:
        problems.append(
            Problem(
                task_id=None,
                kind=ProblemKind.EMPTY_PLAN,
                message="the plan has no task: nothing would be reviewed",
            )
        )
    ids = [t.id for t in strategy.tasks]
    for dup in {i for i in ids if ids.count(i) > 1}:
        problems.append(
            Problem(
                task_id=dup, kind=ProblemKind.DUPLICATE_ID, message=f"task id {dup} is used twice"
            )
        )
    if len({a.name for a in strategy.team}) != len(strategy.team):
        problems.append(
            Problem(
                task_id=None, kind=ProblemKind.DUPLICATE_AGENT, message="two agents share a name"
            )
        )
    graph = strategy.graph()
    for spec in strategy.tasks:
        entry = allowed.get(spec.operator)
        if entry is None:
            problems.append(
                Problem(
                    task_id=spec.id,
                    kind=ProblemKind.UNKNOWN_OPERATOR,
                    message=f"operator {spec.operator!r} is not in the catalogue for this target",
                )
            )
            continue
        agent = strategy.agent(spec.agent)
        if agent is None:
            problems.append(
                Problem(
                    task_id=spec.id,
                    kind=ProblemKind.MISSING_AGENT,
                    message=f"agent {spec.agent!r} is not in the team",
                )
            )
        elif agent.role != entry.role:
            problems.append(
                Problem(
                    task_id=spec.id,
                    kind=ProblemKind.WRONG_ROLE,
                    message=f"{spec.operator} belongs to the {entry.role} role, {agent.name} is a {agent.role}",
                )
            )
        for need in spec.needs:
            if need not in ids:
                problems.append(
                    Problem(
                        task_id=spec.id,
                        kind=ProblemKind.UNKNOWN_DEPENDENCY,
                        message=f"needs unknown task {need!r}",
                    )
                )
        for name in spec.produces:
            try:
                parse(name)
            except UnknownArtifact as exc:
                problems.append(
                    Problem(task_id=spec.id, kind=ProblemKind.UNKNOWN_ARTIFACT, message=str(exc))
                )
        try:
            REGISTRY[spec.operator].params_model.model_validate(spec.params)
        except ValidationError as exc:
            problems.append(
                Problem(
                    task_id=spec.id, kind=ProblemKind.BAD_PARAMS, message=str(exc).splitlines()[0]
                )
            )
    if not nx.is_directed_acyclic_graph(graph):
        cycle = nx.find_cycle(graph)
        problems.append(
            Problem(
                task_id=None, kind=ProblemKind.CYCLE, message=f"the task graph has a cycle: {cycle}"
            )
        )
        return problems
    producers: dict[str, set[str]] = {}
    for spec in strategy.tasks:
        for artifact in allowed[spec.operator].produces if spec.operator in allowed else ():
            producers.setdefault(artifact, set()).add(spec.id)
    for spec in strategy.tasks:
        entry = allowed.get(spec.operator)
        if entry is None or spec.id not in graph:
            continue
        upstream = nx.ancestors(graph, spec.id)
        for artifact in entry.needs:
            if not producers.get(artifact, set()) & upstream:
                problems.append(
                    Problem(
                        task_id=spec.id,
                        kind=ProblemKind.MISSING_INPUT,
                        message=f"{spec.operator} needs {artifact}, which no upstream task produces",
                    )
                )
    return problems
