"""Who may call `dbcrew mcp` over HTTP, and which targets a call may name.

The gate runs in front of a real ASGI app through httpx's ASGI transport (no port, no MCP session):
what it lets through reaches the app, what it does not is a 401 the app never sees."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from dbcrew.cli.mcp_server import BearerGate, Limits, http_token, inventory_targets, tool_target
from dbcrew.errors import UsageError

TOKEN = "s3cret-token"


class Recorder:
    """An ASGI app that answers 200 and counts the requests that reached it."""

    def __init__(self) -> None:
        self.reached = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.reached += 1
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


async def statuses(app: Recorder, headers: list[dict[str, str]]) -> list[int]:
    transport = httpx.ASGITransport(app=BearerGate(app, TOKEN))
    async with httpx.AsyncClient(transport=transport, base_url="http://mcp") as client:
        return [(await client.post("/mcp", headers=h)).status_code for h in headers]


@pytest.mark.anyio
async def test_only_a_request_with_the_bearer_token_reaches_the_server() -> None:
    app = Recorder()
    got = await statuses(
        app,
        [
            {},
            {"Authorization": "Bearer wrong"},
            {"Authorization": TOKEN},
            {"Authorization": f"Bearer {TOKEN}x"},
            {"Authorization": f"Bearer {TOKEN}"},
        ],
    )
    assert got == [401, 401, 401, 401, 200] and app.reached == 1


def test_the_token_is_the_environments_or_a_fresh_random_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DBCREW_MCP_TOKEN", TOKEN)
    assert http_token() == (TOKEN, False)  # given: not printed
    monkeypatch.delenv("DBCREW_MCP_TOKEN")
    first, made = http_token()
    assert made and len(first) >= 40 and http_token()[0] != first


def test_with_an_inventory_only_its_targets_may_be_named(tmp_path: Path) -> None:
    inventory = tmp_path / "targets.yaml"
    inventory.write_text("targets:\n  - name: shop\n    url: postgresql://monitor@db:5432/shop\n")
    limits = Limits(targets=inventory_targets(inventory), inventory=inventory)
    assert tool_target("postgresql://monitor@db:5432/shop", limits).dbname == "shop"
    for other in ("postgresql://monitor@db:5433/shop", "postgresql://postgres@db:5432/shop"):
        with pytest.raises(UsageError) as refused:
            tool_target(other, limits)
        assert "not in this server's inventory" in str(refused.value)
        assert "\n" not in str(refused.value)
    assert tool_target("postgresql://anyone@elsewhere/x", Limits()).dbname == "x"  # no inventory
