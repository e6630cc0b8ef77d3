"""The Alertmanager webhook receiver of `dbcrew server`: POST /alertmanager starts a diagnosis per alert.

It listens on 127.0.0.1 only (like the Prefect server it sits beside); a receiver reachable from
elsewhere is the operator's choice of a proxy, and then DBCREW_RECEIVER_TOKEN makes it require
`Authorization: Bearer <token>` (Alertmanager's `http_config.authorization`). A payload that is not
Alertmanager's is answered 400 with one line; each alert's outcome (the run started, or why none)
is answered as JSON and printed by the server.
"""

from __future__ import annotations

import hmac
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
from pydantic import ValidationError

from dbcrew.inventory import Inventory, validation_line

PATH = "/alertmanager"
MAX_BODY = 1 << 20  # Alertmanager batches alerts, but a megabyte is far beyond any real group


@contextmanager
def receiving_alerts(
    port: int, inventory: Inventory, token: str, said: Callable[[str], None]
) -> Iterator[int]:
    """The receiver on 127.0.0.1:port (0: any free port), serving until the block ends; yields its port."""
    from dbcrew.flows.alertmanager import Received, start_diagnoses
    from dbcrew.models.alertmanager import AlertmanagerPayload

    class AlertHandler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # http.server's name
            if self.path.rstrip("/") != PATH:
                return self._answer(404, f"POST alerts to {PATH}\n")
            if token and not hmac.compare_digest(
                self.headers.get("Authorization", ""), f"Bearer {token}"
            ):
                return self._answer(401, "a bearer token is required (DBCREW_RECEIVER_TOKEN)\n")
            length = int(self.headers.get("Content-Length") or 0)
            if not 0 < length <= MAX_BODY:
                return self._answer(400, f"a JSON body of at most {MAX_BODY} bytes is required\n")
            try:
                payload = AlertmanagerPayload.model_validate_json(self.rfile.read(length))
            except ValidationError as exc:
                return self._answer(400, f"not an Alertmanager payload: {validation_line(exc)}\n")
            try:
                received: Received = start_diagnoses(payload, inventory)
            except httpx.HTTPError as exc:
                said(f"alert not taken: the Prefect server did not answer: {exc}")
                return self._answer(503, "the Prefect server did not answer: retry\n")
            for run in received.started:
                said(f"alert: diagnosis of {run.target} started ({run.run}, from {run.source})")
            for skip in received.skipped:
                said(f"alert skipped: {skip.alert}: {skip.reason}")
            self._answer(202, received.model_dump_json(), "application/json")

        def _answer(self, code: int, body: str, kind: str = "text/plain") -> None:
            data = body.encode()
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            """Quiet: each alert's outcome is said in one line instead of an access log."""

    server = ThreadingHTTPServer(("127.0.0.1", port), AlertHandler)
    thread = threading.Thread(target=server.serve_forever, name="dbcrew-receiver", daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        thread.join()
        server.server_close()
