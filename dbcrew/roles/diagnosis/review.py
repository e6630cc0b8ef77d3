"""The LLM diagnosis inside a review: the run's LLM experts, which the diagnosis's planned step
(dbcrew/operators/diagnose/llm_experts.py: after the rules' cross review, when the run's brain is an LLM)
consults through its operator context (bound to the run's brain and deadline by dbcrew/roles/crew/context.py).

The facts the sampler left in the run's workspace are the experts' whole world; long observations
go back into that workspace under their snapshot keys. The diagnosis is one question of the run's
brain: it falls back (the rules' causes stand) when the experts gave nothing usable, and an endpoint
that stopped answering earlier in the run is not asked at all. The experts' time is what is left
before the run's deadline keeps its reserve: a model never delays the rules' answer past it.
"""

from __future__ import annotations

import json

from dbcrew.llm.base import Brain
from dbcrew.models import RootCause
from dbcrew.models.report import Hypothesis, LlmAdditions, LlmDiagnosis
from dbcrew.operators.diagnose.facts import FactsRecord
from dbcrew.operators.diagnose.steps import FACTS_KEY, KNOWLEDGE_KEY, Retrieved
from dbcrew.operators.knowledge import knowledge_base
from dbcrew.prompts import render
from dbcrew.roles.agent.cache import response_cache
from dbcrew.roles.brains.openai import OpenAIBrain
from dbcrew.roles.diagnosis.chief import LlmDiagnoser
from dbcrew.settings.thresholds import Thresholds
from dbcrew.workspace import Workspace


def librarians_chunks(workspace: Workspace) -> dict[str, list[str]]:
    """The chunks the librarian retrieved for the window (dbcrew/operators/diagnose/steps.py), by the expert
    that owns them, as the text an expert's prompt quotes; empty when no librarian ran or knowledge is off."""
    body = workspace.observation(KNOWLEDGE_KEY)
    handed = [] if body is None else [Retrieved.model_validate(r) for r in json.loads(body)]
    chunks = {(c.name, str(c.code)): c for c in knowledge_base().chunks}
    by_expert: dict[str, list[str]] = {}
    for item in handed:
        chunk = chunks.get((item.name, item.code))
        if chunk is not None:
            by_expert.setdefault(chunk.expert, []).append(
                f"{chunk.name}: {chunk.content} Steps: {chunk.steps} ({chunk.source})"
            )
    return by_expert


def with_llm_experts(
    brain: Brain,
    workspace: Workspace,
    rules: list[RootCause],
    thresholds: Thresholds | None = None,
    seconds: float | None = None,
) -> tuple[list[RootCause], list[Hypothesis], LlmDiagnosis | None]:
    """The root causes once the LLM experts had their say, the model's unconfirmed hypotheses, and
    what the experts did; the rules' causes untouched, no hypothesis and None when the brain is not
    an LLM or nothing was sampled. `thresholds` are the run's (what the evidence must show);
    `seconds` caps the experts' time budget (what is left before the run's deadline)."""
    body = workspace.observation(FACTS_KEY)
    if not isinstance(brain, OpenAIBrain) or body is None:
        return rules, [], None
    if brain.down:
        brain.count_question(fell_back=True)
        return (
            rules,
            [],
            LlmDiagnosis(
                stopped=f"endpoint down earlier in the run: {brain.down}",
                fallbacks=["every expert: the endpoint stopped answering earlier in the run"],
            ),
        )
    record = FactsRecord.model_validate_json(body)
    causes, hypotheses, section = LlmDiagnoser.from_env(
        brain.client, render, response_cache(), seconds=seconds
    ).diagnose(record, rules, workspace.put_observation, thresholds, librarians_chunks(workspace))
    down = (
        section.stopped.removeprefix("endpoint down: ")
        if section.stopped.startswith("endpoint down")
        else ""
    )
    brain.count_question(fell_back=not section.accepted and bool(section.fallbacks), down=down)
    return causes, hypotheses, section


def consult(
    brain: Brain,
    workspace: Workspace,
    rules: list[RootCause],
    thresholds: Thresholds,
    seconds: float,
) -> LlmAdditions:
    """The LLM experts consulted for the diagnosis's step (dbcrew/operators/diagnose/llm_experts.py): what
    `with_llm_experts` returns, as the step stores it."""
    causes, hypotheses, section = with_llm_experts(brain, workspace, rules, thresholds, seconds)
    return LlmAdditions(root_causes=causes, hypotheses=hypotheses, diagnosis=section)
