"""The chief of the LLM diagnosis: forms the team, runs each expert under the controller, guards
and votes on their proposals, and merges them with the rules' causes.

Never worse than offline: the rules' causes (already cross-reviewed) are kept as they are; an LLM
expert can corroborate one (its explanation joins the evidence) or add a cause the rules did not
name, but only a code from the vocabulary whose cited values match the observations and which the
measured evidence supports (dbcrew/operators/diagnose/support.py), at a capped confidence, within D-Bot's
limit of four causes. A cause the evidence does not support is the model's unconfirmed hypothesis,
reported apart from the root causes. Whatever stops the experts (the budget, a dead
endpoint, an expert that never answers) leaves the rules' answer standing, and the report says so.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace

from dbcrew.llm.base import BrainError, EndpointDown
from dbcrew.llm.client import LlmClient, Render, ResponseCache
from dbcrew.models import RootCause
from dbcrew.models.report import Hypothesis, LlmDiagnosis
from dbcrew.operators.diagnose.candidates import Candidate
from dbcrew.operators.diagnose.cross_review import MAX_CAUSES, MIN_CONFIDENCE
from dbcrew.operators.diagnose.experts import EXPERT_SIGNALS, experts_by_code, select_experts
from dbcrew.operators.diagnose.facts import FactsRecord
from dbcrew.operators.diagnose.support import Support, expert_candidates, support
from dbcrew.operators.knowledge import knowledge_base
from dbcrew.roles.agent.budget import AgentLimits, Budget, BudgetExhausted
from dbcrew.roles.agent.controller import Controller, Tally
from dbcrew.roles.agent.snapshots import Snapshots
from dbcrew.roles.diagnosis.agenda import DIAGNOSIS, run_expert
from dbcrew.roles.diagnosis.guard import GuardedCause, check
from dbcrew.roles.diagnosis.tools import DiagnosisTools
from dbcrew.settings.llm import Capability
from dbcrew.settings.thresholds import Thresholds
from dbcrew.text.untrusted import model_text
from dbcrew.vocabulary import Cause

JOIN_SHARE = 0.25  # an expert the alert does not name joins when it explains this share of the abnormal metrics
SHOWN_ABNORMAL = 8  # in the task prompt; every call of the conversation carries it
NEW_CAUSE_CONFIDENCE = (
    0.7  # the most an LLM-only cause may claim: below what corroborated rules reach
)


@dataclass
class LlmDiagnoser:
    """The LLM half of a diagnosis over one endpoint; `cache` may be shared between diagnoses."""

    client: LlmClient
    render: Render
    limits: AgentLimits
    capability: Capability
    cache: ResponseCache | None = None

    @classmethod
    def from_env(
        cls,
        client: LlmClient,
        render: Render,
        cache: ResponseCache | None = None,
        seconds: float | None = None,
    ) -> LlmDiagnoser:
        """The environment's limits; `seconds`, when given, caps their time budget (never below zero)."""
        limits = AgentLimits.from_env()
        if seconds is not None:
            limits = replace(limits, seconds=max(0.0, min(limits.seconds, seconds)))
        return cls(client, render, limits, client.capability(), cache)

    def diagnose(
        self,
        record: FactsRecord,
        rules: list[RootCause],
        store: Callable[[str, str], object] | None = None,
        thresholds: Thresholds | None = None,
        knowledge: dict[str, list[str]] | None = None,
    ) -> tuple[list[RootCause], list[Hypothesis], LlmDiagnosis]:
        """The merged root causes, the model's unconfirmed hypotheses and what the experts did; `store`
        keeps long observations in the workspace; `thresholds` are the run's (what the evidence must show);
        `knowledge` the librarian's chunks by expert, which reach each expert's prompt."""
        team = team_for(record, self.limits.experts)
        tally, budget = Tally(), Budget(self.limits)
        tools = DiagnosisTools(record, self.limits.observation_chars, Snapshots(store))
        controller = Controller(
            self.client, self.render, tools, budget, self.capability, tally, DIAGNOSIS, self.cache
        )
        context = expert_context(record, rules)
        out = LlmDiagnosis(experts=team, samples=self.limits.samples)
        accepted: list[tuple[str, GuardedCause]] = []
        for expert in team:
            answers: list[list[GuardedCause]] = []
            for sample in range(self.limits.samples):
                try:
                    proposals = run_expert(
                        replace(controller, tools=tools.for_expert(expert)),
                        expert,
                        {
                            **context,
                            "owned": owned_codes(expert),
                            "knowledge": (knowledge or {}).get(expert, []),
                        },
                        sample,
                    )
                except BudgetExhausted as exc:
                    out.stopped = str(exc)
                    out.fallbacks.append(f"{expert}: budget ran out ({exc})")
                    break
                except EndpointDown as exc:
                    out.stopped = f"endpoint down: {exc}"
                    out.fallbacks.append(f"{expert}: endpoint did not answer ({exc})")
                    break
                except BrainError as exc:
                    out.fallbacks.append(f"{expert}: {exc}")
                    continue
                kept = []
                for proposal in proposals:
                    verdict = check(proposal, record)
                    if isinstance(verdict, str):
                        out.rejected.append(f"{expert}: {proposal.code}: {verdict}")
                    else:
                        kept.append(verdict)
                answers.append(kept)
            accepted += [(expert, cause) for cause in vote(answers)]
            if out.stopped:
                out.fallbacks += [
                    f"{e}: not asked, the diagnosis stopped" for e in team[team.index(expert) + 1 :]
                ]
                break
        out.accepted = [f"{expert}: {cause.code}" for expert, cause in accepted]
        out.calls, out.cached, out.prompt_tokens, out.completion_tokens = (
            tally.calls,
            tally.cached,
            tally.prompt_tokens,
            tally.completion_tokens,
        )
        out.tool_calls, out.snapshots, out.repairs, out.regenerations = (
            tally.tool_calls,
            tally.snapshots,
            tally.repairs,
            tally.regenerations,
        )
        out.reflections, out.backtracks = tally.reflections, tally.backtracks
        out.corrections = dict(tally.corrections)
        causes, hypotheses = merge(rules, accepted, evidence_for(record, thresholds))
        return causes, hypotheses, out


def evidence_for(record: FactsRecord, thresholds: Thresholds | None) -> Callable[[Cause], Support]:
    """What the measurements say of a code (dbcrew/operators/diagnose/support.py); the experts run once, when
    the first cause only a model names is judged."""
    facts = record.facts(thresholds)
    candidates: list[Candidate] | None = None

    def judged(code: Cause) -> Support:
        nonlocal candidates
        if candidates is None:
            candidates = expert_candidates(facts)
        return support(code, facts, candidates)

    return judged


def team_for(record: FactsRecord, size: int) -> list[str]:
    """At most `size` experts, sized by what the anomaly needs (every expert costs its own conversation):
    the experts the alert names and the strongest one, then, greedily, the expert explaining the most abnormal metrics the
    team does not yet explain, while it explains at least JOIN_SHARE of all the abnormal metrics.
    Without a baseline nothing is abnormal: every expert is engaged, ranked by the alert's words."""
    engaged = select_experts(record.alert, record.abnormal, record.baseline is not None)
    words = {w.strip(".,:;()[]\"'").lower() for w in record.alert.split()}
    named = {e for e in engaged if words & set(EXPERT_SIGNALS[e][1])}
    explains = {
        e: {m.name for m in record.abnormal if m.name.startswith(EXPERT_SIGNALS[e][0])}
        for e in engaged
    }
    if not record.abnormal:
        return sorted(engaged, key=lambda e: e not in named)[:size]
    team: list[str] = []
    explained: set[str] = set()
    while len(team) < size and (left := [e for e in engaged if e not in team]):
        best = max(left, key=lambda e: (e in named, len(explains[e] - explained)))
        if (
            team
            and best not in named
            and len(explains[best] - explained) < max(1.0, JOIN_SHARE * len(record.abnormal))
        ):
            break
        team.append(best)
        explained |= explains[best]
    return team


def owned_codes(expert: str) -> list[str]:
    return sorted(code for code, owner in experts_by_code().items() if owner == expert)


def expert_context(record: FactsRecord, rules: list[RootCause]) -> dict[str, object]:
    """What every expert starts from: the alert, the baseline, the strongest abnormal metrics (the
    rest are one `observe abnormal` away) and the rules' causes."""
    strongest = sorted(record.abnormal, key=lambda m: -abs(m.z))[:SHOWN_ABNORMAL]
    return {
        "alert": record.alert or "no alert text",
        "baseline": record.baseline_source or "none",
        "abnormal": [
            f"{m.name} {m.baseline_median:.3g} -> {m.window_median:.3g}, z {m.z:.0f}"
            for m in strongest
        ],
        "more": len(record.abnormal) - len(strongest),
        "rules": [str(c.code) for c in rules],
    }


def vote(answers: list[list[GuardedCause]]) -> list[GuardedCause]:
    """Self-consistency: a code stands when more than half of the expert's answers proposed it (one
    answer: itself), with the mean of their confidences."""
    by_code: dict[Cause, list[GuardedCause]] = defaultdict(list)
    for answer in answers:
        for cause in {c.code: c for c in answer}.values():
            by_code[cause.code].append(cause)
    kept = []
    for same in by_code.values():
        if 2 * len(same) > len(answers):
            kept.append(
                same[0].model_copy(
                    update={"confidence": round(sum(c.confidence for c in same) / len(same), 2)}
                )
            )
    return kept


def merge(
    rules: list[RootCause],
    accepted: list[tuple[str, GuardedCause]],
    evidence: Callable[[Cause], Support],
) -> tuple[list[RootCause], list[Hypothesis]]:
    """The rules' causes in their order, corroborated where an expert agreed, then the new guarded causes
    the measured `evidence` supports while room is left (a model only adds: what it proposes never
    outranks what the rules measured, and never stands against the measurements); the others are the
    model's unconfirmed hypotheses."""
    merged = {c.code: c.model_copy(deep=True) for c in rules}
    hypotheses: dict[Cause, Hypothesis] = {}
    for expert, cause in accepted:
        note = {
            "expert": expert,
            "explanation": cause.explanation,
            "cited": [c.model_dump() for c in cause.evidence],
        }
        if cause.code in merged:
            merged[cause.code].evidence.setdefault("llm", []).append(note)
            continue
        if cause.code in hypotheses:
            continue
        verdict = evidence(cause.code)
        if not verdict.confirmed:
            hypotheses[cause.code] = Hypothesis(
                code=cause.code,
                confidence=cause.confidence,
                expert=expert,
                explanation=model_text(cause.explanation),
                unconfirmed=verdict.why,
                time_share=verdict.time_share,
            )
            continue
        confidence = min(cause.confidence, NEW_CAUSE_CONFIDENCE)
        if confidence < MIN_CONFIDENCE or len(merged) >= MAX_CAUSES:
            continue
        chunk = knowledge_base().for_code(cause.code)
        merged[cause.code] = RootCause(
            code=cause.code,
            confidence=confidence,
            evidence={"source": "llm", "llm": [note], "supported_by": verdict.why},
            solution=chunk.solution if chunk else "",
            time_share=verdict.time_share,
        )
    # the rules' order (by the time each explains), the model's after
    return list(merged.values()), list(hypotheses.values())
