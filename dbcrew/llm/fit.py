"""Prompts cut to fit the endpoint's declared context (DBCREW_LLM_CONTEXT, 4,096 tokens by default).

A local server cuts an over-long prompt silently (Ollama keeps its tail, llama.cpp refuses it or
shifts the window), and the model then answers a question it never fully read. So the client cuts
first, where it knows what it cuts: the answer gets at most half the context (its max_tokens are
lowered to that), and the prompt's data (the brief, the catalogue, the strategy, the findings: the
lists and long texts of the template's context, never the answer's schema) is halved, the largest
value first, until the rendered prompt fits what is left. The prompt then says what was cut
(dbcrew/prompts/cut.j2), so the model knows it reads a part; the diagnosis's and ask's observations are
already cut behind snapshot keys (dbcrew/roles/agent/snapshots.py).

Tokens are estimated at three characters each: JSON, SQL and identifiers tokenize denser than
English prose (four), and an estimate that errs long only cuts a little more.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

CHARS_PER_TOKEN = 3
KEPT = ("schema",)  # what the answer must match is never cut
MIN_TEXT = 200  # a text is not cut below this many characters


def approx_tokens(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


def answer_room(max_tokens: int, context: int) -> int:
    """The tokens an answer may take in a context of `context` tokens: at most half of it."""
    return min(max_tokens, context // 2)


@dataclass(frozen=True)
class Fitted:
    """A rendered prompt and what was cut from its data to fit (e.g. "catalogue: 12 of 40 items")."""

    text: str
    cut: tuple[str, ...] = ()


def fit(render: Callable[[dict[str, Any]], str], context: dict[str, Any], room: int) -> Fitted:
    """`render(context)` within `room` tokens, the largest cuttable value of the context halved until it
    fits (or nothing is left to cut: then as short as it gets). `render` is given the cut context."""
    data = dict(context)
    wholes: dict[tuple[str, ...], tuple[int, str]] = {}  # path -> (original length, unit)
    text = render(data)
    while approx_tokens(text) > room:
        path = _largest(data)
        if path is None:
            break
        value = _at(data, path)
        wholes.setdefault(path, (len(value), "items" if isinstance(value, list) else "characters"))
        _put(data, path, value[: len(value) // 2])
        text = render(data)
    return Fitted(
        text,
        tuple(
            f"{'.'.join(path)}: {len(_at(data, path))} of {whole} {unit} kept"
            for path, (whole, unit) in wholes.items()
        ),
    )


def _size(value: Any) -> int:
    return len(str(value))


def _largest(data: dict[str, Any]) -> tuple[str, ...] | None:
    """The path (a top-level key, or one level down in a dict) of the largest value still cuttable."""
    candidates: list[tuple[int, tuple[str, ...]]] = []
    for key, value in data.items():
        if key in KEPT:
            continue
        if isinstance(value, dict):
            candidates += [
                (_size(inner), (key, name)) for name, inner in value.items() if _cuttable(inner)
            ]
        elif _cuttable(value):
            candidates.append((_size(value), (key,)))
    return max(candidates)[1] if candidates else None


def _cuttable(value: Any) -> bool:
    return (isinstance(value, list) and len(value) > 0) or (
        isinstance(value, str) and len(value) > MIN_TEXT
    )


def _at(data: dict[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = data
    for key in path:
        value = value[key]
    return value


def _put(data: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    """Set the value at `path`, copying the dicts on the way: the caller's context is never changed."""
    holder = data
    for key in path[:-1]:
        holder[key] = dict(holder[key])
        holder = holder[key]
    holder[path[-1]] = value
