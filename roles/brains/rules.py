"""The offline brain: scenario playbooks (roles/brains/playbooks.py) pruned by the brief, deterministic repairs and edits."""

from __future__ import annotations

from collections import Counter

from dbcrew.llm.base import Brain
from dbcrew.models import Finding, Strategy, TaskSpec
from dbcrew.models.crew import Alert, PlanRequest, Problem, Recommendation, ReplanRequest
from dbcrew.models.finding import LLM_EXPERTS_SOURCE
from dbcrew.models.report import CoverageEntry, CoverageStatus, GlobalStateRecord
from dbcrew.vocabulary import Action, ProblemKind, Scenario
from roles.brains.playbooks import (
    PLAYBOOKS,
    agent_for,
    diagnose_team,
    strategy_from_operators,
    team_for,
    wire,
)


class RulesBrain(Brain):
    name = "rules"

    def plan(self, request: PlanRequest) -> Strategy:
        categories = PLAYBOOKS[request.scenario]
        # The catalogue the brain sees is already pruned to what the target can run; among
        # equivalent operators the playbook takes the primary one.
        chosen = [
            e.name
            for e in request.catalogue
            if e.category in categories and e.equivalent_of is None
        ]
        if request.scenario is Scenario.DIAGNOSE:
            return diagnose_team(chosen, request.catalogue)
        rationale = (
            f"{request.scenario} playbook: {len(chosen)} operators over {', '.join(categories)},"
            f" pruned to what {request.brief.current_user} can run on PostgreSQL {request.brief.server_version}"
        )
        return strategy_from_operators(chosen, request.catalogue, rationale)

    def reflect(
        self, request: PlanRequest, strategy: Strategy, problems: list[Problem]
    ) -> Strategy:
        """Drop tasks naming unknown operators, reset rejected parameters, reassign agents, rewire needs."""
        entries = {e.name: e for e in request.catalogue}
        bad_params = {p.task_id for p in problems if p.kind is ProblemKind.BAD_PARAMS}
        tasks = []
        seen: set[str] = set()
        for spec in strategy.tasks:
            if spec.operator not in entries or spec.id in seen:
                continue
            seen.add(spec.id)
            if spec.id in bad_params:
                spec = spec.model_copy(
                    update={"params": {}}
                )  # the operator's defaults always validate
            role = entries[spec.operator].role
            agent = strategy.agent(spec.agent)
            if agent is None or agent.role != role:
                spec = spec.model_copy(update={"agent": agent_for(role, []).name})
            tasks.append(spec)
        wired = wire(tasks, request.catalogue)
        return Strategy(
            team=team_for(wired, request.catalogue),
            tasks=wired,
            rationale=strategy.rationale,
            round=strategy.round + 1,
        )

    def critique(self, request: PlanRequest, strategy: Strategy) -> list[Problem]:
        return []

    def recommend(
        self, alert: Alert, leaf: str, action: Action, state: GlobalStateRecord | None = None
    ) -> list[Recommendation]:
        return [
            Recommendation(action=action, task_id=alert.task_id, detail=f"{leaf}: {alert.message}")
        ]

    def replan(self, request: ReplanRequest) -> Strategy:
        strategy = request.strategy
        entries = {e.name: e for e in request.catalogue}
        for rec in request.recommendations:
            failed = strategy.task(rec.task_id)
            if rec.action is Action.REPLACE_OPERATOR:
                alternative = next(
                    (
                        e
                        for e in request.catalogue
                        if e.name != failed.operator
                        and all(c.operator != e.name for c in request.failed_before)
                        and e.produces == entries[failed.operator].produces
                        and (
                            e.equivalent_of == failed.operator
                            or entries[failed.operator].equivalent_of in (e.name, e.equivalent_of)
                        )
                    ),
                    None,
                )
                if alternative is not None:
                    new = TaskSpec(
                        id=alternative.name,
                        agent=failed.agent,
                        operator=alternative.name,
                        params=failed.params,
                        needs=failed.needs,
                        produces=alternative.produces,
                        optional=failed.optional,
                    )
                    strategy = strategy.replace_task(failed.id, new).with_tool(
                        failed.agent, alternative.name
                    )
                    continue
                strategy = strategy.remove_tasks(strategy.downstream(failed.id))
            elif rec.action is Action.ADD_AGENT:
                role = entries[failed.operator].role
                agent = agent_for(role, [failed.operator])
                if strategy.agent(agent.name) is None:
                    strategy = strategy.add_agent(agent)
                strategy = strategy.replace_task(
                    failed.id, failed.model_copy(update={"agent": agent.name})
                )
            elif rec.action is Action.REMOVE_SUBGRAPH:
                strategy = strategy.remove_tasks(strategy.downstream(failed.id))
        return strategy.model_copy(update={"round": request.strategy.round + 1})

    def summarize(
        self,
        scenario: Scenario,
        findings: list[Finding],
        coverage: list[CoverageEntry],
        compared: str = "",
    ) -> str:
        if scenario is Scenario.DIAGNOSE:
            causes = sorted(
                (f for f in findings if f.source in ("cross_review_causes", LLM_EXPERTS_SOURCE)),
                key=lambda f: -f.confidence,
            )
            if not causes:
                # What was compared, as the facts say: a window with no baseline was never held against one.
                return "No root cause above the reporting confidence" + (
                    f": {compared}." if compared else "."
                )
            return (
                f"{len(causes)} root causes: "
                + "; ".join(
                    f"{f.code} (confidence {f.confidence:.2f}{', LLM experts only' if f.source == LLM_EXPERTS_SOURCE else ''})"
                    for f in causes
                )
                + "."
            )
        by_severity = Counter(f.severity.value for f in findings)
        problems = by_severity["critical"] + by_severity["warning"]
        not_run = [c.check for c in coverage if c.status is not CoverageStatus.RAN]
        top = sorted((f for f in findings if f.is_problem), key=lambda f: f.severity.rank)[:3]
        lines = [
            f"{problems} problems ({by_severity['critical']} critical, {by_severity['warning']} warning),"
            f" {by_severity['info']} notes."
        ]
        if top:
            lines.append(
                "Most pressing: " + "; ".join(f"{f.code} on {f.object}" for f in top) + "."
            )
        if not_run:
            lines.append(f"Not covered: {', '.join(not_run)}.")
        return " ".join(lines)
