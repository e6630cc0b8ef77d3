"""A whole review whose LLM endpoint answers garbage: report.brain and report.llm say what really happened.

The review runs through the Prefect phase flows (the path the CLI and a deployment take), so the
one brain of the run has to reach the initialize, execute and re-plan subflows and the reporter.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dbcrew.flows.review import health_review
from dbcrew.lab.scripted_llm import Reply, ScriptedServer
from dbcrew.lab.shop import DemoShop
from dbcrew.models.faults import FaultKind, FaultSpec
from dbcrew.models.request import ReviewRequest
from dbcrew.settings.run import Settings

pytestmark = pytest.mark.prefect

GARBAGE = Reply(content="Sure! Here is the plan you asked for: check everything, then relax.")
TEMPLATE_OPENINGS = {
    "plan": "Scenario: health\n\nBrief",
    "critique": "Scenario: health. Review this plan",
    "recommend": "A worker failed",
    "replan": "Re-plan scenario",
    "summarize": "Write a short summary",
}


def question_of(request: dict) -> str | None:
    """Which question a chat request asks, or None for a repair (it carries the earlier answer and the error)."""
    messages = request["messages"]
    if len(messages) != 2:
        return None
    return next(
        name
        for name, opening in TEMPLATE_OPENINGS.items()
        if messages[1]["content"].startswith(opening)
    )


def test_garbage_endpoint_review_says_which_brain_answered_and_what_it_spent(
    shop: DemoShop, prefect_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # Garbage for the plan (three tries), a usable critique, then garbage for every later question.
    server = ScriptedServer(
        replies=[GARBAGE] * 3 + [Reply(content='{"problems": []}')], otherwise=GARBAGE
    )
    monkeypatch.setenv("DBCREW_LLM_BASE_URL", server.url)
    monkeypatch.setenv("DBCREW_LLM_MODEL", "scripted")
    try:
        report = health_review(
            ReviewRequest(
                target=shop.dsn,
                settings=Settings(window_seconds=1.5),
                out=tmp_path,
                brain="openai",
                faults=[FaultSpec(operator="collect_index_stats", kind=FaultKind.MISFIT)],
            )
        )
    finally:
        server.close()
    asked = [q for q in map(question_of, server.requests) if q is not None]
    # Questions came from every phase: initialize, the monitor in execute, re-plan, and the report.
    assert {"plan", "critique", "recommend", "replan", "summarize"} <= set(asked), asked
    assert (report.phases.alerts, report.phases.replans) == (1, 1)
    llm = report.llm
    assert llm.questions == len(asked) and llm.fallbacks == len(asked) - 1
    assert llm.calls == len(server.requests) == 3 * llm.fallbacks + 1
    assert (llm.prompt_tokens, llm.completion_tokens) == (100 * llm.calls, 20 * llm.calls)
    assert (
        report.brain == f"openai, {llm.fallbacks} of {llm.questions} questions fell back to rules"
    )
    assert f"brain: {report.brain}" in (tmp_path / "report.md").read_text()
    # The rules brain's answers did the work: the re-plan removed what the misfit operator fed.
    coverage = {c.check: c.status.value for c in report.coverage}
    assert (
        coverage["check_duplicate_indexes"] == "skipped"
        and coverage["check_vacuum_health"] == "ran"
    )
