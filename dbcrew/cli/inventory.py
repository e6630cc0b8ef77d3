"""`dbcrew inventory check|publish`: the targets inventory (targets.yaml) checked, listed, its connections
tried, or published to the Prefect server."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from dbcrew.cli.console import line, show
from dbcrew.cli.reviewing import prefect_env
from dbcrew.errors import UsageError

if TYPE_CHECKING:  # the inventory module is loaded by the commands that read one
    from dbcrew.inventory import TargetEntry

inventory_app = typer.Typer(
    no_args_is_help=True, help="The targets inventory (targets.yaml): check it, publish it."
)


@inventory_app.command("check")
def inventory_check(
    path: Annotated[Path, typer.Argument(help="targets.yaml")] = Path("targets.yaml"),
    connect: Annotated[
        bool,
        typer.Option(
            "--connect",
            help="also connect to each target with its password (read-only, 5 s connect timeout):"
            " one line per target, exit 2 if any fails",
        ),
    ] = False,
) -> None:
    """Check an inventory and list its targets (no password is read without --connect)."""
    from dbcrew.inventory import load_inventory

    inventory = load_inventory(path)
    if connect:
        check_inventory_connections(inventory.targets)
        return
    for entry in inventory.targets:
        show(
            line(
                (entry.name, "bold"),
                f"  {entry.url}  password: {entry.password_label}  {entry.scenario}"
                f"  window {entry.window:g}s  schedule: {entry.schedule or '-'}  tags: {', '.join(entry.tags) or '-'}"
                + (f"  watch: every {entry.watch.every:g}s" if entry.watch else ""),
            )
        )


def check_inventory_connections(entries: list[TargetEntry]) -> None:
    """One line per target, reached or not and why; UsageError (exit 2) naming those that failed."""
    from dbcrew.cli.connection_check import check_connections

    prefect_env()  # a password in a Secret block is read from the running server
    outcomes = check_connections(entries)
    for entry, outcome in zip(entries, outcomes, strict=True):
        show(
            line(
                (entry.name, "bold"),
                f"  {entry.url}  ",
                ("ok", "green") if outcome.ok else ("failed", "bold red"),
                f"  {outcome.detail}",
            )
        )
    failed = [o.name for o in outcomes if not o.ok]
    if failed:
        raise UsageError(
            f"{len(failed)} of {len(outcomes)} targets failed the connection check: {', '.join(failed)}"
        )


@inventory_app.command("publish")
def inventory_publish(
    path: Annotated[Path, typer.Argument(help="targets.yaml")] = Path("targets.yaml"),
) -> None:
    """Publish an inventory to the Prefect server (PREFECT_API_URL, or a server at the default address)."""
    from dbcrew.inventory import load_inventory

    inventory = load_inventory(path)
    prefect_env()
    if "PREFECT_API_URL" not in os.environ:
        raise UsageError("no Prefect server: start one (`dbcrew server`) or set PREFECT_API_URL")
    from dbcrew.flows.targets import publish_inventory

    publish_inventory(inventory)
    show(line(f"published {len(inventory.targets)} targets to {os.environ['PREFECT_API_URL']}"))
