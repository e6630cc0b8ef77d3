"""The LLM brain cannot make a review worse than the rules brain (scripted OpenAI-compatible server).

A plan the model cannot make valid (an operator outside the allowlist, no task at all, a critique
that objects to everything) becomes the rules plan, and every question spent on it counts as
fallen back, so report.brain stays honest. A window the model asks for is capped at the user's.
An endpoint that stops answering is asked once, never again in the run: the review's time is
bounded by one request, not one request per question.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import dbcrew.operators  # noqa: F401
from dbcrew.errors import UsageError
from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.lab.scripted_llm import Reply, ScriptedServer
from dbcrew.llm.client import endpoint_limits
from dbcrew.operators.registry import REGISTRY
from dbcrew.prompts import render
from dbcrew.roles.brains.openai import OpenAIBrain
from dbcrew.roles.brains.rules import RulesBrain
from dbcrew.roles.crew.context import RunContext
from dbcrew.roles.crew.planner import make_plan
from dbcrew.roles.crew.run import initialize
from dbcrew.roles.crew.validators import validate
from dbcrew.roles.spine import PlainPhases, review
from dbcrew.settings.run import Settings
from dbcrew.targets import parse_target
from dbcrew.vocabulary import Scenario
from dbcrew.workspace import Workspace
from tests.llm.test_openai_brain import good_plan_json, request

OBJECTION = json.dumps(
    {"problems": [{"task_id": None, "kind": "missing_check", "message": "check everything twice"}]}
)


@pytest.fixture()
def server() -> Iterator[ScriptedServer]:
    s = ScriptedServer()
    yield s
    s.close()


def brain(server: ScriptedServer) -> OpenAIBrain:
    return OpenAIBrain(
        render,
        base_url=server.url,
        api_key="test-key",
        model="scripted",
        timeout=5.0,
        max_repairs=0,
    )


def refused_plan() -> str:
    plan = json.loads(good_plan_json())
    plan["tasks"].append(
        {"id": "drop_everything", "agent": "health-checker", "operator": "drop_everything"}
    )
    return json.dumps(plan)


@pytest.mark.parametrize(
    "answer",
    [refused_plan(), json.dumps({"team": [], "tasks": []})],
    ids=["refused-operator", "empty-plan"],
)
def test_a_plan_the_model_cannot_make_valid_becomes_the_rules_plan(
    server: ScriptedServer, answer: str
):
    server.otherwise = Reply(content=answer)  # the plan and both reflections
    b = brain(server)
    planned = make_plan(b, request(), max_rounds=2)
    assert (
        planned.strategy == RulesBrain().plan(request())
        and validate(planned.strategy, request().catalogue) == []
    )
    assert (
        (b.usage.questions, b.usage.fallbacks)
        == (3, 3)
        == (len(server.requests), len(server.requests))
    )
    assert b.answered_by() == "rules (openai gave no usable answer to any of 3 questions)"


def test_a_critique_that_never_agrees_ends_in_the_rules_plan(server: ScriptedServer):
    server.replies += [
        Reply(content=good_plan_json()),
        *[Reply(content=OBJECTION), Reply(content=good_plan_json())] * 2,
        Reply(content=OBJECTION),
    ]
    b = brain(server)
    planned = make_plan(b, request(), max_rounds=2)
    assert planned.strategy == RulesBrain().plan(request())
    assert len(server.requests) == 6 and (b.usage.questions, b.usage.fallbacks) == (6, 6)
    b.summarize("health", [], [])  # the script is spent: HTTP 500, one more fall-back
    assert b.answered_by() == "rules (openai gave no usable answer to any of 7 questions)"


@pytest.mark.parametrize(
    ("timeout", "retries", "message"),
    [
        ("abc", "", "DBCREW_LLM_TIMEOUT='abc'"),
        ("nan", "", "above 0"),
        ("0", "", "above 0"),
        ("", "-1", "0 to 10"),
        ("", "99", "0 to 10"),
    ],
)
def test_endpoint_limits_refuse_values_out_of_range(
    monkeypatch: pytest.MonkeyPatch, timeout: str, retries: str, message: str
):
    monkeypatch.setenv("DBCREW_LLM_TIMEOUT", timeout)
    monkeypatch.setenv("DBCREW_LLM_MAX_RETRIES", retries)
    with pytest.raises(UsageError, match=message):
        endpoint_limits()


def test_oversized_window_is_capped_and_a_slow_endpoint_is_asked_once(
    pg: EmbeddedPostgres, server: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    plan = json.loads(good_plan_json())
    for task in plan["tasks"]:
        if "window_seconds" in REGISTRY[task["operator"]].params_model.model_fields:
            task["params"] = {"window_seconds": 90}
    # The plan arrives; then the endpoint hangs past the timeout for good. The timeout leaves a loaded
    # host 2 s to bring the plan back, and the hang outlasts it on any host: a second longer.
    server.replies += [Reply(content=json.dumps(plan))]
    server.otherwise = Reply(content='{"problems": []}', delay=3.0)
    monkeypatch.setenv("DBCREW_LLM_BASE_URL", server.url)
    monkeypatch.setenv("DBCREW_LLM_MODEL", "scripted")
    monkeypatch.setenv("DBCREW_LLM_TIMEOUT", "2")
    monkeypatch.setenv("DBCREW_LLM_MAX_RETRIES", "0")
    run = RunContext(
        target=parse_target(pg.dsn("postgres")),
        brain="openai",
        out_dir=tmp_path,
        settings=Settings(window_seconds=1, activity_samples=2),
    )
    report = review(run, PlainPhases)
    assert len(server.requests) == 2, (
        "after the first request that timed out, no question reached the endpoint"
    )
    assert report.llm.fallbacks == report.llm.questions - 1 >= 2
    assert report.brain == (
        f"openai, {report.llm.fallbacks} of {report.llm.questions} questions fell back to rules"
        " (APITimeoutError: Request timed out.)"
    )  # the report says why the endpoint was not asked again
    windows = Workspace(run.workspace_path).query(
        "SELECT max(window_seconds) AS longest FROM database_stats"
    )
    assert windows[0]["longest"] < 5, "the plan's 90 s window outgrew --window 1"


def test_an_answer_cut_at_max_tokens_is_asked_again_shorter_never_taken_as_it_is(
    server: ScriptedServer,
):
    """A verbose model's critique is cut by the server at the critique's max_tokens; json-repair
    would close the cut text into a valid critique with fewer problems, so it is asked again."""
    problem = {"task_id": None, "kind": "empty_plan", "message": "the plan collects nothing"}
    padding = [{**problem, "message": "x" * 400}] * 20  # far past the critique's 800 tokens
    server.replies = [
        Reply(content=json.dumps({"problems": [problem, *padding]})),
        Reply(content=json.dumps({"problems": [problem]})),
    ]
    b = OpenAIBrain(render, base_url=server.url, api_key="k", model="scripted", timeout=5.0)
    problems = b.critique(request(), RulesBrain().plan(request()))
    assert [p.message for p in problems] == ["the plan collects nothing"]
    assert (b.usage.calls, b.usage.fallbacks) == (2, 0)  # repaired, not a fall-back or a time-out
    first, second = server.requests
    assert first["max_tokens"] == second["max_tokens"] == 800
    assert "cut off at 800 tokens" in second["messages"][-1]["content"]
    assert len(second["messages"][-2]["content"]) < 300  # the cut text is not sent back whole


def test_the_runs_llm_time_budget_ends_the_models_questions_and_the_report_says_so(
    server: ScriptedServer,
):
    """Each answer takes 1 s, inside the 5 s timeout: a slow endpoint that answers. Once the run's
    2 s budget is spent, no question reaches it and the rules answer the rest. Two answers' time, so
    the second spends it on any host, and the first leaves it unspent unless the client's own work
    around that answer takes a whole second (0.6 s answers in a 1 s budget left it 0.4 s)."""
    server.replies = [Reply(content="{not json", delay=1.0)] * 10
    b = OpenAIBrain(
        render,
        base_url=server.url,
        api_key="k",
        model="scripted",
        timeout=5.0,
        max_repairs=5,
        budget_seconds=2.0,
    )
    plan = b.plan(request())
    assert plan.tasks and len(server.requests) == 2  # the second request spent the budget
    b.critique(request(), plan)
    assert len(server.requests) == 2 and b.usage.fallbacks == b.usage.questions == 2
    assert "LLM time budget of 2 s is spent" in b.answered_by()


def test_a_live_diagnosis_is_planned_by_the_rules_so_no_model_delays_its_window(
    pg: EmbeddedPostgres, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: ScriptedServer
):
    """The anomaly a diagnosis is asked about may end while a model plans: its window is sampled
    first, and the model (here one that would answer anything) is asked nothing before it."""
    monkeypatch.setenv("DBCREW_LLM_BASE_URL", server.url)
    monkeypatch.setenv("DBCREW_LLM_MODEL", "scripted")
    server.otherwise = Reply(content=good_plan_json())
    common = {
        "target": parse_target(pg.dsn("postgres")),
        "brain": "openai",
        "settings": Settings(window_seconds=1),
    }
    diagnosis = initialize(RunContext(scenario=Scenario.DIAGNOSE, out_dir=tmp_path / "d", **common))
    assert not server.requests and diagnosis.strategy.tasks  # the rules' playbook, at once
    initialize(RunContext(scenario=Scenario.HEALTH, out_dir=tmp_path / "h", **common))
    assert server.requests  # a health review's plan is still the model's to make


def test_a_json_schema_endpoint_gets_each_answers_schema_as_response_format(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
):
    """Set to json_schema (llama.cpp, vLLM), the plan and its critique are constrained by their
    schemas, not only asked for in the prompt."""
    monkeypatch.setenv("DBCREW_LLM_CAPABILITY", "json_schema")
    server.replies = [Reply(content=good_plan_json()), Reply(content='{"problems": []}')]
    b = brain(server)
    b.critique(request(), b.plan(request()))
    formats = [r["response_format"]["json_schema"] for r in server.requests]
    assert [f["name"] for f in formats] == ["Strategy", "Problems"]
    assert formats[1]["schema"]["required"] == ["problems"]
