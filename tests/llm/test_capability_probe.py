"""The endpoint's capability is probed once per endpoint and model, unless DBCREW_LLM_CAPABILITY
says it: a server that accepts tools but never calls one is not a tools endpoint."""

from __future__ import annotations

import pytest

from dbcrew.lab.scripted_llm import ScriptedServer
from dbcrew.llm.capability import known
from dbcrew.llm.client import LlmClient
from dbcrew.prompts import render
from dbcrew.settings.llm import Capability


def client(server: ScriptedServer, model: str) -> LlmClient:
    return LlmClient(render, base_url=server.url, model=model, timeout=5.0, max_retries=0)


@pytest.mark.parametrize("capability", list(Capability), ids=str)
def test_the_probe_finds_what_the_endpoint_honours_once_per_endpoint_and_model(
    server: ScriptedServer, capability: Capability
):
    server.capability = capability
    first = client(server, f"probed-{capability}")
    assert first.capability() is capability
    # Tools answered: one request; otherwise the schema is tried too.
    assert len(server.probes) == (1 if capability is Capability.TOOLS else 2)
    assert client(server, f"probed-{capability}").capability() is capability
    assert len(server.probes) == (1 if capability is Capability.TOOLS else 2), "probed again"
    assert server.requests == [] and first.usage.calls == 0  # the probe is no question
    assert first.spent_seconds > 0  # but its time is paid from the run's budget
    client(server, "another-model").capability()
    assert len(server.probes) > (1 if capability is Capability.TOOLS else 2)


def test_a_declared_capability_is_never_probed_and_an_endpoint_that_is_down_decides_nothing(
    monkeypatch: pytest.MonkeyPatch,
):
    server = ScriptedServer()
    monkeypatch.setenv("DBCREW_LLM_CAPABILITY", "prompted")
    assert client(server, "declared").capability() is Capability.PROMPTED
    assert server.probes == []
    monkeypatch.delenv("DBCREW_LLM_CAPABILITY")
    url = server.url
    server.close()
    gone = LlmClient(render, base_url=url, model="down", timeout=1.0, max_retries=0)
    assert gone.capability() is Capability.PROMPTED  # the mode every endpoint can follow
    assert known(url + "/", "down") is None  # not kept: the next question probes again
