"""The CLI review's temporary Prefect server, owned by the CLI so that it dies with it, even by kill -9.

With no server to use (prefect_env), Prefect starts a temporary one as a child process on its first
API call and stops it at exit (atexit). A CLI killed by SIGKILL runs no exit code: the server lived
on under PID 1, holding its port and database. Here the CLI starts that server itself, from its
main thread, as Prefect 3.8.8 would, plus the kernel's parent-death signal (PR_SET_PDEATHSIG, set
in the child between fork and exec): when the CLI ends, however it ends, the kernel kills the
server. It is the instance Prefect's `SubprocessASGIServer()` then hands out (as with
prefect.testing's harness), so every Prefect client of the process uses it.

The signal is sent when the thread that started the child ends, hence the main thread. Only on
Linux (prctl); elsewhere Prefect starts and stops its server as before.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from typing import Any

import prefect
from prefect.server.api.server import SubprocessASGIServer
from prefect.settings import PREFECT_API_URL, get_current_settings

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _die_with(parent: int) -> None:
    """In the child, before exec: SIGKILL when the parent ends; if it already has, end now."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:  # the parent ended between fork and prctl: no signal will come
        os._exit(1)


class ServerDyingWithCli(SubprocessASGIServer):
    """Prefect's temporary server, started with the parent-death signal set."""

    def _run_uvicorn_command(self) -> subprocess.Popen[Any]:
        # Prefect 3.8.8's SubprocessASGIServer._run_uvicorn_command, with preexec_fn added.
        parent = os.getpid()
        return subprocess.Popen(
            args=[
                sys.executable,
                "-m",
                "uvicorn",
                "--app-dir",
                str(prefect.__module_path__.parent),
                "--factory",
                "prefect.server.api.server:create_app",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--log-level",
                "error",
                "--lifespan",
                "on",
            ],
            env={
                **os.environ,
                "PREFECT_UI_ENABLED": "0",
                "PREFECT__SERVER_EPHEMERAL": "1",
                "PREFECT__SERVER_FINAL": "1",
                **get_current_settings().to_environment_variables(exclude_unset=True),
            },
            # Run in the child between fork and exec; the server starts before the run's threads do.
            preexec_fn=lambda: _die_with(parent),
        )


def start_temporary_server() -> None:
    """Start the temporary server this CLI run will use, from the main thread, unless a server is named
    (PREFECT_API_URL, from the environment or a Prefect profile) or the platform has no parent-death signal."""
    if PREFECT_API_URL.value() or not sys.platform.startswith("linux"):
        return
    # SubprocessASGIServer.__new__ files the instance under its port (None: "the temporary server"), in the
    # registry the subclass shares: Prefect's own `SubprocessASGIServer()` calls get this one from now on.
    ServerDyingWithCli().start()
