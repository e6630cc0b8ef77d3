"""The `ask` flow: one question answered as a Prefect flow run (for deployments and the UI's run form).

A thin shell over roles/ask.py; `answer_question` is the same path without Prefect, which the CLI
takes (an answer in well under a second should not wait for an ephemeral API server).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow

from dbcrew.models.answer import Answer
from dbcrew.settings import Settings
from dbcrew.targets import parse_target
from roles.ask import ask
from roles.brains import default_brain, make_brain


def answer_question(question: str, target: str | None, docs: Path | None, brain: str | None,
                    settings: Settings | None = None) -> Answer:
    """Parse the target URL (TargetError on a bad one) and answer; `settings` bound a review an analysis request runs."""
    parsed = parse_target(target) if target else None
    return ask(question, parsed, docs, make_brain(brain or default_brain()), settings=settings)


@flow(name="ask", flow_run_name="ask", validate_parameters=False)
def ask_flow(question: str, target: str | None = None, docs: str | None = None, brain: str | None = None) -> dict[str, Any]:
    """Route the question and answer it: from the manual (cited), by read-only look-ups, or by naming the review to run."""
    return answer_question(question, target, Path(docs) if docs else None, brain).model_dump(mode="json")
