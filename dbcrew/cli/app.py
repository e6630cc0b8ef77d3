"""The `dbcrew` command line: the typer app and its commands' registration, each command group in its
module. Exit codes: 0 review completed, 3 review completed without its history (the store could not be
used), 2 unusable input, 1 internal error (docs/exit-codes.md, dbcrew/cli/exits.py)."""

from __future__ import annotations

import typer

from dbcrew.cli.ask import ask
from dbcrew.cli.diagnose import baseline, diagnose
from dbcrew.cli.exits import run_with_exit_codes
from dbcrew.cli.history import history
from dbcrew.cli.inventory import inventory_app
from dbcrew.cli.knowledge import extract_knowledge
from dbcrew.cli.mcp import mcp
from dbcrew.cli.review import demo, review
from dbcrew.cli.server import server
from dbcrew.cli.watch import incidents, watch

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="A crew of agents that reviews PostgreSQL databases.",
)

# In this order in `dbcrew --help` (the inventory group is listed after the commands).
app.command()(review)
app.command()(diagnose)
app.command()(baseline)
app.command("extract-knowledge")(extract_knowledge)
app.command()(demo)
app.command()(history)
app.command()(ask)
app.command()(watch)
app.command()(incidents)
app.add_typer(inventory_app, name="inventory")
app.command()(server)
app.command()(mcp)


def main() -> None:
    """The `dbcrew` command (dbcrew/cli/entry.py starts it)."""
    run_with_exit_codes(app)
