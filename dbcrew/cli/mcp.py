"""`dbcrew mcp`: the crew served over MCP (the server itself, dbcrew/cli/mcp_server.py, loads on start)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer


class McpTransport(StrEnum):
    STDIO = "stdio"
    HTTP = "http"


def mcp(
    transport: Annotated[
        McpTransport, typer.Option(help="stdio (the client starts the server) or streamable HTTP")
    ] = McpTransport.STDIO,
    host: Annotated[str, typer.Option(help="HTTP: the address to listen on")] = "127.0.0.1",
    port: Annotated[
        int,
        typer.Option(min=1, max=65535, help="HTTP: the port to listen on (the endpoint is /mcp)"),
    ] = 8765,
    max_window: Annotated[
        float, typer.Option(min=0, help="the longest window a tool call may ask for, in seconds")
    ] = 60.0,
    row_limit: Annotated[
        int, typer.Option(min=1, max=10_000, help="rows per table an operator tool returns")
    ] = 100,
    max_reviews: Annotated[
        int,
        typer.Option(
            min=1,
            help="calls that may run a review at once (review, diagnose, ask with a target);"
            " a call beyond them is answered that the server is busy",
        ),
    ] = 2,
    brain: Annotated[
        str | None, typer.Option(help="the brain of reviews and answers: rules (offline) or openai")
    ] = None,
    docs: Annotated[
        Path | None,
        typer.Option(
            help="ask: folder of the PostgreSQL manual's HTML (default: Debian's postgresql-doc-15)"
        ),
    ] = None,
    inventory: Annotated[
        Path | None,
        typer.Option(
            help="targets.yaml: a tool call may name only its targets (any other URL is refused)"
        ),
    ] = None,
) -> None:
    """Serve the crew over MCP: ask, review, diagnose, latest_review and the read-only operators as tools.
    Over HTTP every request needs the bearer token printed at start (or DBCREW_MCP_TOKEN)."""
    from dbcrew.cli.mcp_server import Limits, inventory_targets, serve

    serve(
        transport.value,
        host,
        port,
        Limits(
            max_window=max_window,
            row_limit=row_limit,
            max_reviews=max_reviews,
            brain=brain,
            docs=docs,
            targets=inventory_targets(inventory) if inventory is not None else None,
            inventory=inventory,
        ),
    )
