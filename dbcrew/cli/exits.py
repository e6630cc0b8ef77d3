"""How the `dbcrew` command ends: every error one line and its exit code (2 unusable input, 1 internal
error, 130 / 143 stopped by Ctrl-C / SIGTERM; docs/exit-codes.md), never a traceback unless
DBCREW_DEBUG asks for it."""

from __future__ import annotations

import signal
import sys
from typing import Protocol, runtime_checkable

import typer

from dbcrew.cli import interrupts
from dbcrew.cli.console import fail
from dbcrew.errors import UsageError
from dbcrew.secrets import hold_environment_secrets
from dbcrew.settings.environment import debugging
from dbcrew.store import StoreUnavailable
from dbcrew.targets.postgres import first_line


def _click_errors() -> tuple[type[Exception], ...]:
    """Click's exception base, as typer raises it: typer >= 0.25 bundles its own click (typer._click),
    whose exceptions are not the `click` package's; older typers raise click's own."""
    import click

    bundled = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
    return (bundled, click.ClickException)


CLICK_ERRORS = _click_errors()


@runtime_checkable
class _ClickError(Protocol):
    """What the handler uses of either of CLICK_ERRORS (mypy joins the two classes to Exception)."""

    def format_message(self) -> str: ...


def run_with_exit_codes(app: typer.Typer) -> None:
    """Run the command line `app` as the `dbcrew` command: its errors as lines and exit codes."""
    hold_environment_secrets()  # before any child process (the Prefect server) can inherit them
    interrupts.install()
    try:
        code = app(standalone_mode=False)  # typer turns KeyboardInterrupt into a returned 130
        if interrupts.received():
            interrupts.stop(interrupts.received()[0])
        if isinstance(code, int) and code:
            sys.exit(code)
    except (
        UsageError,
        StoreUnavailable,
    ) as exc:  # a store DBCREW_STORE_URL names that cannot be used
        fail(f"dbcrew: error: {exc}")
        sys.exit(2)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        interrupts.stop((interrupts.received() or [signal.SIGINT])[0])
    except (
        CLICK_ERRORS
    ) as exc:  # a usage error (bad option value, unknown option or command, missing argument)
        assert isinstance(exc, _ClickError)
        fail(f"dbcrew: error: {first_line(Exception(exc.format_message()))}")
        sys.exit(2)
    except Exception as exc:  # the CLI's last line of defence: one line, exit 1
        if debugging():
            raise
        fail(
            f"dbcrew: internal error: {type(exc).__name__}: {first_line(exc)} (set DBCREW_DEBUG=1 for the traceback)"
        )
        sys.exit(1)
    except (
        BaseException
    ) as exc:  # Prefect's TerminationSignal: its own SIGTERM handler, armed while a flow runs
        signum = getattr(exc, "signal", None)
        if not isinstance(signum, int):
            raise
