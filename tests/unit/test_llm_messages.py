"""What every LLM request carries: messages strict chat templates accept, and strict answer schemas."""

from __future__ import annotations

import pydantic
import pytest

from dbcrew.llm.messages import template_safe
from dbcrew.roles.agent.controller import _step_format
from dbcrew.roles.brains.openai import Problems


def test_consecutive_user_messages_become_one_and_roles_alternate():
    shaped = template_safe(
        [
            {"role": "system", "content": "rules"},
            {"role": "user", "content": "the task"},
            {"role": "user", "content": "the lesson of a backtrack"},
        ],
        tools_mode=False,
    )
    assert [m["role"] for m in shaped] == ["system", "user"]
    assert shaped[1]["content"] == "the task\n\nthe lesson of a backtrack"


def test_outside_tools_mode_a_tool_result_is_the_users_observation():
    shaped = template_safe(
        [
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1"}]},
            {"role": "tool", "tool_call_id": "c1", "content": "3 sessions"},
            {"role": "user", "content": "go on"},
        ],
        tools_mode=False,
    )
    assert [m["role"] for m in shaped] == ["user", "assistant", "user"]
    assert (
        "tool_calls" not in shaped[1] and shaped[2]["content"] == "Observation: 3 sessions\n\ngo on"
    )


def test_in_tools_mode_tool_messages_stay_as_the_api_wants_them():
    messages = [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}]},
        {"role": "tool", "tool_call_id": "c1", "content": "3 sessions"},
    ]
    assert template_safe(messages, tools_mode=True) == messages


@pytest.mark.parametrize(
    "echo",
    ["{}", '{"properties": {"problems": {"type": "array"}}}', '{"problem": []}'],
)
def test_a_critique_without_its_list_is_no_critique(echo: str):
    """An empty object or a cut-off echo of the schema must not read as "no problems"."""
    with pytest.raises(pydantic.ValidationError):
        Problems.model_validate_json(echo)


def test_a_constrained_turn_may_only_name_a_tool():
    schema = _step_format(["observe", "expand", "propose_causes"])["json_schema"]["schema"]
    assert schema["properties"]["action"]["enum"] == ["observe", "expand", "propose_causes"]
    assert set(schema["required"]) == {"thought", "action", "args"}
    assert schema["additionalProperties"] is False
