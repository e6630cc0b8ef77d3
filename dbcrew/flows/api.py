"""The Prefect API a process's flow runs talk to, started once however many threads start runs at the same moment.

Without PREFECT_API_URL, Prefect starts its temporary server on the first client it makes
(SubprocessASGIServer, one per process). That start is not safe across threads: the first caller
marks the server running before it answers, so concurrent callers go on at once and fail ("Server
process did not start", "Failed to reach API"); two may each start a server. Measured: 20
concurrent MCP reviews on a cold `dbcrew mcp` failed 17 times, and two servers were left behind.
Starting it here under one lock, before the first run, makes every later client find it up.
"""

from __future__ import annotations

import threading

from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_EPHEMERAL_ENABLED

_STARTING = threading.Lock()


def shared_api() -> None:
    """Make sure the API every flow run of this process uses is up: PREFECT_API_URL's is left to its
    owner; otherwise Prefect's temporary server is started by the first caller while the others wait
    (it stops when the process exits). With ephemeral mode off and no URL, Prefect's own client says so."""
    with _STARTING:
        if PREFECT_API_URL.value() or not PREFECT_SERVER_EPHEMERAL_ENABLED.value():
            return
        from prefect.server.api.server import SubprocessASGIServer

        SubprocessASGIServer().start()  # the singleton Prefect's clients use; a no-op once running
