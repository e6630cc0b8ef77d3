"""Prompts fit the declared context (DBCREW_LLM_CONTEXT): the data is cut, never the schema, and the
prompt says what was cut. The plan's prompt is the largest the crew sends (brief, catalogue, schema)."""

from __future__ import annotations

from dbcrew.llm.client import LlmClient
from dbcrew.llm.fit import answer_room, approx_tokens, fit
from dbcrew.models import Strategy
from dbcrew.prompts import render
from dbcrew.roles.brains.openai import ANSWER_TOKENS, _catalogue
from tests.llm.test_openai_brain import request

NOWHERE = "http://127.0.0.1:9/v1"  # never asked: the prompt is only rendered


def plan_context() -> dict[str, object]:
    r = request()
    return {"scenario": r.scenario, "brief": r.brief.model_dump(), "catalogue": _catalogue(r)}


def test_a_plan_prompt_over_the_context_is_cut_to_fit_and_says_what_was_cut():
    context = plan_context()
    system = render("system.j2", {})
    whole = LlmClient(render, base_url=NOWHERE, context_tokens=65536)
    uncut = whole.prompt("plan.j2", context, Strategy, ANSWER_TOKENS["plan.j2"], system)
    small = LlmClient(render, base_url=NOWHERE, context_tokens=3072)
    cut = small.prompt("plan.j2", context, Strategy, ANSWER_TOKENS["plan.j2"], system)
    room = 3072 - answer_room(ANSWER_TOKENS["plan.j2"], 3072) - approx_tokens(system)
    assert approx_tokens(uncut) > room, "the test needs a prompt over the context"
    assert "Cut to fit" not in uncut
    head, note = cut.split("Cut to fit the model's context of 3072 tokens", 1)
    assert approx_tokens(head) <= room
    assert "- catalogue: " in note and " items kept" in note  # the largest data goes first
    schema = render("plan.j2", {**context, "schema": Strategy.model_json_schema()})
    assert schema[schema.index("Answer with JSON") :] in head  # the schema is never cut
    assert len(context["catalogue"]) == len(_catalogue(request()))  # the caller's data is untouched


def test_fit_halves_the_largest_value_first_and_leaves_a_fitting_prompt_alone():
    def shown(data: dict[str, object]) -> str:
        return repr(data)

    data = {
        "small": ["a"] * 4,
        "brief": {"tables": ["t" * 10] * 64, "name": "x"},
        "schema": "s" * 900,
    }
    assert fit(shown, data, 10_000).cut == ()
    fitted = fit(shown, data, 400)
    assert approx_tokens(fitted.text) <= 400
    assert fitted.cut[0].startswith("brief.tables: ") and "of 64 items kept" in fitted.cut[0]
    assert "s" * 900 in fitted.text  # a kept key (the schema) is never cut
