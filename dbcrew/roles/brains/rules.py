"""The offline brain: a team composed from the alert (dbcrew/roles/brains/composing.py), the scenario playbooks
(dbcrew/roles/brains/playbooks.py) pruned by the brief as its fallback, deterministic repairs and edits."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TypeVar

from dbcrew.llm.base import Brain, BrainError
from dbcrew.logs import data_logger
from dbcrew.models import Finding, Strategy, TaskSpec
from dbcrew.models.crew import Alert, PlanRequest, Problem, Recommendation, ReplanRequest
from dbcrew.models.finding import LLM_EXPERTS_SOURCE
from dbcrew.models.report import CoverageEntry, CoverageStatus, GlobalStateRecord
from dbcrew.roles.brains.composing import Composition, close_over_needs, compose
from dbcrew.roles.brains.playbooks import (
    PLAYBOOKS,
    agent_for,
    diagnose_team,
    strategy_from_operators,
    team_for,
    wire,
)
from dbcrew.roles.brains.team_fit import team_problems
from dbcrew.vocabulary import Action, ProblemKind, Scenario

log = data_logger(__name__)
T = TypeVar("T")
# The objections a refit answers (dbcrew/roles/brains/team_fit.py), rather than the validators' repairs.
FIT_KINDS = frozenset({ProblemKind.MISSING_CHECK, ProblemKind.IDLE_AGENT})


class RulesBrain(Brain):
    name = "rules"

    def __init__(self, composing: bool = True, why_not: str = "") -> None:
        super().__init__()
        self.composing = composing
        self.why_not = why_not or "plan composition switched off"

    def with_fallback(self, what: str, attempt: Callable[[Brain], T]) -> T:
        """A composed plan that reflection could not make valid is planned again by the playbook; the
        playbook's own failure propagates (the rules have nothing further to fall back to)."""
        if not self.composing:
            return attempt(self)
        try:
            return attempt(self)
        except BrainError as exc:
            log.warning(
                "the composed plan could not %s (%s); the playbook planned instead", what, exc
            )
            fallback = RulesBrain(
                composing=False, why_not=f"the composed plan could not be made valid: {exc}"
            )
            fallback.usage = self.usage
            return attempt(fallback)

    def plan(self, request: PlanRequest) -> Strategy:
        """The team the alert calls for; the scenario's playbook when there is no alert, it matches
        nothing, composition is off, or the composed plan could not be made valid (`with_fallback`):
        the plan's rationale says which."""
        composed = (
            compose(request)
            if request.compose and self.composing
            else (self.why_not if request.compose else "plan composition switched off")
        )
        if isinstance(composed, Composition):
            return self.composed(request, composed)
        return self.playbook(request, fallback=composed)

    def composed(self, request: PlanRequest, composition: Composition) -> Strategy:
        constraints = (
            f"; constraints: {'; '.join(request.constraints)}" if request.constraints else ""
        )
        matched = composition.matched
        rationale = (
            f"composed from the alert: it matched {matched} operator{'s' if matched != 1 else ''};"
            f" {len(composition.operators)} planned with what they need and what every"
            f" {request.scenario} plan carries{constraints}"
        )
        if request.scenario is Scenario.DIAGNOSE:
            strategy = diagnose_team(
                composition.operators, request.catalogue, rationale, composition.why
            )
        else:
            strategy = strategy_from_operators(
                composition.operators, request.catalogue, rationale, composition.why
            )
        tasks = [
            t.model_copy(update={"params": {**t.params, **composition.params[t.operator]}})
            if t.operator in composition.params
            else t
            for t in strategy.tasks
        ]
        return strategy.model_copy(update={"tasks": tasks})

    def playbook(self, request: PlanRequest, fallback: str = "") -> Strategy:
        """The scenario's fixed playbook over what the target can run, each task told why (`fallback`: why not composed)."""
        categories = PLAYBOOKS[request.scenario]
        # The catalogue the brain sees is already pruned to what the target can run; among
        # equivalent operators the playbook takes the primary one.
        chosen = [
            e.name
            for e in request.catalogue
            if e.category in categories and e.equivalent_of is None
        ]
        why = {
            e.name: f"the {request.scenario} playbook's {e.category} operators"
            for e in request.catalogue
            if e.name in chosen
        }
        if request.scenario is Scenario.DIAGNOSE:
            strategy = diagnose_team(chosen, request.catalogue, why=why)
            return strategy.model_copy(
                update={"rationale": f"{strategy.rationale} (not composed: {fallback})"}
            )
        rationale = (
            f"{request.scenario} playbook: {len(chosen)} operators over {', '.join(categories)},"
            f" pruned to what {request.brief.current_user} can run on PostgreSQL {request.brief.server_version}"
        ) + (f" (not composed: {fallback})" if fallback else "")
        return strategy_from_operators(chosen, request.catalogue, rationale, why)

    def reflect(
        self, request: PlanRequest, strategy: Strategy, problems: list[Problem]
    ) -> Strategy:
        """Drop tasks naming unknown operators, reset rejected parameters, reassign agents, rewire needs;
        a team that does not fit the run (dbcrew/roles/brains/team_fit.py) is refitted instead."""
        if problems and all(p.kind in FIT_KINDS for p in problems):
            return self.refit(request, strategy, problems)
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

    def refit(self, request: PlanRequest, strategy: Strategy, problems: list[Problem]) -> Strategy:
        """The team with every missing operator added (and what it needs), idle agents gone; the
        tasks already planned keep their parameters and reasons."""
        entries = {e.name: e for e in request.catalogue}
        chosen = {t.operator: t.why for t in strategy.tasks if t.operator in entries}
        for problem in problems:
            if problem.kind is ProblemKind.MISSING_CHECK and problem.task_id in entries:
                chosen.setdefault(problem.task_id, f"added by reflection: {problem.message}")
        closed = close_over_needs(chosen, request.catalogue) or chosen
        order = [e.name for e in request.catalogue if e.name in closed]
        if request.scenario is Scenario.DIAGNOSE:
            refitted = diagnose_team(order, request.catalogue, strategy.rationale, closed)
        else:
            refitted = strategy_from_operators(order, request.catalogue, strategy.rationale, closed)
        kept = {t.id: t for t in strategy.tasks}
        tasks = [
            t.model_copy(update={"params": kept[t.id].params})
            if t.id in kept and not t.params
            else t
            for t in refitted.tasks
        ]
        return refitted.model_copy(update={"tasks": tasks, "round": strategy.round + 1})

    def critique(self, request: PlanRequest, strategy: Strategy) -> list[Problem]:
        """Does the team fit the run (its signals, the scenario's declared operators, no idle agent); asked
        before the run only."""
        return team_problems(request, strategy) if request.before_run else []

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
