"""The `ask` flow: one question answered as a Prefect flow run (for deployments and the UI's run form).

A thin shell over dbcrew/roles/ask/answer.py. `answer_question` is the same path for the CLI and MCP, which call it
outside any flow run (an answer in well under a second should not wait for an API server), except
for an analysis question with a target: its review runs through `health_review`, a flow run of its
own (a subflow run of `ask`'s), with its artifacts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow

from dbcrew.flows.api import shared_api
from dbcrew.flows.heartbeats import without_heartbeats
from dbcrew.flows.review import health_review
from dbcrew.models.answer import Answer
from dbcrew.roles.ask.answer import answered_by_review, ask
from dbcrew.roles.brains import default_brain, make_brain
from dbcrew.settings.run import Settings
from dbcrew.targets import parse_target


def answer_question(
    question: str,
    target: str | None,
    docs: Path | None,
    brain: str | None,
    settings: Settings | None = None,
) -> Answer:
    """Parse the target URL (TargetError on a bad one) and answer; `settings` bound a review an analysis request runs."""
    parsed = parse_target(target) if target else None
    answer = ask(question, parsed, docs, make_brain(brain or default_brain()), settings=settings)
    if answer.review is None:
        return answer
    shared_api()  # several questions at once (the MCP server) start one Prefect server, not one each
    with (
        without_heartbeats()
    ):  # the review's run lives in this process: the CLI's, MCP's or ask's flow run
        return answered_by_review(answer, health_review(answer.review))


@flow(name="ask", flow_run_name="ask", validate_parameters=False)
def ask_flow(
    question: str, target: str | None = None, docs: str | None = None, brain: str | None = None
) -> dict[str, Any]:
    """Route the question and answer it: from the manual (cited), by read-only look-ups, or by the review it needs."""
    return answer_question(question, target, Path(docs) if docs else None, brain).model_dump(
        mode="json"
    )
