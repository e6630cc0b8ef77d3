"""`dbcrew ask "QUESTION" [--target URL] [--docs DIR] [--json]`: one question, one answer, on stdout."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dbcrew.cli.console import line, out, show
from dbcrew.cli.options import Brain
from dbcrew.errors import UsageError
from dbcrew.models.answer import Answer
from dbcrew.text.untrusted import visible


def ask(
    question: Annotated[str, typer.Argument(help="the question, in English")],
    target: Annotated[
        str | None,
        typer.Option(help="postgresql://user@host:port/dbname, for questions about that database"),
    ] = None,
    docs: Annotated[
        Path | None,
        typer.Option(
            help="folder of the PostgreSQL manual's HTML (default: Debian's postgresql-doc-15)"
        ),
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="print the answer as JSON")] = False,
    brain: Brain = None,
) -> None:
    """Ask the crew a question: about PostgreSQL, about databases, or about the target's own state."""
    from dbcrew.cli.reviewing import prefect_env
    from dbcrew.flows.ask import answer_question

    if not visible(question):  # zero-width and bidi characters alone are no question either
        raise UsageError("the question is empty")
    prefect_env()  # an analysis question runs a review: through a running server when there is one
    try:
        answer = answer_question(question, target, docs, brain)
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from None
    if json_output:
        out.print(answer.model_dump_json(indent=2), markup=False, highlight=False)
    else:
        print_answer(answer)
    if answer.refused:
        raise typer.Exit(0)


def print_answer(answer: Answer) -> None:
    show(line((f"[{answer.route.value}] ", "bold"), answer.answer))
    if answer.reason:
        show(line(("reason: ", "dim"), answer.reason))
    for tool in answer.tools:
        key = f" (whole observation: {tool.observation_key})" if tool.observation_key else ""
        show(line(("tool: ", "dim"), f"{tool.operator} {tool.params}{key}"))
    for citation in answer.citations:
        show(line(("source: ", "dim"), f"{citation.source} {citation.section} {citation.title}"))
