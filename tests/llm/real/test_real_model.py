"""A real model (SmolLM2-135M-Instruct behind llama.cpp's llama-server) through the crew's three LLM
paths, a review, a diagnosis and `ask`, in each capability mode.

What llama-server honours with this model: `json_schema` (response_format becomes a grammar, so the
answer cannot leave the schema); `tools` is accepted, but SmolLM2's chat template has no tool syntax,
so the model answers in prose and no tool call ever comes back (the controller asks again until the
budget ends); `prompted` is plain text, sent with its stop sequences. A 135M model adds little; the
point is that every path completes within its LLM budget with the rules' answer standing (a model's
causes and look-ups are extra), and that the report says what the model did: its calls and tokens,
the questions that fell back to the rules and why.

The LLM budget is small (BUDGET seconds per run), so the whole set stays within about a minute and a
half on 2 cores; the budget bound is asserted on the client's own measure of the time its requests
took (`spent_seconds`), not with a timer. On an idle machine SmolLM2 answers within it (about 170
prompt and 50 generated tokens a second); on a busy one its first request may not, and then the
report must say that the budget was spent: either way it says what the model did.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dbcrew.lab.llama_server import LlamaServer
from dbcrew.lab.shop import DemoShop
from dbcrew.llm.client import LlmClient
from dbcrew.models import RootCause
from dbcrew.operators.diagnose.facts import FactsRecord
from dbcrew.prompts import render
from dbcrew.roles.agent.budget import AgentLimits
from dbcrew.roles.ask.answer import ask
from dbcrew.roles.brains.openai import OpenAIBrain
from dbcrew.roles.crew.context import RunContext
from dbcrew.roles.diagnosis.chief import LlmDiagnoser
from dbcrew.roles.spine import PlainPhases, review
from dbcrew.settings.llm import Capability
from dbcrew.settings.run import Settings
from dbcrew.targets import parse_target
from dbcrew.vocabulary import Route
from dbcrew.workspace import Workspace
from tests.llm.test_llm_diagnosis import record, rules  # noqa: F401 - fixtures are found by name

BUDGET = 8.0  # seconds of LLM time a run may spend: a few calls of SmolLM2 on 2 cores
TIMEOUT = 60.0  # the product's default: the budget, not a request's time-out, is what cuts
SLACK = 1.0  # a request cut at the budget ends a little after it (the connection's close)
QUESTION = "how big is the orders table?"


def client_options(llama: LlamaServer) -> dict[str, object]:
    return {
        "base_url": llama.url,
        "api_key": "none",
        "model": llama.model_name,
        "timeout": TIMEOUT,
        "max_retries": 0,
        "budget_seconds": BUDGET,
        "context_tokens": llama.context,
    }


@pytest.mark.parametrize("capability", list(Capability), ids=str)
def test_a_diagnosis_keeps_the_rules_causes_and_counts_what_the_model_did(
    llama: LlamaServer,
    record: FactsRecord,  # noqa: F811 - the imported fixture
    rules: list[RootCause],  # noqa: F811
    capability: Capability,
):
    client = LlmClient(render, **client_options(llama))  # type: ignore[arg-type]
    limits = AgentLimits(experts=1, samples=1, seconds=BUDGET, steps=3)  # both budgets alike
    causes, _, done = LlmDiagnoser(client, render, limits, capability).diagnose(record, rules)
    found = {c.code: c for c in causes}
    assert "workload_many_inserts" in found  # the flood the record holds, named by the rules
    for cause in rules:  # the rules' causes stand; a model's are extra
        assert found[cause.code].confidence >= cause.confidence
    assert (done.calls, done.prompt_tokens) == (client.usage.calls, client.usage.prompt_tokens)
    assert client.spent_seconds <= BUDGET + SLACK
    # What the model did: it answered (calls and tokens counted), or the report says why not.
    assert done.experts
    assert (done.calls >= 1 and done.prompt_tokens > 0) or any(
        "budget" in why for why in done.fallbacks
    ), done


@pytest.mark.parametrize("capability", list(Capability), ids=str)
def test_ask_starts_from_the_rules_look_up_and_says_what_the_model_did(
    llama: LlamaServer,
    shop: DemoShop,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capability: Capability,
):
    monkeypatch.setenv("DBCREW_LLM_CAPABILITY", capability.value)
    brain = OpenAIBrain(render, **client_options(llama))
    target = parse_target(shop.dsn)
    offline = ask(QUESTION, target, workspace=Workspace(tmp_path / "rules.duckdb"))
    answer = ask(QUESTION, target, brain=brain, workspace=Workspace(tmp_path / "llm.duckdb"))
    assert answer.route is offline.route is Route.INSTANCE
    first, rules_first = answer.tools[0], offline.tools[0]
    assert (first.operator, first.params) == (rules_first.operator, rules_first.params)
    usage = answer.llm
    assert usage.questions == 1 and usage.calls == brain.usage.calls
    assert brain.client.spent_seconds <= BUDGET + SLACK
    if usage.fallbacks:  # the rules' answer stands, and the brain says why
        assert answer.answer == offline.answer and answer.brain.startswith("rules (openai")
        assert usage.calls >= 1 or "budget" in answer.brain, answer.brain
    else:  # the model's answer is added to the rules' look-up
        assert answer.brain == "openai" and usage.calls >= 1 and usage.prompt_tokens > 0


def test_a_review_with_the_model_finds_what_the_rules_find_within_its_budget(
    shop: DemoShop, llama: LlamaServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """One review per brain (a review is the costly path), in json_schema, the mode llama-server
    enforces. The plan prompt alone may outlast the small budget on 2 cores: then the rules answer
    every question after it, and the report says that the budget was spent."""

    def reviewed(brain: str, out: Path):  # type: ignore[no-untyped-def]
        run = RunContext(
            target=parse_target(shop.dsn),
            brain=brain,
            out_dir=out,
            settings=Settings(window_seconds=1, activity_samples=2),
        )
        return review(run, PlainPhases)

    offline = reviewed("rules", tmp_path / "rules")
    monkeypatch.setenv("DBCREW_LLM_BASE_URL", llama.url)
    monkeypatch.setenv("DBCREW_LLM_MODEL", llama.model_name)
    monkeypatch.setenv("DBCREW_LLM_CAPABILITY", Capability.JSON_SCHEMA.value)
    monkeypatch.setenv("DBCREW_LLM_BUDGET", str(BUDGET))
    monkeypatch.setenv("DBCREW_LLM_TIMEOUT", str(TIMEOUT))
    monkeypatch.setenv("DBCREW_LLM_MAX_RETRIES", "0")
    monkeypatch.setenv("DBCREW_LLM_CONTEXT", str(llama.context))
    report = reviewed("openai", tmp_path / "openai")

    def problems(codes: list[tuple[str, str]]) -> set[tuple[str, str]]:
        return {c for c in codes if c[1] != "info"}

    rules_found = problems([(f.code, f.severity.value) for f in offline.findings])
    assert rules_found <= problems([(f.code, f.severity.value) for f in report.findings])
    llm = report.llm
    assert llm.questions >= 1
    if llm.fallbacks == llm.questions:
        assert report.brain.startswith("rules (openai gave no usable answer"), report.brain
    elif llm.fallbacks:
        assert f"openai, {llm.fallbacks} of {llm.questions} questions" in report.brain
    else:
        assert report.brain == "openai"
    assert llm.calls >= 1 or "budget" in report.brain, report.brain
    assert f"brain: {report.brain}" in (tmp_path / "openai" / "report.md").read_text()


def test_the_probe_finds_that_llama_server_honours_a_json_schema_but_smollm2_calls_no_tool(
    llama: LlamaServer, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("DBCREW_LLM_CAPABILITY", raising=False)
    client = LlmClient(render, **client_options(llama))  # type: ignore[arg-type]
    assert client.capability() is Capability.JSON_SCHEMA
