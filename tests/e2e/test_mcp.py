"""`dbcrew mcp` as an MCP client sees it: the SDK's own client starts the server over stdio (and
reaches it over streamable HTTP), lists the tools and calls them (ask, review, the operators) against the planted shop on the
session's embedded PostgreSQL. Reviews go through the session's Prefect test server."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from dbcrew.lab.embedded import EmbeddedPostgres, _free_port
from dbcrew.lab.shop import DemoShop

pytestmark = pytest.mark.prefect
SECRET = "hunter2-not-for-models"


def server_env(prefect_server: str) -> dict[str, str]:
    """The test's environment (its private store, the Prefect test server), for the server process."""
    return {**os.environ, "PREFECT_API_URL": prefect_server}


@pytest.fixture()
def stdio(prefect_server: str, tmp_path: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "dbcrew.cli", "mcp", "--max-window", "5"],
        env=server_env(prefect_server),
        cwd=str(tmp_path),
    )


def test_a_client_lists_the_tools_and_reviews_over_stdio(
    stdio: StdioServerParameters, shop: DemoShop, pg: EmbeddedPostgres, tmp_path: Path
) -> None:
    url = pg.dsn("shop")

    async def session() -> dict[str, Any]:
        async with Client(stdio) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            lookup = await client.call_tool(
                "collect_table_stats", {"target": url, "params": {"window_seconds": 0}}
            )
            sized = await client.call_tool(
                "table_size", {"target": url, "params": {"table": "orders"}}
            )
            size = await client.call_tool(
                "ask", {"question": "how big is the orders table", "target": url}
            )
            write = await client.call_tool(
                "ask", {"question": "delete the old rows of audit_log for me", "target": url}
            )
            review = await client.call_tool("review", {"target": url, "window": 1})
            latest = await client.call_tool("latest_review", {"target": url})
            secret = await client.call_tool(
                "collect_settings",
                {"target": pg.dsn("shop").replace("postgres@", f"postgres:{SECRET}@")},
            )
            too_long = await client.call_tool("review", {"target": url, "window": 3600})
            unknown = await client.call_tool(
                "collect_settings", {"target": "mysql://nobody@127.0.0.1/shop"}
            )
            return {
                "tools": tools,
                "lookup": lookup,
                "sized": sized,
                "size": size,
                "write": write,
                "review": review,
                "latest": latest,
                "secret": secret,
                "too_long": too_long,
                "unknown": unknown,
            }

    got = anyio.run(session)
    tools = got["tools"]
    assert {
        "ask",
        "review",
        "diagnose",
        "latest_review",
        "collect_settings",
        "collect_table_stats",
        "collect_activity",
    } <= set(tools)
    assert (
        tools["collect_activity"].input_schema["$defs"]["ActivityParams"]["properties"]["samples"][
            "anyOf"
        ][0]["maximum"]
        == 60
    )
    assert tools["collect_settings"].annotations.read_only_hint is True

    lookup = got["lookup"]
    assert not lookup.is_error, lookup.content
    tables = {t["name"]: t for t in lookup.structured_content["tables"]}
    assert {r["relname"] for r in tables["table_stats"]["rows"]} >= {
        "orders",
        "cart_items",
        "audit_log",
    }

    sized = got[
        "sized"
    ].structured_content  # one of ask's look-ups, a registered operator of the MCP surface
    assert (
        sized["summary"].startswith("Table public.orders takes")
        and sized["tables"][0]["name"] == "table_size"
    ), sized
    assert tools["table_size"].input_schema["required"] == ["target", "params"]

    size = got["size"].structured_content
    assert size["route"] == "instance" and "orders" in size["answer"] and size["tools"], size
    write = got["write"].structured_content
    assert write["refused"] and write["route"] == "unsafe", write

    review = got["review"]
    assert not review.is_error, review.content
    report = review.structured_content
    found = {(f["code"], f["object"]) for f in report["findings"]}
    assert ("table_without_primary_key", "public.audit_log") in found
    assert (tmp_path / "reports").is_dir()  # the report went where the server runs, as with the CLI
    assert got["latest"].structured_content["run_id"] == report["run_id"]

    for refused in ("secret", "too_long", "unknown"):
        result = got[refused]
        assert result.is_error and "Traceback" not in result.content[0].text, result.content
    assert (
        "carries a password" in got["secret"].content[0].text
        and SECRET not in got["secret"].content[0].text
    )
    assert "--max-window" in got["too_long"].content[0].text
    assert "unsupported target" in got["unknown"].content[0].text


def test_concurrent_reviews_on_a_cold_server_share_one_prefect_and_beyond_the_bound_are_told_busy(
    shop: DemoShop, pg: EmbeddedPostgres, tmp_path: Path
) -> None:
    """20 review calls at once on a server that has started no Prefect yet (no PREFECT_API_URL): each used to
    race to start Prefect's temporary server and 17 failed. Now two (--max-reviews) run on one server started
    once, each into its own report folder, and the other 18 are told at once, in one line, that it is busy."""
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["PREFECT_HOME"] = str(tmp_path / "prefect-home")  # cold: nothing of the session's Prefect
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "dbcrew.cli", "mcp", "--max-window", "5", "--max-reviews", "2"],
        env=env,
        cwd=str(tmp_path),
    )

    async def session() -> list[Any]:
        results: list[Any] = [None] * 20
        async with Client(params) as client:

            async def review(i: int) -> None:
                results[i] = await client.call_tool(
                    "review", {"target": pg.dsn("shop"), "window": 0}
                )

            async with anyio.create_task_group() as calls:
                for i in range(len(results)):
                    calls.start_soon(review, i)
        return results

    results = anyio.run(session)
    done = [r.structured_content for r in results if not r.is_error]
    refused = [r.content[0].text for r in results if r.is_error]
    assert 1 <= len(done) <= 2, refused
    assert all("busy: 2 reviews are running" in text for text in refused), refused
    assert all("\n" not in text for text in refused)
    assert len({report["run_id"] for report in done}) == len(done)
    written = sorted((tmp_path / "reports").glob("shop-*/report.json"))
    assert len(written) == len(done), (
        written
    )  # one folder each, even when started in the same second


@dataclass(frozen=True)
class HttpServer:
    url: str
    token: str  # the one `dbcrew mcp` made at start and printed


@pytest.fixture()
def http_server(prefect_server: str, tmp_path: Path, pg: EmbeddedPostgres) -> Iterator[HttpServer]:
    """`dbcrew mcp` over HTTP serving only the inventory's one target (the session's shop)."""
    port = _free_port()
    inventory = tmp_path / "targets.yaml"
    inventory.write_text(f"targets:\n  - name: shop\n    url: {pg.dsn('shop')}\n")
    env = {k: v for k, v in server_env(prefect_server).items() if k != "DBCREW_MCP_TOKEN"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dbcrew.cli",
            "mcp",
            "--transport",
            "http",
            "--port",
            str(port),
            "--row-limit",
            "1000",
            "--inventory",
            str(inventory),
        ],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        assert proc.stdout is not None
        printed = [proc.stdout.readline() for _ in range(3)]  # endpoint, token, targets
        token = next(p for p in printed if p.startswith("bearer token: ")).split()[-1]
        for _ in range(600):  # a readiness wait (up to 60 s on a busy machine), not a measurement
            if proc.poll() is not None:
                raise AssertionError(
                    f"dbcrew mcp exited: {proc.stderr.read()[-2000:] if proc.stderr else ''}"
                )
            try:
                httpx.get(url, timeout=0.5)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        yield HttpServer(url, token)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        assert token not in (proc.stderr.read() if proc.stderr else ""), "the token was logged"


def test_a_client_reads_settings_over_streamable_http_with_the_token_only(
    http_server: HttpServer, shop: DemoShop, pg: EmbeddedPostgres
) -> None:
    def client(token: str) -> Client:
        headers = {"Authorization": f"Bearer {token}"}
        return Client(
            streamable_http_client(
                http_server.url, http_client=create_mcp_http_client(headers=headers)
            )
        )

    async def session() -> tuple[Any, Any]:
        async with client(http_server.token) as c:
            settings = await c.call_tool("collect_settings", {"target": pg.dsn("shop")})
            elsewhere = await c.call_tool(
                "collect_settings", {"target": "postgresql://postgres@127.0.0.1:1/shop"}
            )
            return settings, elsewhere

    result, elsewhere = anyio.run(session)
    assert not result.is_error, result.content
    settings = {r["name"]: r for r in result.structured_content["tables"][0]["rows"]}
    assert (
        settings["default_transaction_read_only"]["setting"] == "on"
    )  # the tool's own session was read-only
    # Another target than the inventory's is refused in one line, before any connection.
    refusal = elsewhere.content[0].text
    assert elsewhere.is_error and "not in this server's inventory" in refusal
    assert "\n" not in refusal and "connect" not in refusal  # port 1 was never tried
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": http_server.token}):
        denied = httpx.post(http_server.url, json=initialize, headers=headers, timeout=10)
        assert denied.status_code == 401 and denied.headers["www-authenticate"].startswith("Bearer")
