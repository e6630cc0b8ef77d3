"""Which structured output an endpoint really honours: probed once per endpoint and model.

Servers accept more than they honour. llama.cpp's server takes `tools` for any model, but a model
whose chat template has no tool syntax (SmolLM2) answers in prose and no tool call ever comes back;
it does honour a JSON schema as response_format (a grammar the model cannot leave). So the
capability is not read from the server's name or its API but tried, with two tiny requests:
1. a tool the model is asked to call: a tool call back means `tools`;
2. a JSON schema whose only valid answer holds a token no model writes unasked: that answer back
   means `json_schema` (the endpoint constrained the output);
3. otherwise `prompted`: the format is asked for in the prompt and repaired.
A 400 (the server refuses tools or response_format) counts as "not honoured". DBCREW_LLM_CAPABILITY,
when set, is used as it is and nothing is probed. The answer is kept for the process, per base URL and
model: the plan, the critique, the re-plan, `ask` and the diagnosis all use the one probed value.
"""

from __future__ import annotations

import json
from typing import Any

import openai

from dbcrew.settings.llm import Capability

PROBE = "dbcrew_probe"
PROBE_TOKEN = "dbcrew-probe-7f3a"  # the json_schema probe's only valid value: never written unasked
PROBE_TOKENS = 48  # a tool call or a one-field object
TOOL_PROBE: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": PROBE,
            "description": "Report a number.",
            "parameters": {
                "type": "object",
                "properties": {"value": {"type": "integer"}},
                "required": ["value"],
            },
        },
    }
]
SCHEMA_PROBE: Any = {
    "type": "json_schema",
    "json_schema": {
        "name": PROBE,
        "schema": {
            "type": "object",
            "properties": {"probe": {"type": "string", "enum": [PROBE_TOKEN]}},
            "required": ["probe"],
            "additionalProperties": False,
        },
    },
}

_PROBED: dict[tuple[str, str], Capability] = {}


def known(base_url: str, model: str) -> Capability | None:
    """The capability probed for this endpoint and model in this process, if any."""
    return _PROBED.get((base_url, model))


def probe(client: openai.OpenAI, base_url: str, model: str, timeout: float) -> Capability:
    """The endpoint's capability, probed (two requests at most) and kept for the process.
    openai.APIError other than a refusal (400) propagates: an endpoint that does not answer decides
    nothing, and is probed again by the next caller."""
    key = (base_url, model)
    if key not in _PROBED:
        _PROBED[key] = _tried(client, model, timeout)
    return _PROBED[key]


def _tried(client: openai.OpenAI, model: str, timeout: float) -> Capability:
    ask: dict[str, Any] = {
        "model": model,
        "max_tokens": PROBE_TOKENS,
        "temperature": 0.0,
        "timeout": timeout,
    }
    try:
        answer = client.chat.completions.create(
            messages=[{"role": "user", "content": f"Call the function {PROBE} with value 7."}],
            tools=TOOL_PROBE,  # type: ignore[arg-type]
            **ask,
        )
    except openai.BadRequestError:
        pass  # tools refused: try the schema
    else:
        message = answer.choices[0].message if answer.choices else None
        if message and any(
            c.type == "function" and c.function.name == PROBE for c in message.tool_calls or []
        ):
            return Capability.TOOLS
    try:
        answer = client.chat.completions.create(
            messages=[{"role": "user", "content": "Answer with a JSON object."}],
            response_format=SCHEMA_PROBE,
            **ask,
        )
    except openai.BadRequestError:
        return Capability.PROMPTED
    text = (answer.choices[0].message.content or "") if answer.choices else ""
    try:
        value = json.loads(text)
    except ValueError:
        return Capability.PROMPTED
    return Capability.JSON_SCHEMA if value == {"probe": PROBE_TOKEN} else Capability.PROMPTED
