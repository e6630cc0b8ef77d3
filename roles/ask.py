"""Ask the crew: one question in, one typed Answer out (the CLI's `dbcrew ask`, the MCP `ask` tool, the `ask` flow).

The question is routed (roles/routing.py). A write request is refused: the crew never writes to
a database. A question not about databases is declined. Knowledge questions (general, or about
PostgreSQL itself) are answered from the manual's retrieved sections, each cited; offline the
answer is extractive (the best sentences of the best passages). Instance questions become
read-only look-ups on the target (roles/instance.py); an observation longer than a limit goes to
the workspace and is referred to by its key. Analysis requests name the review the planner's team
would run. The question is data from start to end: it picks a route and fills slots with
catalogue names, and no part of it is ever run as SQL.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pydantic

from dbcrew.errors import TargetError
from dbcrew.llm.base import Brain
from dbcrew.models.answer import Answer, Citation, ToolCall
from dbcrew.settings import reports_root
from dbcrew.targets import PostgresTarget
from dbcrew.vocabulary import Route
from dbcrew.workspace import Workspace
from operators.docs import Hit, best_sentences, docs_index, manual_folder
from operators.lookups import CatalogueNames, catalogue_names, run_lookup
from roles.instance import MissingSlot, fill_slots, invocation
from roles.routing import router, write_request

OBSERVATION_LIMIT = 600
CITED_PASSAGES = 3
READ_ONLY = ("dbcrew is read-only: it never writes to a database (its sessions run with "
             "default_transaction_read_only), so it will not carry out a request to change data, schema, settings or sessions.")
OFF_TOPIC = "This question is not about databases; dbcrew answers questions about PostgreSQL and the databases it reviews."
DIAGNOSE_WORDS = re.compile(r"\b(slow|slower|now|spike|latency|timing out|timeouts?|stuck|cpu|root cause|cause|why)\b", re.IGNORECASE)


def ask(question: str, target: PostgresTarget | None = None, docs: Path | None = None, brain: Brain | None = None,
        workspace: Workspace | None = None) -> Answer:
    """Route `question` and answer it. Raises TargetError when the target cannot be reached and
    FileNotFoundError when a knowledge question finds no manual (both one-line messages)."""
    brain_name = brain.name if brain is not None else "rules"
    names = None
    if target is not None and write_request(question) is None:
        with target.session() as conn:
            names = catalogue_names(conn)
    route = router().route(question, fill_slots(question, names).objects_masked if names is not None else None)
    if route is Route.UNSAFE:
        request = write_request(question)
        reason = READ_ONLY + (f" The request: {request!r}." if request else "")
        answer = ("Refused. Review first (`dbcrew review`), then make the change yourself through your own "
                  "change process; a review's findings carry the fix SQL for you to run.")
        return Answer(route=route, answer=answer, refused=True, reason=reason, brain=brain_name)
    if route is Route.OFF_TOPIC:
        return Answer(route=route, answer=OFF_TOPIC, refused=True, reason="not about databases", brain=brain_name)
    if route is Route.ANALYSIS:
        return Answer(route=route, answer=_analysis(question, target), brain=brain_name)
    if route is Route.INSTANCE:
        return _instance(question, target, names, workspace, brain_name)
    return _knowledge(question, route, docs, brain_name)


def _knowledge(question: str, route: Route, docs: Path | None, brain_name: str) -> Answer:
    hits = docs_index(manual_folder(docs)).search(question, CITED_PASSAGES)
    if not hits:
        return Answer(route=route, answer="The manual has no passage about this question.", brain=brain_name)
    citations = [_citation(hit, question) for hit in hits]
    lead = citations[0]
    others = "; ".join(f"{c.title or c.section} ({c.section})" for c in citations[1:])
    text = f"From {lead.title or lead.section} ({lead.section}): {lead.excerpt}"
    if others:
        text += f"\nSee also: {others}."
    return Answer(route=route, answer=text, citations=citations, brain=brain_name)


def _citation(hit: Hit, question: str) -> Citation:
    passage = hit.passage
    return Citation(source=passage.source, section=passage.section, title=passage.title,
                    excerpt=best_sentences(passage.text, question))


def _instance(question: str, target: PostgresTarget | None, names: CatalogueNames | None, workspace: Workspace | None,
              brain_name: str) -> Answer:
    if target is None or names is None:
        return Answer(route=Route.INSTANCE, brain=brain_name,
                      answer="This question is about a database's own state: give the database to look at (--target URL).")
    with target.session() as conn:
        try:
            call = invocation(question, names, router())
        except MissingSlot as exc:
            return Answer(route=Route.INSTANCE, answer=str(exc), brain=brain_name)
        try:
            result = run_lookup(conn, call.lookup, call.params)
        except pydantic.ValidationError as exc:
            raise TargetError(f"look-up {call.lookup.value} rejected its parameters: {exc.errors()[0]['msg']}") from None
    observation = result.observation
    tool = ToolCall(operator=call.lookup.value, params=result.params, observation=observation)
    if len(observation) > OBSERVATION_LIMIT:
        store = workspace or Workspace(reports_root() / "ask" / f"ask-{uuid.uuid4().hex[:12]}.duckdb")
        tool.observation_key = store.put_observation(f"ask:{call.lookup.value}:{uuid.uuid4().hex[:8]}",
                                                     {"observation": observation, "rows": result.rows})
        tool.observation = observation[:OBSERVATION_LIMIT - 1] + "…"
    return Answer(route=Route.INSTANCE, answer=observation, tools=[tool], brain=brain_name)


def _analysis(question: str, target: PostgresTarget | None) -> str:
    diagnose = bool(DIAGNOSE_WORDS.search(question))
    command = "diagnose" if diagnose else "review"
    where = target.display if target is not None else "TARGET"
    what = ("a diagnosis: the planner forms a team of experts (CPU, I/O, memory, workload, locks, vacuum) that sample "
            "the database now, cross-review their root causes and rank them") if diagnose else \
           ("a health review: the planner forms a team (extractor, tasker, painter) that collects statistics, runs "
            "every health check and draws the activity charts")
    return f"This needs {what}. Run: dbcrew {command} {where}"
