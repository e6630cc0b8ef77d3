"""The LLM brain's side of `dbcrew ask`: ReAct look-ups and answers written from cited passages.

Instance questions run DQA's Thought / Action / Action Input / Observation loop over the same
read-only look-ups the offline brain uses. The model's turns are checked, never trusted: a tool
name outside the look-ups, an Action Input that is not a JSON object, parameters the look-up's
model refuses or a table or index the catalogue does not hold each get a corrective Observation,
and the loop is bounded. Knowledge questions are written from the retrieved passages, every
sentence ending in a passage number; a sentence without a citation, or whose content words its
cited passage does not hold (token overlap below SUPPORTED), rejects the answer: it is asked for
again with the unsupported sentences named, and after that the caller falls back to the
extractive answer. None means "fall back": the offline brain's answer stands.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pydantic

from dbcrew.llm.client import LlmClient
from dbcrew.models.answer import ToolCall
from dbcrew.vocabulary import Lookup
from operators.docs import Passage
from operators.lookups import LOOKUPS, CatalogueNames, IndexSlot, TableSlot, run_lookup
from prompts import render

MAX_STEPS = 5
REGENERATIONS = 1
SUPPORTED = 0.6
_ACTION = re.compile(r"^\s*Action:\s*(?P<name>.+?)\s*$", re.MULTILINE)
_INPUT = re.compile(r"^\s*Action Input:\s*(?P<input>.*)", re.MULTILINE | re.DOTALL)
_FINAL = re.compile(r"^\s*Final Answer:\s*(?P<answer>.+)", re.MULTILINE | re.DOTALL)
_CITED = re.compile(r"\[(\d+)\]")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|(?<=\])\s+(?=[A-Z])")
_WORD = re.compile(r"[a-z0-9_]{3,}")
_STOP = frozenset(
    "the and for that this with from are was were which when what how its into can not but than then "
    "they them their there has have had also only more most such each any all one you your".split()
)


@dataclass
class ReactOutcome:
    answer: str
    tools: list[ToolCall] = field(default_factory=list)


def react(
    question: str, conn: psycopg.Connection[Any], names: CatalogueNames, client: LlmClient
) -> ReactOutcome | None:
    """The model's final answer after its look-ups, or None when it gives none within MAX_STEPS turns."""
    tools = [
        {
            "name": k.value,
            "description": spec.description,
            "parameters": spec.slots.model_json_schema().get("properties", {}),
        }
        for k, spec in LOOKUPS.items()
    ]
    messages = [
        {
            "role": "system",
            "content": render("ask_react.j2", {"tools": tools, "question": question}),
        },
        {"role": "user", "content": "Begin."},
    ]
    calls: list[ToolCall] = []
    for _ in range(MAX_STEPS):
        turn = client.complete(messages).text
        final = _FINAL.search(turn)
        if final:
            return ReactOutcome(final.group("answer").strip(), calls)
        observation = _observe(turn, conn, names, calls)
        messages += [
            {"role": "assistant", "content": turn},
            {"role": "user", "content": f"Observation: {observation}"},
        ]
    return None


def _observe(
    turn: str, conn: psycopg.Connection[Any], names: CatalogueNames, calls: list[ToolCall]
) -> str:
    """The Observation for one turn: the look-up's result, or what to correct."""
    action = _ACTION.search(turn)
    if action is None:
        return "Write an Action and an Action Input, or a Final Answer."
    name = action.group("name").strip("` ")
    try:
        lookup = Lookup(name)
    except ValueError:
        return f"There is no tool {name!r}. Use one of: {', '.join(k.value for k in LOOKUPS)}."
    raw = _INPUT.search(turn)
    try:
        params = json.loads(raw.group("input").strip().strip("`")) if raw else None
    except ValueError as exc:
        return f'The Action Input is not valid JSON ({exc}). Give one JSON object, e.g. {{"table": "orders"}}.'
    if not isinstance(params, dict):
        return "The Action Input must be a JSON object of the tool's parameters."
    unknown = _unknown_name(LOOKUPS[lookup].slots, params, names)
    if unknown:
        return unknown
    try:
        result = run_lookup(conn, lookup, params)
    except pydantic.ValidationError as exc:
        return f"The parameters do not fit {lookup.value}: {exc.errors()[0]['loc']} {exc.errors()[0]['msg']}."
    calls.append(
        ToolCall(operator=lookup.value, params=result.params, observation=result.observation)
    )
    return result.observation


def _unknown_name(
    model: type[pydantic.BaseModel], params: dict[str, Any], names: CatalogueNames
) -> str:
    """A correction when the parameters name a table or index the catalogue does not hold ('' when they do)."""
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
        text = client.complete(messages).text.strip()
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
