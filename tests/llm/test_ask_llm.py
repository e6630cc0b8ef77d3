"""`dbcrew ask` with the LLM brain, through the scripted OpenAI-compatible server and the real openai client.

Instance questions: the rules' look-up runs first and the model adds to it; the model's Thought /
Action / Action Input turns (or native tool calls) run the registry's read-only look-ups on the
embedded shop; a tool name that does not exist, an Action Input that is not JSON and a table the
database does not have are answered with corrections, never run; an Observation the model writes
itself is cut from its turn and never seen again. Knowledge questions: an answer whose sentences its cited
passages do not support is rejected and asked for again, then the extractive answer stands.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from dbcrew.lab.scripted_llm import Reply, ScriptedServer
from dbcrew.lab.shop import DemoShop
from dbcrew.prompts import render
from dbcrew.roles.ask.answer import ask
from dbcrew.roles.ask.llm import unsupported_sentences
from dbcrew.roles.brains.openai import OpenAIBrain
from dbcrew.targets import parse_target
from dbcrew.vocabulary import Route
from dbcrew.workspace import Workspace
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


@pytest.fixture()
def prompted(monkeypatch: pytest.MonkeyPatch) -> None:
    """An endpoint that only follows the prompt: the ReAct text format, sent with its stop."""
    monkeypatch.setenv("DBCREW_LLM_CAPABILITY", "prompted")


def test_react_corrects_a_wrong_tool_malformed_input_and_an_unknown_table_then_adds_to_the_rules_look_up(
    server: ScriptedServer,
    shop: DemoShop,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    prompted: None,
):
    monkeypatch.setattr(
        "dbcrew.roles.ask.instance.OBSERVATION_LIMIT", 40
    )  # the table_size observation is longer: kept by key
    server.replies = [
        Reply(
            'Thought: I need the indexes.\nAction: table_sizes\nAction Input: {"table": "orders"}'
        ),
        Reply("Thought: right tool.\nAction: table_indexes\nAction Input: orders, please"),
        Reply(
            'Thought: a table that is not there.\nAction: table_indexes\nAction Input: {"table": "pg_authid"}'
        ),
        Reply(
            'Thought: now properly.\nAction: table_indexes\nAction Input: {"schema_name": "public", "table": "orders"}'
        ),
        Reply(
            "Thought: the observations have it.\nFinal Answer: The orders table is the size the look-up reported."
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
    rules, added = answer.tools
    assert (rules.operator, rules.params) == (
        "table_size",
        {"schema_name": "public", "table": "orders"},
    )
    assert (added.operator, added.params) == (
        "table_indexes",
        {"schema_name": "public", "table": "orders"},
    )
    whole = workspace.query("SELECT body FROM observations WHERE key = ?", [rules.observation_key])[
        0
    ]["body"]
    assert rules.observation.endswith("…") and whole.startswith("Table public.orders takes")
    assert (
        answer.answer == f"{whole}\nThe orders table is the size the look-up reported."
    )  # the rules' answer stands
    assert (
        whole in server.requests[0]["messages"][1]["content"]
    )  # the model starts from the rules' look-up
    corrections = [r["messages"][-1]["content"] for r in server.requests[1:]]
    assert 'There is no tool "table_sizes"' in corrections[0]
    assert "the Action Input of table_indexes is not a JSON object" in corrections[1]
    assert "no table 'pg_authid'" in corrections[2]
    assert (
        corrections[3].startswith("Observation: <data>Table public.orders has")
        and "orders_customer_id_idx" in corrections[3]
    )
    assert all(r["stop"] == ["Observation:"] and "tools" not in r for r in server.requests)
    assert (answer.llm.calls, answer.llm.questions, answer.llm.fallbacks) == (5, 1, 0)


def test_a_models_own_observation_is_discarded_and_its_action_runs_for_real(
    server: ScriptedServer, shop: DemoShop, prompted: None
):
    server.replies = [
        Reply(
            'Thought: I need the indexes too.\nAction: table_indexes\nAction Input: {"table": "orders"}\n'
            "Observation: Table public.orders has no index (or does not exist).\n"
            "Thought: I know it now.\nFinal Answer: orders has no index: create_every_index_now."
        ),
        Reply(
            "Thought: the observations list them.\nFinal Answer: orders has the columns and indexes the look-ups listed."
        ),
    ]
    answer = ask(
        "which columns does the orders table have?", parse_target(shop.dsn), brain=brain(server)
    )
    assert answer.brain == "openai" and [t.operator for t in answer.tools] == [
        "table_columns",
        "table_indexes",
    ]
    ran = answer.tools[1]  # the model's action, run for real
    assert (
        ran.params == {"schema_name": "public", "table": "orders"}
        and "orders_customer_id_idx" in ran.observation
    )
    turn, observed = server.requests[1]["messages"][-2:]
    assert turn == {
        "role": "assistant",
        "content": "Thought: I need the indexes too.\nAction: table_indexes\n"
        'Action Input: {"table": "orders"}',
    }  # cut at its own Observation
    assert observed["role"] == "user" and "orders_customer_id_idx" in observed["content"]
    assert (
        "create_every_index_now" not in json.dumps(server.requests[1])
        and "create_every_index_now" not in answer.answer
    )
    assert (
        "has no index" not in json.dumps(server.requests[1]) and "has no index" not in answer.answer
    )
    assert answer.answer.endswith("\norders has the columns and indexes the look-ups listed.")


def test_a_final_answer_with_no_tool_called_leaves_the_rules_look_up_standing(
    server: ScriptedServer, shop: DemoShop, prompted: None
):
    server.replies = [
        Reply("Thought: I just know.\nFinal Answer: cart_items was vacuumed a minute ago.")
    ]
    answer = ask("when was cart_items last vacuumed?", parse_target(shop.dsn), brain=brain(server))
    assert [t.operator for t in answer.tools] == ["table_stats"] and answer.tools[0].params[
        "table"
    ] == "cart_items"
    assert (
        answer.answer.startswith("Table public.cart_items:") and "last vacuum" in answer.answer
    )  # the look-up was made
    assert (
        answer.answer.endswith("\ncart_items was vacuumed a minute ago.")
        and len(server.requests) == 1
    )


def test_native_tool_calls_run_the_registry_look_ups(server: ScriptedServer, shop: DemoShop):
    server.replies = [
        Reply(
            tool_calls=[("table_stats", {"table": "cart_items"}), ("setting", {"name": "work_mem"})]
        ),
        Reply(tool_calls=[("final_answer", {"answer": "Autovacuum is off on cart_items."})]),
    ]
    answer = ask(
        "why is autovacuum not running on cart_items?", parse_target(shop.dsn), brain=brain(server)
    )
    assert [t.operator for t in answer.tools] == [
        "table_stats",
        "setting",
    ]  # the rules' look-up, then the model's new one
    assert (
        answer.answer.endswith("\nAutovacuum is off on cart_items.")
        and "autovacuum_enabled=false" in answer.answer
    )
    first = server.requests[0]
    assert "stop" not in first and first["tools"][-1]["function"]["name"] == "final_answer"
    assert [m["role"] for m in server.requests[1]["messages"][-3:]] == ["assistant", "tool", "tool"]
    assert (
        "You already called table_stats" in server.requests[1]["messages"][-2]["content"]
    )  # the rules had run it


def test_a_json_schema_endpoint_gets_a_response_format_and_a_repeated_question_is_answered_from_the_cache(
    server: ScriptedServer, shop: DemoShop, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("DBCREW_LLM_CAPABILITY", "json_schema")
    server.replies = [
        Reply(json.dumps({"thought": "which tables?", "action": "list_tables", "args": {}})),
        Reply(
            json.dumps(
                {"action": "final_answer", "args": {"answer": "The shop has its orders and more."}}
            )
        ),
    ]
    question = "which extensions are installed on this database?"  # a look-up whose observation stays the same
    first = ask(question, parse_target(shop.dsn), brain=brain(server))
    assert [t.operator for t in first.tools] == [
        "extensions",
        "list_tables",
    ] and first.brain == "openai"
    assert (
        server.requests[0]["response_format"]["type"] == "json_schema"
        and "stop" not in server.requests[0]
    )
    again = ask(
        question, parse_target(shop.dsn), brain=brain(server)
    )  # the same requests: the controller's cache
    assert again.answer == first.answer and len(server.requests) == 2 and again.llm.calls == 0


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
            "work_mem sets\u202e the maximum memory a query operation such as a sort uses before it writes\n\n"
            "temporary disk files [1].\u200b"
        )
    ]
    answer = ask("What does work_mem limit?", None, manual(tmp_path), brain=brain(server))
    assert answer.brain == "openai" and answer.answer.endswith("writes temporary disk files [1].")
    assert "\u202e" not in answer.answer and "\n" not in answer.answer  # shown as a reader sees it
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
