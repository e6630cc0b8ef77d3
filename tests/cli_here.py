"""`dbcrew ARGS` through the CLI's entry point in the test's own process, for tests about what a command
prints and the code it exits with, not about its process.

A fresh `python -m dbcrew.cli` costs 1-3 s of imports on 2 cores (an `ask` also the manual's and the router's
libraries); this runs `dbcrew.cli.app.main` as `python -m dbcrew.cli` does, reads the exit code from its SystemExit and
captures stdout and stderr apart. What only a process shows (its exit status, every line its start
writes to stderr, signals, its children) stays with the tests that start one: each file that checks
bad input this way keeps one case in a process of its own.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path


def dbcrew_here(
    *args: str, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`dbcrew ARGS` in this process with `env` added to the environment and `cwd` as the working
    directory: its exit code, stdout and stderr, as subprocess.run would give them. What `main` changes
    for its process is put back after: the environment (the command's own, and the Prefect settings a
    run sets), the secrets it moves out of it (dbcrew.secrets), the working directory, argv, the SIGINT
    and SIGTERM handlers it installs."""
    from dbcrew import secrets
    from dbcrew.cli.app import main

    environment, directory, command_line = dict(os.environ), Path.cwd(), sys.argv
    held = secrets.held_secrets()
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    stdout, stderr = io.StringIO(), io.StringIO()
    os.environ.update(env or {})
    if cwd is not None:
        os.chdir(cwd)
    sys.argv = ["dbcrew", *args]
    try:
        with redirect_stdout(stdout), redirect_stderr(stderr):
            try:
                main()
                code = 0
            except SystemExit as ended:
                code = ended.code if isinstance(ended.code, int) else int(ended.code is not None)
    finally:
        sys.argv = command_line
        os.chdir(directory)
        os.environ.clear()
        os.environ.update(environment)
        secrets._HELD.clear()
        secrets._HELD.update(held)
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    return subprocess.CompletedProcess(
        ["dbcrew", *args], code, stdout.getvalue(), stderr.getvalue()
    )
