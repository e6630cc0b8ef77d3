"""Tool invocation (DQA's TIG) for instance questions, offline: slot filling, then a classified look-up.

Slots are filled only with names the target's catalogue holds (tables, indexes, settings): a name
the question spells is matched against that list, never passed on as written, and the look-up
receives it as a bound parameter. The question, with its names replaced by fixed slot words, then
goes to the look-up classifier (dbcrew/roles/ask/routing.py), so "how big is X" means the same for every X.
The look-ups are the registry's operators of the ask surface (dbcrew/operators/lookups.py); `invoke` runs
one for the rules and for a model alike, and keeps a long observation behind a snapshot key.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any

import psycopg

from dbcrew.errors import DbcrewError
from dbcrew.models.answer import ToolCall
from dbcrew.operators.lookups import CatalogueNames, IndexSlot, LimitSlot, SettingSlot, TableSlot
from dbcrew.operators.registry import get
from dbcrew.roles.agent.snapshots import Snapshots
from dbcrew.roles.ask.routing import SLOT_WORDS, Router
from dbcrew.vocabulary import Lookup

OBSERVATION_LIMIT = 600  # characters of an observation an answer shows; the rest is kept by key


@dataclass
class Slots:
    table: tuple[str, str] | None = None
    index: tuple[str, str] | None = None
    setting: str | None = None
    limit: int | None = None
    masked: str = ""
    objects_masked: str = ""  # only tables and indexes replaced: what the router reads
    spans: list[tuple[int, int, str]] = field(default_factory=list)


def _spellings(name: str) -> set[str]:
    """How a question may spell a catalogue name: as is, with spaces for underscores, singular or plural."""
    spaced = name.replace("_", " ")
    out = {name, spaced}
    for form in (name, spaced):
        out.add(form[:-1] if form.endswith("s") else form + "s")
    return {s.lower() for s in out if len(s) > 2}


def _find(
    question: str, names: list[tuple[str, str]] | list[str], qualify: bool
) -> list[tuple[int, int, Any]]:
    """Every (start, end, name) where a catalogue name occurs as a whole word (schema-qualified or not)."""
    lowered = question.lower()
    found = []
    for item in names:
        schema, name = item if isinstance(item, tuple) else ("", item)
        forms = _spellings(name) | ({f"{schema}.{name}".lower()} if qualify else set())
        for form in forms:
            for match in re.finditer(rf"(?<![\w.]){re.escape(form)}(?![\w])", lowered):
                found.append((match.start(), match.end(), item))
    return found


def fill_slots(question: str, names: CatalogueNames) -> Slots:
    """Resolve the names a question uses against the catalogue; the longest match wins where two overlap."""
    candidates = [(s, e, "table", n) for s, e, n in _find(question, names.tables, True)]
    candidates += [(s, e, "index", n) for s, e, n in _find(question, names.indexes, True)]
    candidates += [
        (s, e, "setting", n) for s, e, n in _find(question, [(n, n) for n in names.settings], True)
    ]
    candidates.sort(key=lambda c: (-(c[1] - c[0]), c[0]))
    slots = Slots()
    taken: list[tuple[int, int, str]] = []
    for start, end, kind, item in candidates:
        if any(start < e and s < end for s, e, _ in taken) or getattr(slots, kind) is not None:
            continue
        setattr(slots, kind, item[0] if kind == "setting" else item)
        if (
            kind != "setting" or "_" in item[0]
        ):  # "autovacuum", "port": plain words stay words for the classifier
            taken.append((start, end, kind))
    number = re.search(r"\b(?:top|first|largest|biggest)\s+(\d{1,2})\b", question, re.IGNORECASE)
    slots.limit = int(number.group(1)) if number else None
    slots.masked = _masked(question, taken)
    slots.objects_masked = _masked(question, [t for t in taken if t[2] != "setting"])
    slots.spans = sorted(taken)
    return slots


def _masked(question: str, spans: list[tuple[int, int, str]]) -> str:
    for start, end, kind in sorted(spans, reverse=True):
        question = question[:start] + SLOT_WORDS[kind] + question[end:]
    return question


class MissingSlot(DbcrewError, ValueError):
    """The look-up needs a name the question does not give (or the catalogue does not hold)."""


@dataclass(frozen=True)
class Invocation:
    lookup: Lookup
    params: dict[str, Any]


def invocation(question: str, names: CatalogueNames, router: Router) -> Invocation:
    """The look-up and its validated parameters for an instance question (MissingSlot when a name is missing)."""
    slots = fill_slots(question, names)
    ranked = router.lookups_ranked(slots.masked)
    # The names settle what the classifier cannot: the likeliest look-up whose slot the question
    # fills; a question naming a table or index asks about it before it asks about the whole database.
    feasible = [lookup for lookup in ranked if _fillable(lookup, slots)]
    about_object = [
        lookup for lookup in feasible[:3] if get(lookup).params_model in (TableSlot, IndexSlot)
    ]
    named = slots.table is not None or slots.index is not None
    lookup = about_object[0] if named and about_object else (feasible or ranked)[0]
    model = get(lookup).params_model
    if model is TableSlot:
        if slots.table is None:
            raise MissingSlot(_missing("table", question, [n for _, n in names.tables]))
        params: dict[str, Any] = {"schema_name": slots.table[0], "table": slots.table[1]}
    elif model is IndexSlot:
        if slots.index is None:
            raise MissingSlot(_missing("index", question, [n for _, n in names.indexes]))
        params = {"schema_name": slots.index[0], "index": slots.index[1]}
    elif model is SettingSlot:
        if slots.setting is None:
            raise MissingSlot(_missing("setting", question, names.settings))
        params = {"name": slots.setting}
    elif model is LimitSlot:
        params = {"limit": slots.limit or 5}
    else:
        params = {}
    return Invocation(lookup, model.model_validate(params).model_dump())


def _fillable(lookup: Lookup, slots: Slots) -> bool:
    """Whether the question gives the name `lookup` needs."""
    model = get(lookup).params_model
    return {TableSlot: slots.table, IndexSlot: slots.index, SettingSlot: slots.setting}.get(
        model, True
    ) is not None


def _missing(kind: str, question: str, known: list[str]) -> str:
    words = re.findall(r"[\w.]+", question.lower())
    close = sorted(
        {m for w in words for m in difflib.get_close_matches(w, known, n=2, cutoff=0.75)}
    )
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    return f"The question names no {kind} this database has.{hint}"


def invoke(
    conn: psycopg.Connection[Any], operator: str, params: dict[str, Any], snapshots: Snapshots
) -> tuple[ToolCall, str]:
    """Run the look-up `operator` on the question's session: the answer's record of the call (an
    observation longer than OBSERVATION_LIMIT cut, the whole kept in `snapshots` and referred to by
    its store key) and the whole observation. ValidationError when the parameters do not fit."""
    look_up = get(operator)
    valid = look_up.params_model.model_validate(params).model_dump()
    text = look_up.run(conn, valid).summary
    return recorded(operator, valid, text, snapshots), text


def recorded(operator: str, params: dict[str, Any], text: str, snapshots: Snapshots) -> ToolCall:
    """The answer's record of one look-up's call: an observation longer than OBSERVATION_LIMIT cut,
    the whole kept in `snapshots` and referred to by its store key."""
    call = ToolCall(operator=operator, params=params, observation=text)
    if len(text) > OBSERVATION_LIMIT:
        key = snapshots.stored_key(snapshots.keep(text))
        call = call.model_copy(
            update={"observation": text[: OBSERVATION_LIMIT - 1] + "…", "observation_key": key}
        )
    return call
