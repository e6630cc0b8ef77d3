"""The LLM brain's side of `dbcrew ask`: look-ups on the shared agent loop and answers written from cited passages.

Instance questions run DQA's Thought / Action / Action Input / Observation loop on the same
agent loop as the LLM diagnosis (dbcrew/roles/agent/controller.py: the endpoint's capability, JSON
repair, budget, response cache, snapshot keys), over the registry's look-ups of the ask surface.
The rules' look-up has run before the model is asked, and the model starts from its observation:
a model only adds to it. Only a look-up the controller ran is an observation: in prompted mode the
turn is sent with a stop at "Observation:", and whatever the model wrote from there on (its own
observation, a final answer resting on it) is cut before the turn is read. The model's turns are
checked, never trusted: a tool outside the look-ups, an Action Input that is not a JSON object,
parameters the look-up's model refuses or a table or index the catalogue does not hold each get a
correction, and the loop is bounded. Knowledge questions are written from the retrieved passages,
every sentence ending in a passage number; a sentence without a citation, or whose content words
its cited passage does not hold (token overlap below SUPPORTED), rejects the answer: it is asked for
again with the unsupported sentences named, and after that the caller falls back to the extractive
answer. None means "fall back": the offline brain's answer stands.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, cast

import psycopg
import pydantic
from pydantic import BaseModel, Field

from dbcrew.llm.base import BrainError
from dbcrew.llm.client import LlmClient
from dbcrew.models.answer import ToolCall
from dbcrew.operators.docs import Passage
from dbcrew.operators.lookups import CatalogueNames, IndexSlot, TableSlot
from dbcrew.operators.registry import Surface, exposed, get
from dbcrew.prompts import render
from dbcrew.roles.agent.budget import AgentLimits, Budget, BudgetExhausted
from dbcrew.roles.agent.cache import response_cache
from dbcrew.roles.agent.controller import Agenda, Controller, Tally, parse_json, signature
from dbcrew.roles.agent.snapshots import Snapshots
from dbcrew.roles.ask.instance import invoke

MAX_STEPS = 5
REGENERATIONS = 1
WRITTEN_TOKENS = 500  # a cited answer: a paragraph
SUPPORTED = 0.6
FINAL, EXPAND = "final_answer", "expand"
OBSERVATION = "Observation:"
_ACTION = re.compile(r"^\s*Action:\s*(?P<name>.+?)\s*$", re.MULTILINE)
_INPUT = re.compile(
    r"^\s*Action Input:\s*(?P<input>.*?)(?=^\s*(?:Thought|Action|Final Answer):|\Z)",
    re.MULTILINE | re.DOTALL,
)
_FINAL = re.compile(r"^\s*Final Answer:\s*(?P<answer>.+)", re.MULTILINE | re.DOTALL)
_CITED = re.compile(r"\[(\d+)\]")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|(?<=\])\s+(?=[A-Z])")
_WORD = re.compile(r"[a-z0-9_]{3,}")
_STOP = frozenset(
    "the and for that this with from are was were which when what how its into can not but than then "
    "they them their there has have had also only more most such each any all one you your".split()
)


class FinalAnswer(BaseModel):
    answer: str = Field(
        min_length=1, description="the answer, naming the tables, indexes or settings it is about"
    )


def react_turn(text: str) -> tuple[Any, bool]:
    """A prompted turn as an action (value, whether it was repaired): an Action with its Action Input
    comes first (a Final Answer after it rests on an observation the model has not seen), then a
    Final Answer; a turn with neither is read as the JSON action of the other modes."""
    action = _ACTION.search(text)
    if action is not None:
        name = action.group("name").strip("` ")
        raw = _INPUT.search(text, action.end())
        try:
            args, repaired = (
                parse_json(raw.group("input"))
                if raw and raw.group("input").strip()
                else ({}, False)
            )
        except ValueError:
            raise ValueError(
                f"the Action Input of {name} is not a JSON object of its parameters"
            ) from None
        return {"action": name, "args": args}, repaired
    final = _FINAL.search(text)
    if final is not None:
        return {"action": FINAL, "args": {"answer": final.group("answer").strip()}}, False
    return parse_json(text)


ASK = Agenda(
    system="ask_react.j2",
    task="ask_task.j2",
    feedback="ask_feedback.j2",
    finish=FINAL,
    result=FinalAnswer,
    read=react_turn,
    stop=(OBSERVATION,),
)
LIMITS = AgentLimits(calls=MAX_STEPS, steps=MAX_STEPS)


@dataclass
class ReactOutcome:
    answer: str
    tools: list[ToolCall] = field(default_factory=list)


@dataclass
class AskTools:
    """The look-ups a model may call for one question (the registry's ask surface), on its one session."""

    conn: psycopg.Connection[Any]
    catalogue: CatalogueNames
    snapshots: Snapshots
    limit: int = LIMITS.observation_chars
    calls: list[ToolCall] = field(default_factory=list)

    @staticmethod
    def specs() -> list[dict[str, Any]]:
        return tool_specs()

    @staticmethod
    def names() -> list[str]:
        return [spec["function"]["name"] for spec in tool_specs()]

    @staticmethod
    def resolve(name: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """A look-up's parameters as its model reads them (defaults filled in), so that a call the rules
        (or the model) already made is recognized as a repeat; parameters the model refuses stay as
        written, for `run` to say why."""
        if name not in {op.name for op in exposed(Surface.ASK)}:
            return name, args
        try:
            return name, get(name).params_model.model_validate(args).model_dump()
        except pydantic.ValidationError:
            return name, args

    def run(self, name: str, args: dict[str, Any]) -> tuple[str, str, bool]:
        """(the observation as the model sees it, its whole text, whether it was cut behind a snapshot
        key). ValueError for parameters the look-up refuses or names the catalogue does not hold."""
        if name == EXPAND:
            text = self.snapshots.expand(
                str(args.get("key", "")), int(args.get("offset", 0) or 0), self.limit
            )
            return text, text, False
        unknown = _unknown_name(name, args, self.catalogue)
        if unknown:
            raise ValueError(unknown)
        try:
            call, text = invoke(self.conn, name, args, self.snapshots)
        except pydantic.ValidationError as exc:
            raise ValueError(f"{exc.errors()[0]['loc']} {exc.errors()[0]['msg']}") from None
        self.calls.append(call)
        shown, key = self.snapshots.show(text, self.limit)
        return shown, text, key is not None


def tool_specs() -> list[dict[str, Any]]:
    """OpenAI function specs, generated from the registry: each look-up of the ask surface with its
    parameter model's schema, then `expand` and `final_answer`."""
    specs = [
        {
            "type": "function",
            "function": {
                "name": op.name,
                "description": op.description,
                "parameters": op.params_schema(),
            },
        }
        for op in exposed(Surface.ASK)
    ]
    expand = {
        "type": "object",
        "required": ["key"],
        "properties": {"key": {"type": "string"}, "offset": {"type": "integer"}},
    }
    specs.append(
        {
            "type": "function",
            "function": {
                "name": EXPAND,
                "description": "Read a cut observation on.",
                "parameters": expand,
            },
        }
    )
    specs.append(
        {
            "type": "function",
            "function": {
                "name": FINAL,
                "description": "Finish with the answer.",
                "parameters": FinalAnswer.model_json_schema(),
            },
        }
    )
    return specs


def react(
    question: str,
    conn: psycopg.Connection[Any],
    names: CatalogueNames,
    client: LlmClient,
    snapshots: Snapshots,
    ran: ToolCall | None,
    observed: str,
) -> ReactOutcome | None:
    """The model's final answer and the look-ups it ran, starting from the rules' look-up `ran` and its
    whole observation (or, without one, `observed` says why the rules had none); None when neither the
    rules nor the model ran a look-up. BrainError when the endpoint fails, the budget runs out or no
    answer comes in MAX_STEPS turns."""
    tools = AskTools(conn, names, snapshots)
    context = {
        "question": question,
        "missing": observed if ran is None else "",
        "ran": {
            "operator": ran.operator,
            "params": ran.params,
            "shown": snapshots.show(observed, tools.limit)[0],
        }
        if ran is not None
        else None,
    }
    controller = Controller(
        client, render, tools, Budget(LIMITS), client.capability(), Tally(), ASK, response_cache()
    )
    try:
        final = cast(
            FinalAnswer,
            controller.run(context, seen=(signature(ran.operator, ran.params),) if ran else ()),
        )
    except BudgetExhausted as exc:
        raise BrainError(f"the look-up budget ran out ({exc})") from exc
    if ran is None and not tools.calls:
        return None
    return ReactOutcome(final.answer, tools.calls)


def _unknown_name(operator: str, params: dict[str, Any], names: CatalogueNames) -> str:
    """A correction when the parameters name a table or index the catalogue does not hold ('' when they do)."""
    model = get(operator).params_model
    for slot, kind, known in (
        (TableSlot, "table", names.tables),
        (IndexSlot, "index", names.indexes),
    ):
        if (
            model is slot
            and (str(params.get("schema_name", "public")), str(params.get(kind, ""))) not in known
        ):
            return f"This database has no {kind} {params.get(kind)!r}. Its {kind}s: {', '.join(n for _, n in known[:30])}."
    return ""


def written(question: str, passages: list[Passage], client: LlmClient) -> str | None:
    """An answer written from `passages` whose every sentence its cited passage supports, or None."""
    messages = [
        {
            "role": "system",
            "content": render("ask_written.j2", {"question": question, "passages": passages}),
        },
        {"role": "user", "content": "Answer."},
    ]
    for _ in range(REGENERATIONS + 1):
        text = client.complete(messages, max_tokens=WRITTEN_TOKENS).text.strip()
        unsupported = unsupported_sentences(text, [p.text for p in passages])
        if text and not unsupported:
            return text
        listed = "; ".join(repr(s) for s in unsupported[:5]) or "(the answer was empty)"
        messages += [
            {"role": "assistant", "content": text},
            {
                "role": "user",
                "content": f"These sentences are not supported by the passages they cite: {listed}. "
                "Answer again, every sentence backed by its cited passage.",
            },
        ]
    return None


def unsupported_sentences(text: str, passages: list[str]) -> list[str]:
    """The sentences of `text` without a valid citation or whose content words their cited passages do not hold."""
    out = []
    for sentence in (s.strip() for s in _SENTENCE.split(text) if s.strip()):
        cited = [int(n) for n in _CITED.findall(sentence)]
        sources = " ".join(passages[n - 1].lower() for n in cited if 1 <= n <= len(passages))
        words = [w for w in _WORD.findall(_CITED.sub(" ", sentence).lower()) if w not in _STOP]
        backed = [w for w in words if w in sources or (len(w) > 5 and w[:5] in sources)]
        if not sources or (words and len(backed) / len(words) < SUPPORTED):
            out.append(sentence)
    return out
