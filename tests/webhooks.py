"""A webhook receiver on 127.0.0.1 for the alert tests: Apprise's json:// posts land in a list."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import ClassVar


class Receiver(BaseHTTPRequestHandler):
    """Keeps what is posted to it (with the path it was posted to)."""

    received: ClassVar[list[dict[str, object]]] = []

    def do_POST(self) -> None:  # http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append({"path": self.path, **json.loads(body)})
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        """Quiet: the test reads what was received, not the access log."""


@contextmanager
def receiving_webhooks() -> Iterator[tuple[str, list[dict[str, object]]]]:
    """(json://127.0.0.1:<port>, the posts received so far); append a path to tell senders apart."""
    received: list[dict[str, object]] = []
    server = HTTPServer(("127.0.0.1", 0), type("Hook", (Receiver,), {"received": received}))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"json://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        thread.join()
        server.server_close()
