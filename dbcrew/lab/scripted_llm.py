"""A scripted OpenAI-compatible server on 127.0.0.1: the real `openai` client talks to it.

Each POST to /v1/chat/completions takes the next scripted reply: a content string (wrapped in a
chat completion), native tool calls, an HTTP status with an error body, or a delay longer than the
client's timeout. Usage is 100 prompt and 20 completion tokens a call, or, with `measure_usage`,
the request's and the reply's size in tokens (about four characters each: the messages, and the tool
specs and response format an endpoint bills with them), so a bench can see what a prompt costs.
With `respond`, a function of the request chooses each reply instead (a scripted model that reads
what it was shown, e.g. to cite values a tool observed).

It is as strict as the real servers the brain meets: a request without `max_tokens` is refused
(HTTP 400: llama.cpp and Ollama would let a model talk until the time-out), a reply longer than
`max_tokens` (at four characters a token) is cut there with finish_reason "length", and so are
messages a strict chat template rejects (Gemma's): two user messages in a row, or a `tool` message
in a request without tools. The capability probe's two requests (dbcrew/llm/capability.py) are
answered as an endpoint of `capability` would (native tool calls by default), kept in `probes`, never
in `requests`, and take no scripted reply. Once the script is spent, every request gets `otherwise`: HTTP 500 unless told otherwise, e.g.
garbage, for an endpoint that answers garbage through a whole review.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from dbcrew.llm.capability import PROBE, PROBE_TOKEN
from dbcrew.settings.llm import Capability


@dataclass
class Reply:
    content: str = ""
    status: int = 200
    delay: float = 0.0
    tool_calls: list[tuple[str, dict[str, Any]]] = field(
        default_factory=list
    )  # (function name, arguments)


def template_error(body: dict[str, Any]) -> str:
    """Why a strict server refuses the request ('' when it does not)."""
    if not isinstance(body.get("max_tokens"), int):
        return "max_tokens is required: an unbounded answer runs until the time-out"
    roles = [m.get("role") for m in body.get("messages", [])]
    if any(a == b == "user" for a, b in itertools.pairwise(roles)):
        return "Conversation roles must alternate user/assistant/user/assistant/..."
    if "tool" in roles and not body.get("tools"):
        return "a tool message without tools: this template has no tool role"
    return ""


def approx_tokens(text: str) -> int:
    """Tokens as OpenAI's tokenizers average on English and JSON: about four characters each."""
    return max(1, (len(text) + 3) // 4)


def probe_reply(body: dict[str, Any], capability: Capability) -> Reply | None:
    """The answer to a capability probe as an endpoint of `capability` gives it; None for any other request."""
    tools = [t.get("function", {}).get("name") for t in body.get("tools") or []]
    schema = (body.get("response_format") or {}).get("json_schema", {}).get("name")
    if PROBE in tools:
        return (
            Reply(tool_calls=[(PROBE, {"value": 7})])
            if capability is Capability.TOOLS
            else Reply("The value is 7.")
        )
    if schema == PROBE:
        return (
            Reply(json.dumps({"probe": PROBE_TOKEN}))
            if capability is not Capability.PROMPTED
            else Reply('Here you are: {"answer": 7}')
        )
    return None


@dataclass
class ScriptedServer:
    replies: list[Reply] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    otherwise: Reply = field(default_factory=lambda: Reply(status=500, content="script exhausted"))
    measure_usage: bool = False
    respond: Callable[[dict[str, Any]], Reply] | None = None
    capability: Capability = Capability.TOOLS
    probes: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        script = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:  # http.server's naming
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                probed = probe_reply(body, script.capability)
                (script.probes if probed else script.requests).append(body)
                refused = template_error(body)
                reply = (
                    Reply(status=400, content=refused)
                    if refused
                    else probed
                    if probed
                    else script.respond(body)
                    if script.respond
                    else script.replies.pop(0)
                    if script.replies
                    else script.otherwise
                )
                cut = reply.status == 200 and len(reply.content) > 4 * body["max_tokens"]
                if cut:
                    reply = Reply(
                        reply.content[: 4 * body["max_tokens"]], tool_calls=reply.tool_calls
                    )
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.status != 200:
                    payload: dict[str, Any] = {
                        "error": {"message": reply.content or "scripted error", "type": "scripted"}
                    }
                else:
                    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
                    if reply.tool_calls:
                        message["tool_calls"] = [
                            {
                                "id": f"call_{len(script.requests)}_{i}",
                                "type": "function",
                                "function": {"name": name, "arguments": json.dumps(args)},
                            }
                            for i, (name, args) in enumerate(reply.tool_calls)
                        ]
                    billed = {
                        k: body[k] for k in ("messages", "tools", "response_format") if k in body
                    }
                    prompt, completion = (
                        (approx_tokens(json.dumps(billed)), approx_tokens(json.dumps(message)))
                        if script.measure_usage
                        else (100, 20)
                    )
                    payload = {
                        "id": "chatcmpl-scripted",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body["model"],
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": "length"
                                if cut
                                else "tool_calls"
                                if reply.tool_calls
                                else "stop",
                                "message": message,
                            }
                        ],
                        "usage": {
                            "prompt_tokens": prompt,
                            "completion_tokens": completion,
                            "total_tokens": prompt + completion,
                        },
                    }
                data = json.dumps(payload).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    if reply.status == 429:
                        self.send_header("Retry-After", "0")
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
