"""Secrets from the environment, held by this process only.

A child process inherits the environment: the Prefect server the CLI starts would carry the LLM
API key and PGPASSWORD for its whole life (readable in /proc/<pid>/environ by the same user, and
passed on to whatever it starts). `hold_environment_secrets` moves them into this process's
memory before any child starts; `secret` reads them back, `held_secrets` hands them to a child
that runs reviews (or from the environment when they were
never moved, as in a flow run a deployment starts).
"""

from __future__ import annotations

import os
import threading

HELD_VARIABLES = ("OPENAI_API_KEY", "PGPASSWORD")
_HELD: dict[str, str] = {}
_LOCK = threading.Lock()


def hold_environment_secrets() -> None:
    """Move the secret variables out of os.environ (and so out of every child's environment)."""
    with _LOCK:
        for name in HELD_VARIABLES:
            value = os.environ.pop(name, None)
            if value:
                _HELD[name] = value


def held_secrets() -> dict[str, str]:
    """The variables moved out of the environment, for the one child that needs them: a worker
    running reviews (its flow runs reach the target and the model), never a server."""
    with _LOCK:
        return dict(_HELD)


def secret(name: str) -> str | None:
    with _LOCK:
        return _HELD.get(name) or os.environ.get(name) or None
