"""Scenario playbooks and the deterministic plan wiring shared by the rules brain and the validators' repairs."""

from __future__ import annotations

from dbcrew.models import AgentSpec, CatalogueEntry, Role, Strategy, TaskSpec
from dbcrew.vocabulary import Category, Scenario

ROLE_AGENTS: dict[Role, tuple[str, str]] = {
    Role.EXTRACTOR: (
        "collector",
        "collect statistics, activity and settings from the target over the window",
    ),
    Role.TASKER: (
        "health-checker",
        "judge the collected state against the health checks and write findings",
    ),
    Role.PAINTER: ("painter", "draw the charts the report shows"),
    Role.RETRIEVER: ("librarian", "retrieve knowledge for diagnosis"),
}


def agent_for(role: Role, tools: list[str]) -> AgentSpec:
    name, goal = ROLE_AGENTS[role]
    return AgentSpec(name=name, role=role, goal=goal, tools=tools)


def wire(tasks: list[TaskSpec], catalogue: list[CatalogueEntry]) -> list[TaskSpec]:
    """Recompute every task's `needs` and `produces` from the artifacts its operator reads and writes."""
    entries = {e.name: e for e in catalogue}
    producers: dict[str, str] = {}
    for spec in tasks:
        for artifact in entries[spec.operator].produces if spec.operator in entries else ():
            producers.setdefault(artifact, spec.id)
    wired = []
    for spec in tasks:
        entry = entries.get(spec.operator)
        if entry is None:
            wired.append(spec)
            continue
        needs = [producers[a] for a in entry.needs if a in producers]
        needs += [producers[a] for a in entry.uses if a in producers]
        needs = list(dict.fromkeys(n for n in needs if n != spec.id))
        wired.append(spec.model_copy(update={"needs": needs, "produces": list(entry.produces)}))
    return wired


def team_for(tasks: list[TaskSpec], catalogue: list[CatalogueEntry]) -> list[AgentSpec]:
    entries = {e.name: e for e in catalogue}
    by_role: dict[Role, list[str]] = {}
    for spec in tasks:
        by_role.setdefault(entries[spec.operator].role, []).append(spec.operator)
    return [agent_for(role, list(dict.fromkeys(tools))) for role, tools in by_role.items()]


def strategy_from_operators(
    operators: list[str],
    catalogue: list[CatalogueEntry],
    rationale: str,
    why: dict[str, str] | None = None,
) -> Strategy:
    """One agent per role, one task per operator; `why` says why each is on the team."""
    entries = {e.name: e for e in catalogue}
    tasks = [
        TaskSpec(
            id=name,
            agent=ROLE_AGENTS[entries[name].role][0],
            operator=name,
            optional=entries[name].category is not Category.COLLECT,
            why=(why or {}).get(name, ""),
        )
        for name in operators
    ]
    return Strategy(
        team=team_for(tasks, catalogue), tasks=wire(tasks, catalogue), rationale=rationale
    )


# Which operator categories each scenario's playbook draws on.
PLAYBOOKS: dict[Scenario, tuple[Category, ...]] = {
    Scenario.HEALTH: (Category.COLLECT, Category.ADVISE, Category.CHECKS, Category.PAINT),
    Scenario.DIAGNOSE: (Category.DIAGNOSE,),
}
EXPERT_PREFIX = "expert_"


def diagnose_team(
    operators: list[str],
    catalogue: list[CatalogueEntry],
    rationale: str = "",
    why: dict[str, str] | None = None,
) -> Strategy:
    """The diagnosis crew: a collector, one tasker per expert (its own operator and knowledge), the
    chief DBA who cross-reviews, the LLM experts after it when the run's brain is an LLM (an operator
    that `consults_llm` is in the catalogue only then), a painter, and a health checker for the checks
    a composed plan adds. Experts stand down at run time when neither the alert nor an abnormal metric
    concerns them (the abnormal metrics exist only once the window is sampled)."""
    entries = {e.name: e for e in catalogue}

    def chief(name: str) -> bool:
        entry = entries[name]
        return (
            entry.role is Role.TASKER
            and entry.category is Category.DIAGNOSE
            and not name.startswith(EXPERT_PREFIX)
            and not entry.consults_llm
        )

    def agent_of(name: str) -> AgentSpec:
        if name.startswith(EXPERT_PREFIX):
            expert = name.removeprefix(EXPERT_PREFIX)
            return AgentSpec(
                name=f"{expert}-expert",
                role=Role.TASKER,
                goal=entries[name].description,
                tools=[name],
            )
        if entries[name].consults_llm:
            return AgentSpec(
                name="llm-experts",
                role=Role.TASKER,
                goal="ask the LLM's experts what the cross review's causes leave unexplained",
                tools=[name],
            )
        if chief(name):
            return AgentSpec(
                name="chief-dba",
                role=Role.TASKER,
                goal="cross-review the experts and write the root causes",
                tools=[name],
            )
        return agent_for(entries[name].role, [name])

    team: dict[str, AgentSpec] = {}
    tasks = []
    for name in operators:
        agent = agent_of(name)
        known = team.get(agent.name)
        team[agent.name] = (
            agent if known is None else known.model_copy(update={"tools": [*known.tools, name]})
        )
        tasks.append(
            TaskSpec(
                id=name,
                agent=agent.name,
                operator=name,
                optional=entries[name].role is Role.PAINTER or entries[name].consults_llm,
                why=(why or {}).get(name, ""),
            )
        )
    experts = [n.removeprefix(EXPERT_PREFIX) for n in operators if n.startswith(EXPERT_PREFIX)]
    every = [
        e.name.removeprefix(EXPERT_PREFIX) for e in catalogue if e.name.startswith(EXPERT_PREFIX)
    ]
    if len(experts) < len(every):
        # The chief is told who is on the team: the experts the window calls in beyond it join there.
        tasks = [
            t.model_copy(update={"params": {"team": experts}}) if chief(t.operator) else t
            for t in tasks
        ]
    rationale = (
        rationale
        or f"diagnose playbook: {sum(n.startswith(EXPERT_PREFIX) for n in operators)} experts, cross review, charts"
    )
    return Strategy(team=list(team.values()), tasks=wire(tasks, catalogue), rationale=rationale)
