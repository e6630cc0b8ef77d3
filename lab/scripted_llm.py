"""A scripted OpenAI-compatible server on 127.0.0.1: the real `openai` client talks to it.

Each POST to /v1/chat/completions takes the next scripted reply: a content string (wrapped in a
chat completion), an HTTP status with an error body, or a delay longer than the client's timeout.
Once the script is spent, every request gets `otherwise`: HTTP 500 unless told otherwise, e.g.
garbage, for an endpoint that answers garbage through a whole review.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    content: str = ""
    status: int = 200
    delay: float = 0.0


@dataclass
class ScriptedServer:
    replies: list[Reply] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    otherwise: Reply = field(default_factory=lambda: Reply(status=500, content="script exhausted"))

    def __post_init__(self) -> None:
        script = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                script.requests.append(body)
                reply = script.replies.pop(0) if script.replies else script.otherwise
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.status != 200:
                    payload = {"error": {"message": reply.content or "scripted error", "type": "scripted"}}
                else:
                    payload = {
                        "id": "chatcmpl-scripted", "object": "chat.completion", "created": int(time.time()), "model": body["model"],
                        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": reply.content}}],
                        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
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
