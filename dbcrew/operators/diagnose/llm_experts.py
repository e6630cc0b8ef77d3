"""The LLM experts as a planned step of a diagnosis: after the rules' cross review, when the run's brain is an LLM.

The step reads the cross review's causes from the workspace (ROOT_CAUSES), asks the run's LLM experts
(OperatorContext.llm_experts: the crew binds them to the run's brain and deadline, and their loop is
dbcrew/roles/diagnosis/), and writes what they added as one artifact (LLM_ADDITIONS) that the report
only reads: the root causes once the experts had their say (the rules' first, a model's only where the
measurements support it), the model's unconfirmed hypotheses apart, and what the experts did.

It is declared `consults_llm`: only an LLM run's catalogue holds it, so a rules run plans exactly what
it planned before; and it is work that can wait, so it starts once the answer is written in the
workspace, stands down when the run's deadline is near, and its experts get only the time left
before the deadline's reserve (the report's `run_deadline` line says when it stood down).
"""

from __future__ import annotations

import json

from dbcrew.artifacts import declare
from dbcrew.models import Finding, Role, RootCause
from dbcrew.models.finding import LLM_EXPERTS_SOURCE, Severity
from dbcrew.models.report import LlmAdditions
from dbcrew.operators.diagnose.steps import FACTS_KEY, KNOWLEDGE_KEY, ROOT_CAUSES
from dbcrew.operators.knowledge import knowledge_base
from dbcrew.operators.registry import Observation, OperatorContext, OperatorMisfit, operator
from dbcrew.vocabulary import Category, Scenario

LLM_ADDITIONS = declare("llm_additions")  # what the LLM experts added to the cross review's answer


def cross_reviewed(ctx: OperatorContext) -> list[RootCause]:
    """The cross review's causes as it stored them; none when it did not complete (the experts then
    start from no rules' cause, as a report without one does)."""
    body = ctx.workspace.observation(ROOT_CAUSES)
    return [] if body is None else [RootCause.model_validate(c) for c in json.loads(body)]


@operator(
    role=Role.TASKER,
    category=Category.DIAGNOSE,
    needs=(FACTS_KEY,),
    uses=(ROOT_CAUSES, KNOWLEDGE_KEY),
    produces=(LLM_ADDITIONS,),
    planned_for=frozenset({Scenario.DIAGNOSE}),
    consults_llm=True,
)
def consult_llm_experts(ctx: OperatorContext) -> Observation:
    """LLM experts, after the cross review: tool-calling experts observe the sampled window and propose causes; one stands only on observed values, and joins the root causes only where the measurements support it (else it is the model's hypothesis)."""
    if ctx.llm_experts is None:
        raise OperatorMisfit("the run's brain is not an LLM: there are no LLM experts to consult")
    additions = ctx.llm_experts(ctx.workspace, cross_reviewed(ctx), ctx.settings.thresholds)
    ctx.workspace.put_observation(LLM_ADDITIONS, additions.model_dump_json())
    return Observation(
        summary=summary_of(additions),
        findings=llm_only_findings(additions.root_causes),
        artifacts=[LLM_ADDITIONS],
    )


def summary_of(additions: LlmAdditions) -> str:
    """One line of what the experts did: who was asked, what stands, what stayed a hypothesis, what stopped them."""
    done = additions.diagnosis
    if done is None:
        return "LLM experts: no sampled window to show them"
    added = [str(c.code) for c in additions.root_causes if c.evidence.get("source") == "llm"]
    parts = [
        f"LLM experts ({', '.join(done.experts) or 'none'}): {done.calls} calls",
        f"added {', '.join(added)}" if added else "no cause added",
    ]
    if additions.hypotheses:
        parts.append(f"hypotheses {', '.join(str(h.code) for h in additions.hypotheses)}")
    if done.stopped:
        parts.append(f"stopped: {done.stopped}")
    return "; ".join(parts)


def llm_only_findings(causes: list[RootCause]) -> list[Finding]:
    """A finding for each cause only the LLM experts named, so a reader meets it where the rules'
    causes are (the summary, the findings table), marked as the experts' and with their explanation."""
    found = []
    for cause in causes:
        if cause.evidence.get("source") != "llm":
            continue
        chunk = knowledge_base().for_code(cause.code)
        why = "; ".join(
            f"{n['expert']}: {n['explanation']}"
            for n in cause.evidence["llm"]
            if n.get("explanation")
        )
        found.append(
            Finding(
                code=cause.code,
                severity=Severity.WARNING,
                object="database",
                title=f"root cause named by the LLM experts only: {chunk.name if chunk else cause.code} "
                f"(confidence {cause.confidence:.2f}){f': {why}' if why else ''}",
                evidence=cause.evidence,
                recommendation=cause.solution,
                confidence=cause.confidence,
                source=LLM_EXPERTS_SOURCE,
            )
        )
    return found
