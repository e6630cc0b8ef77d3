"""`dbcrew ask` with the LLM brain, through the scripted OpenAI-compatible server and the real openai client.

Instance questions: the model's Thought / Action / Action Input turns run read-only look-ups on the
embedded shop; a tool name that does not exist and an Action Input that is not JSON are answered
with corrective Observations, never run. Knowledge questions: an answer whose sentences its cited
passages do not support is rejected and asked for again, then the extractive answer stands.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from dbcrew.targets import parse_target
from dbcrew.vocabulary import Route
from dbcrew.workspace import Workspace
from lab.scripted_llm import Reply, ScriptedServer
from lab.shop import DemoShop
from prompts import render
from roles.ask import ask
from roles.ask_llm import unsupported_sentences
from roles.brains.openai import OpenAIBrain
from tests.integration.test_ask import MANUAL_PAGE

PASSAGE = (
    "Sets the base maximum amount of memory to be used by a query operation (such as a sort or hash table) "
    "before writing to temporary disk files."
)


@pytest.fixture()
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedServer]:
    monkeypatch.setenv("DBCREW_CACHE_DIR", str(tmp_path / "cache"))
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
        max_retries=0,
    )


def manual(tmp_path: Path) -> Path:
    docs = tmp_path / "manual"
    docs.mkdir()
    (docs / "runtime-config-resource.html").write_text(MANUAL_PAGE)
    return docs


def test_react_corrects_a_wrong_tool_and_malformed_json_then_answers_from_the_look_up(
    server: ScriptedServer, shop: DemoShop, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(
        "roles.ask.OBSERVATION_LIMIT", 40
    )  # the table_size observation is longer: kept by key
    server.replies = [
        Reply('Thought: I need the size.\nAction: table_sizes\nAction Input: {"table": "orders"}'),
        Reply("Thought: right tool.\nAction: table_size\nAction Input: {table: orders,"),
        Reply(
            'Thought: a table that is not there.\nAction: table_size\nAction Input: {"table": "pg_authid"}'
        ),
        Reply(
            'Thought: now properly.\nAction: table_size\nAction Input: {"schema_name": "public", "table": "orders"}'
        ),
        Reply(
            "Thought: the observation has it.\nFinal Answer: The orders table is the size the look-up reported."
        ),
    ]
    workspace = Workspace(tmp_path / "ask.duckdb")
    answer = ask(
        "how big is the orders table?",
        parse_target(shop.dsn),
        brain=brain(server),
        workspace=workspace,
    )
    assert answer.route is Route.INSTANCE and answer.brain == "openai"
    assert answer.answer == "The orders table is the size the look-up reported."
    assert [(t.operator, t.params) for t in answer.tools] == [
        ("table_size", {"schema_name": "public", "table": "orders"})
    ]
    observations = [r["messages"][-1]["content"] for r in server.requests[1:]]
    assert "There is no tool 'table_sizes'" in observations[0]
    assert "not valid JSON" in observations[1]
    assert "no table 'pg_authid'" in observations[2]
    kept = workspace.query(
        "SELECT body FROM observations WHERE key = ?", [answer.tools[0].observation_key]
    )
    assert (
        answer.tools[0].observation.endswith("…")
        and f"Observation: {json.loads(kept[0]['body'])['observation']}" == observations[3]
    )
    assert answer.llm.calls == 5


def test_an_answer_its_citations_do_not_support_is_regenerated_then_the_extractive_answer_stands(
    server: ScriptedServer, tmp_path: Path
):
    invented = "work_mem also sets how many replicas the primary streams to [1]. It is reloaded hourly [1]."
    server.replies = [Reply(invented), Reply("work_mem limits memory [9].")]
    answer = ask("What does work_mem limit?", None, manual(tmp_path), brain=brain(server))
    assert (
        answer.route is Route.PRODUCT
        and answer.brain == "rules (openai gave no usable cited answer)"
    )
    assert answer.answer.startswith("From ") and "temporary disk files" in answer.answer
    assert (
        len(server.requests) == 2
        and "not supported by the passages" in server.requests[1]["messages"][-1]["content"]
    )
    assert answer.llm.calls == 2


def test_a_supported_answer_is_kept_with_its_citations(server: ScriptedServer, tmp_path: Path):
    server.replies = [
        Reply(
            "work_mem sets the maximum memory a query operation such as a sort uses before it writes "
            "temporary disk files [1]."
        )
    ]
    answer = ask("What does work_mem limit?", None, manual(tmp_path), brain=brain(server))
    assert answer.brain == "openai" and answer.answer.endswith("temporary disk files [1].")
    assert answer.citations[0].section == "runtime-config-resource.html#GUC-WORK-MEM"


@pytest.mark.parametrize(
    ("text", "unsupported"),
    [
        (
            "A query operation may use work_mem of memory before writing temporary disk files [1].",
            0,
        ),
        (
            "A query operation may use work_mem of memory [1]. Then PostgreSQL restarts itself [1].",
            1,
        ),
        ("A query operation may use memory before writing temporary disk files.", 1),  # no citation
        (
            "A query operation may use memory before writing temporary disk files [2].",
            1,
        ),  # no passage 2
    ],
)
def test_unsupported_sentences(text: str, unsupported: int):
    assert len(unsupported_sentences(text, [PASSAGE])) == unsupported
