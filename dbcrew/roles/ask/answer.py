"""Ask the crew: one question in, one typed Answer out (the CLI's `dbcrew ask`, the MCP `ask` tool, the `ask` flow).

The question is routed (dbcrew/roles/ask/routing.py). A write request is refused: the crew never writes to
a database. A question not about databases is declined. Knowledge questions (general, or about
PostgreSQL itself) are answered from the manual's retrieved sections, each cited; offline the
answer is extractive (the best sentences of the best passages). Instance questions become
read-only look-ups on the target (dbcrew/roles/ask/instance.py: the registry's operators of the ask surface);
with the LLM brain the model starts from the rules' look-up and may only add to it (dbcrew/roles/ask/llm.py);
an observation longer than a limit goes to the workspace as a snapshot and is referred to by its
key. Analysis requests name the review the planner's team
would run. The question is data from start to end: it picks a route and fills slots with
catalogue names, and no part of it is ever run as SQL.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import psycopg
import pydantic
from psycopg.rows import tuple_row

from dbcrew.errors import TargetError
from dbcrew.llm.base import Brain, BrainError, BudgetSpent, EndpointDown
from dbcrew.llm.client import LlmClient
from dbcrew.models import Report
from dbcrew.models.answer import Answer, Citation, ToolCall
from dbcrew.models.request import ReviewRequest
from dbcrew.operators.docs import Hit, best_sentences, docs_index, manual_folder
from dbcrew.operators.lookups import CatalogueNames, catalogue_names
from dbcrew.roles.agent.snapshots import Snapshots
from dbcrew.roles.ask import catalogue_wide
from dbcrew.roles.ask.instance import MissingSlot, fill_slots, invocation, invoke, recorded
from dbcrew.roles.ask.llm import react, written
from dbcrew.roles.ask.routing import asks_method, router, write_request
from dbcrew.roles.brains.openai import OpenAIBrain
from dbcrew.settings.paths import reports_root
from dbcrew.settings.run import Settings
from dbcrew.targets import PostgresTarget
from dbcrew.targets.postgres import first_line
from dbcrew.text.untrusted import model_text, visible
from dbcrew.vocabulary import Route, Scenario
from dbcrew.workspace import Workspace

ANALYSES = {
    Scenario.DIAGNOSE: "a diagnosis: the planner forms a team of experts (CPU, I/O, memory, workload, locks, vacuum) that"
    " sample the database now, cross-review their root causes and rank them",
    Scenario.HEALTH: "a health review: the planner forms a team (extractor, tasker, painter) that collects statistics,"
    " runs every health check and draws the activity charts",
}
CITED_PASSAGES = 3
LEAD_PROSE = 80  # characters of quotable prose a cited passage needs to lead the answer
MAX_LISTED_FINDINGS = 5
READ_ONLY = (
    "dbcrew is read-only: it never writes to a database (its sessions run with "
    "default_transaction_read_only), so it will not carry out a request to change data, schema, settings or sessions."
)
OFF_TOPIC = "This question is not about databases; dbcrew answers questions about PostgreSQL and the databases it reviews."
T = TypeVar("T")
DIAGNOSE_WORDS = re.compile(
    r"\b(slow|slower|now|spike|latency|timing out|timeouts?|stuck|cpu|root cause|cause|why)\b",
    re.IGNORECASE,
)


def ask(
    question: str,
    target: PostgresTarget | None = None,
    docs: Path | None = None,
    brain: Brain | None = None,
    workspace: Workspace | None = None,
    settings: Settings | None = None,
) -> Answer:
    """Route `question` and answer it. Raises TargetError when the target cannot be reached and
    FileNotFoundError when a knowledge question finds no manual (both one-line messages).

    The question is made plain first (NFKC; bidi, zero-width and control characters removed), so
    what is routed is what a reader sees: "d<U+200B>rop table" is the plain request. A request the
    router refuses is refused before any session is opened: the target is never touched for it.
    """
    question = visible(question)
    if target is None or router().route(question) is Route.UNSAFE:
        return _answer(question, None, docs, brain, workspace, None, settings)
    with target.session() as conn:  # one session for the catalogue's names and the look-up
        answer = _answer(question, conn, docs, brain, workspace, target, settings)
        other = other_database(question, target.dbname, conn)
    if other is None or answer.refused:
        return answer
    note = (
        f"The question names database {other!r}, but this answer is about the target's database"
        f" {target.dbname!r}; ask with --target naming {other} for that one."
    )
    return answer.model_copy(update={"answer": f"{note}\n{answer.answer}", "reason": note})


# "database shop2", "db shop2", "the database named shop2"; "the shop2 database" (quoted or not). Two
# patterns, each scanned on its own: one match must not swallow the other's name ("in database shop2").
_NAMED_DATABASE = (
    re.compile(
        r"\b(?:database|db)\s+(?:(?:named|called)\s+)?([\"'`]?)([A-Za-z_][\w$]*)\1", re.IGNORECASE
    ),
    re.compile(r"([\"'`]?)\b([A-Za-z_][\w$]*)\1\s+(?:database|db)\b", re.IGNORECASE),
)


def other_database(question: str, dbname: str, conn: psycopg.Connection[Any]) -> str | None:
    """The database the question names when it is not the target's, or None.

    A word next to "database" counts as a name when the server has a database of that name, or
    when it looks like one rather than an English word (quoted, or with a digit or an underscore):
    "the database size" names none, "database shop2" names shop2 whether or not it exists here.
    """
    with conn.cursor(row_factory=tuple_row) as cur:
        known = {str(r[0]) for r in cur.execute("SELECT datname FROM pg_database").fetchall()}
    for found in (m for pattern in _NAMED_DATABASE for m in pattern.finditer(question)):
        quoted, name = found.group(1, 2)
        looks_named = bool(quoted) or any(ch.isdigit() or ch == "_" for ch in name)
        if name != dbname and (name in known or looks_named):
            return name
    return None


def _answer(
    question: str,
    conn: psycopg.Connection[Any] | None,
    docs: Path | None,
    brain: Brain | None,
    workspace: Workspace | None,
    target: PostgresTarget | None,
    settings: Settings | None,
) -> Answer:
    brain_name = brain.name if brain is not None else "rules"
    llm = brain if isinstance(brain, OpenAIBrain) else None
    names = catalogue_names(conn) if conn is not None else None
    route = router().route(
        question, fill_slots(question, names).objects_masked if names is not None else None
    )
    if (
        route in (Route.GENERAL, Route.PRODUCT)
        and names is not None
        and not asks_method(question)
        and catalogue_wide.recognized(question, _names_object(question, names)) is not None
    ):
        route = (
            Route.INSTANCE
        )  # "do any tables carry a non-default fillfactor?" asks about the target's tables
    if route is Route.UNSAFE:
        request = write_request(question)
        reason = READ_ONLY + (f" The request: {request!r}." if request else "")
        refusal = (
            "Refused. Review first (`dbcrew review`), then make the change yourself through your own "
            "change process; a review's findings carry the fix SQL for you to run."
        )
        return Answer(route=route, answer=refusal, refused=True, reason=reason, brain=brain_name)
    if route is Route.OFF_TOPIC:
        return Answer(
            route=route,
            answer=OFF_TOPIC,
            refused=True,
            reason="not about databases",
            brain=brain_name,
        )
    if route is Route.ANALYSIS:
        return _analysis(question, target, brain_name, settings)
    if route is Route.INSTANCE:
        answer = _instance(question, conn, names, workspace, brain_name, llm)
    else:
        answer = _knowledge(question, route, docs, brain_name, llm)
    if llm is not None:
        answer.llm = llm.usage.model_copy()
    return answer


def _by_llm(
    what: str, brain: OpenAIBrain, attempt: Callable[[LlmClient], T | None]
) -> tuple[T | None, str]:
    """The LLM's result and the brain label: 'openai', or why the offline answer stands instead. The
    question is counted in the brain's usage, a fall-back as one; an endpoint that stopped answering
    earlier in the run is not asked."""
    if brain.down:
        brain.count_question(fell_back=True)
        return None, f"rules (openai not asked again: {brain.down})"
    try:
        result = attempt(brain.client)
    except BrainError as exc:
        brain.count_question(
            fell_back=True,
            down=first_line(exc) if isinstance(exc, EndpointDown | BudgetSpent) else "",
        )
        return None, f"rules (openai failed to {what}: {first_line(exc)})"
    brain.count_question(fell_back=result is None)
    return result, "openai" if result is not None else f"rules (openai gave no usable {what})"


def _knowledge(
    question: str, route: Route, docs: Path | None, brain_name: str, llm: OpenAIBrain | None
) -> Answer:
    hits = docs_index(manual_folder(docs)).search(question, CITED_PASSAGES)
    if not hits:
        return Answer(
            route=route, answer="The manual has no passage about this question.", brain=brain_name
        )
    citations = [_citation(hit, question) for hit in hits]
    if llm is not None:
        text, brain_name = _by_llm(
            "cited answer", llm, lambda client: written(question, [h.passage for h in hits], client)
        )
        if text is not None:  # a model's text is data: shown as a reader sees it, bounded
            return Answer(
                route=route, answer=model_text(text), citations=citations, brain=brain_name
            )
    # The lead is the best hit that has prose to quote: a synopsis or a sample output answers nothing.
    lead = next((c for c in citations if len(c.excerpt) >= LEAD_PROSE), citations[0])
    others = "; ".join(f"{c.title or c.section} ({c.section})" for c in citations if c is not lead)
    text = f"From {lead.title or lead.section} ({lead.section}): {lead.excerpt}"
    if others:
        text += f"\nSee also: {others}."
    return Answer(route=route, answer=text, citations=citations, brain=brain_name)


def _citation(hit: Hit, question: str) -> Citation:
    passage = hit.passage
    return Citation(
        source=passage.source,
        section=passage.section,
        title=passage.title,
        excerpt=best_sentences(passage.text, question, title=passage.title),
    )


def _instance(
    question: str,
    conn: psycopg.Connection[Any] | None,
    names: CatalogueNames | None,
    workspace: Workspace | None,
    brain_name: str,
    llm: OpenAIBrain | None,
) -> Answer:
    """The rules' look-up and its observation as the answer; with the LLM brain, the model starts from
    it and adds its own look-ups and answer (the rules' answer stands: it comes first, and without a
    rules' look-up the model's answer counts only when it ran one)."""
    if conn is None or names is None:
        return Answer(
            route=Route.INSTANCE,
            brain=brain_name,
            answer="This question is about a database's own state: give the database to look at (--target URL).",
        )
    snapshots = Snapshots(_AskStore(workspace), prefix=f"ask-{uuid.uuid4().hex[:8]}:")
    ran: ToolCall | None = None
    wide = catalogue_wide.recognized(question, _names_object(question, names))
    if wide is not None:
        return _over_every_table(question, conn, names, wide, snapshots, brain_name, llm)
    try:
        call = invocation(question, names, router())
    except MissingSlot as exc:
        text = str(exc)
    else:
        try:
            ran, text = invoke(conn, call.lookup.value, call.params, snapshots)
        except pydantic.ValidationError as exc:
            raise TargetError(
                f"look-up {call.lookup.value} rejected its parameters: {exc.errors()[0]['msg']}"
            ) from None
    rules = Answer(route=Route.INSTANCE, answer=text, tools=[ran] if ran else [], brain=brain_name)
    return _with_llm(question, conn, names, rules, snapshots, llm)


def _names_object(question: str, names: CatalogueNames) -> bool:
    slots = fill_slots(question, names)
    return slots.table is not None or slots.index is not None


def _over_every_table(
    question: str,
    conn: psycopg.Connection[Any],
    names: CatalogueNames,
    wide: catalogue_wide.WideQuestion,
    snapshots: Snapshots,
    brain_name: str,
    llm: OpenAIBrain | None,
) -> Answer:
    """A question over the whole catalogue: the property's look-ups chained over every table, one
    tool call each (its observation the combined answer)."""
    found = catalogue_wide.answer(conn, wide)
    tools = [
        recorded(
            done.lookup.value,
            {"tables": "every table", "read": len(done.rows), "of": done.total},
            found.text,
            snapshots,
        )
        for done in found.looked_up
    ]
    rules = Answer(route=Route.INSTANCE, answer=found.text, tools=tools, brain=brain_name)
    return _with_llm(question, conn, names, rules, snapshots, llm)


def _with_llm(
    question: str,
    conn: psycopg.Connection[Any],
    names: CatalogueNames,
    rules: Answer,
    snapshots: Snapshots,
    llm: OpenAIBrain | None,
) -> Answer:
    """The rules' answer, and with the LLM brain what the model adds to it."""
    if llm is None:
        return rules
    ran = rules.tools[0] if rules.tools else None
    text = rules.answer
    added, brain_name = _by_llm(
        "look-up answer",
        llm,
        lambda client: react(question, conn, names, client, snapshots, ran, text),
    )
    if added is None:
        return rules.model_copy(update={"brain": brain_name})
    said = model_text(added.answer)  # a model's text is data: shown as a reader sees it, bounded
    answer = f"{text}\n{said}" if ran is not None else said
    return Answer(
        route=Route.INSTANCE, answer=answer, tools=[*rules.tools, *added.tools], brain=brain_name
    )


@dataclass
class _AskStore:
    """Where an answer's long observations go: the caller's workspace, or one made for the question
    the first time an observation is too long to show (a short answer writes nothing)."""

    workspace: Workspace | None

    def __call__(self, key: str, text: str) -> str:
        if self.workspace is None:
            self.workspace = Workspace(
                reports_root() / "ask" / f"ask-{uuid.uuid4().hex[:12]}.duckdb"
            )
        return self.workspace.put_observation(key, text)


def _analysis(
    question: str, target: PostgresTarget | None, brain_name: str, settings: Settings | None
) -> Answer:
    """Without a target, the review to run; with one, that review as a request (dbcrew/flows/ask.py runs it through the
    one review path: the planner's team, the painter's charts) and `answered_by_review` answers from its report."""
    diagnose = bool(DIAGNOSE_WORDS.search(question))
    scenario = Scenario.DIAGNOSE if diagnose else Scenario.HEALTH
    command = "diagnose" if diagnose else "review"
    if target is None:
        return Answer(
            route=Route.ANALYSIS,
            brain=brain_name,
            answer=f"This needs {ANALYSES[scenario]}. Run: dbcrew {command} TARGET",
        )
    chosen = (settings or Settings()).model_copy(update={"alert": question} if diagnose else {})
    request = ReviewRequest(
        target=target,
        scenario=scenario,
        settings=chosen,
        brain=brain_name.partition(" ")[0],
        out=reports_root() / "ask" / f"{scenario.value}-{uuid.uuid4().hex[:12]}",
    )
    return Answer(
        route=Route.ANALYSIS,
        brain=brain_name,
        answer=f"This needs {ANALYSES[scenario]}.",
        review=request,
    )


def answered_by_review(answer: Answer, report: Report) -> Answer:
    """The analysis answer once its review ran: the summary, the worst findings and where the report is."""
    request = answer.review
    assert request is not None and request.out is not None  # _analysis made it
    problems = sorted((f for f in report.findings if f.is_problem), key=lambda f: f.severity.rank)
    worst = "; ".join(
        f"{f.severity.value} {f.code} on {f.object}" for f in problems[:MAX_LISTED_FINDINGS]
    )
    text = (
        f"Ran {ANALYSES[request.scenario]}. {report.summary}".strip()
        + (f"\nWorst findings: {worst}." if worst else "")
        + f"\nReport: {request.out / 'report.html'}"
        + (f" (charts: {', '.join(report.charts)})" if report.charts else "")
    )
    tool = ToolCall(
        operator=f"{request.scenario.value}_review",
        params={"window_seconds": request.settings.window_seconds},
        observation=f"{len(report.findings)} findings, {len(problems)} problems; report in {request.out}",
    )
    return answer.model_copy(
        update={"answer": text, "tools": [tool], "brain": report.brain, "review": None}
    )
