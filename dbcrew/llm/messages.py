"""Chat messages as strict chat templates accept them, whatever the caller built.

Real models' templates are stricter than OpenAI's API: Gemma's rejects two user messages in a row
(the controller sends one after a backtrack: the lesson follows the task) and a `tool` message when
the request carries no tools (HTTP 400 "Conversation roles must alternate"). The client shapes
every request here, so no caller has to know which template sits behind the endpoint: messages of
the same role in a row become one (their texts joined by a blank line), and outside tools mode a
tool's result becomes the user's message that reports it.
"""

from __future__ import annotations

from typing import Any

MERGED = ("user", "system")  # roles whose consecutive messages one message can carry


def template_safe(messages: list[dict[str, Any]], tools_mode: bool) -> list[dict[str, Any]]:
    """`messages` with no two user (or system) messages in a row, and, outside tools mode, no tool
    message (nor an assistant's tool calls, which would have no answer)."""
    shaped: list[dict[str, Any]] = []
    for message in messages:
        message = dict(message)
        if not tools_mode and message.get("role") == "tool":
            message = {"role": "user", "content": f"Observation: {message.get('content') or ''}"}
        if not tools_mode and message.get("role") == "assistant" and "tool_calls" in message:
            message = {"role": "assistant", "content": message.get("content") or ""}
        previous = shaped[-1] if shaped else None
        if previous is not None and previous["role"] == message["role"] in MERGED:
            previous["content"] = (
                f"{previous.get('content') or ''}\n\n{message.get('content') or ''}"
            )
            continue
        shaped.append(message)
    return shaped
