"""The `dbcrew` command's first lines: a password on its command line hidden before anything loads.

A target URL's password is visible to every user in `ps` for as long as the process title shows
it. The command's own modules take about a CPU-second to import, which a host kept busy by its
database (load 10 on 2 cores) stretches past 5 s; so the title is overwritten here, with nothing
but the redaction loaded, and the command is imported after. The run warns once its input is
accepted (dbcrew/cli/running.py run_cli_review).
"""

from __future__ import annotations

import sys

import setproctitle

from dbcrew.redact import redact


def hide_command_line_secrets() -> None:
    """Overwrite the process title with the redacted command line, when redacting changes it."""
    shown = [redact(arg) for arg in sys.argv]
    if shown != sys.argv:
        setproctitle.setproctitle(" ".join(shown))


def main() -> None:
    hide_command_line_secrets()
    from dbcrew.cli.app import main as run

    run()
