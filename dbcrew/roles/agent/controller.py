"""RCAgent's controller: one agent's Thought/Action/Observation turns against the endpoint, as
D-Bot's tree search (tree.py: reflect, score, backtrack). It runs the diagnosis's experts
(dbcrew/roles/diagnosis/agenda.py) and ask's look-ups (dbcrew/roles/ask/llm.py) alike, knowing neither:
an `Agenda` says what a loop is for (its prompts, the action that ends it, how a prompted turn reads)
and a `Toolbox` what it may call.

Per endpoint capability the model acts through native tool calls, through JSON constrained by a
schema, or through text asked for in the prompt (JSON, or ask's ReAct lines); all end in the same
`AgentAction`. The controller, not the model, keeps the loop sane:
- an answer that is not clean JSON is repaired by json-repair first (fences, prose, trailing
  commas), and only an answer still unusable is asked for again (a regeneration);
- an unknown tool or an action repeated with the same arguments gets a corrective message, not an
  observation, and both are counted;
- only a tool the controller ran gives an observation: a prompted turn is sent with the agenda's stop
  sequences ("Observation:" for ReAct), and whatever the model wrote from one on is cut from its
  turn before it is read or repeated, so an observation it made up is never seen again;
- an observation longer than the limit is cut behind a snapshot key (snapshots.py), and once a
  newer turn observes, an older turn's observations are shown by their keys alone: each call carries
  one turn's observations, not the whole history of them (without a limit nothing is cut or folded);
- several tool calls in one turn (parallel tool calls) are all answered: one call, not several;
- every call is paid from the loop's budget first (BudgetExhausted stops the loop between calls),
  and answered from the response cache when the same request was asked before.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import json_repair
from pydantic import BaseModel, Field, ValidationError

from dbcrew.llm.base import BrainError
from dbcrew.llm.client import (
    Completion,
    FunctionCall,
    LlmClient,
    Render,
    ResponseCache,
    strip_fences,
)
from dbcrew.roles.agent.budget import Budget
from dbcrew.roles.agent.snapshots import Snapshots
from dbcrew.roles.agent.tree import REFLECT, Node, Search
from dbcrew.settings.llm import Capability

SAMPLING_TEMPERATURE = 0.7  # self-consistency needs samples that can differ
STEP_TOKENS = 600  # one turn: a thought and one action with its arguments, or the causes proposed


class AgentAction(BaseModel):
    """One turn of an agent: its thought, the tool it calls and that tool's arguments."""

    thought: str = ""
    action: str
    args: dict[str, Any] = Field(default_factory=dict)


class Reflection(BaseModel):
    hypothesis: str = ""
    score: float = Field(ge=0, le=1)
    note: str = ""


class GaveUp(BrainError):
    """The agent used its steps without the action that ends its loop."""


class Toolbox(Protocol):
    """What a loop may call: its function specs, the names an action may use, and how each runs."""

    limit: int
    snapshots: Snapshots

    def specs(self) -> list[dict[str, Any]]: ...

    def names(self) -> list[str]: ...

    def resolve(self, name: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]: ...

    def run(self, name: str, args: dict[str, Any]) -> tuple[str, str, bool]: ...


@dataclass
class Tally:
    """What the controller did, summed over every loop it ran for one purpose (a diagnosis's experts: the
    report's counters)."""

    calls: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tool_calls: int = 0
    snapshots: int = 0
    repairs: int = 0
    regenerations: int = 0
    reflections: int = 0
    backtracks: int = 0
    corrections: Counter[str] = field(default_factory=Counter)

    def paid(self, completion: Completion) -> None:
        if completion.cached:
            self.cached += 1
            return
        self.calls += 1
        self.prompt_tokens += completion.prompt_tokens
        self.completion_tokens += completion.completion_tokens


def parse_json(text: str) -> tuple[Any, bool]:
    """(the JSON value in `text`, whether it needed repair: a fence, prose around it, broken syntax).
    ValueError when not even json-repair finds an object in it."""
    stripped = strip_fences(text)
    try:
        return json.loads(stripped), stripped != text.strip()
    except ValueError:
        repaired = json_repair.loads(text)
        if not isinstance(repaired, dict) or not repaired:
            raise ValueError("no JSON object in the answer") from None
        return repaired, True


@dataclass(frozen=True)
class Agenda:
    """What one agent loop is for: its prompts (system, task, the feedback that answers each action),
    the action that ends it and the model of that action's arguments, how a prompted turn reads as an
    action (value, whether it was repaired), and the stop sequences a prompted turn is sent with and
    cut at: text from one of them on is the model speaking for a tool, never read."""

    system: str
    task: str
    feedback: str
    finish: str
    result: type[BaseModel]
    read: Callable[[str], tuple[Any, bool]] = parse_json
    stop: tuple[str, ...] = ()

    def trimmed(self, text: str) -> str:
        """`text` up to the first stop sequence (an endpoint may ignore `stop`)."""
        cut = min((i for i in (text.find(s) for s in self.stop) if i >= 0), default=len(text))
        return text[:cut].rstrip() if cut < len(text) else text


@dataclass
class Controller:
    """One purpose's loops (`agenda`) over one endpoint and toolbox, paid from one budget and counted in
    one tally; `cache` answers a request asked before."""

    client: LlmClient
    render: Render
    tools: Toolbox
    budget: Budget
    capability: Capability
    tally: Tally
    agenda: Agenda
    cache: ResponseCache | None = None

    def run(
        self, context: dict[str, Any], sample: int = 0, seen: tuple[str, ...] = ()
    ) -> BaseModel:
        """The agenda's result (the finishing action's validated arguments) after a tree search of at
        most `steps` calls; `seen` are signatures of actions already taken for it (`signature`).
        BudgetExhausted, BrainError (EndpointDown included) or GaveUp otherwise."""
        native = self.capability is Capability.TOOLS
        prompted = self.capability is Capability.PROMPTED
        specs = self.tools.specs()
        search = Search(
            Node(
                messages=[
                    {
                        "role": "system",
                        "content": self.render(
                            self.agenda.system,
                            {
                                "native_tools": native,
                                "capability": self.capability.value,
                                "tools": specs,
                            },
                        ),
                    },
                    {"role": "user", "content": self.render(self.agenda.task, context)},
                ],
                seen=set(seen),
            )
        )
        node = search.root
        pending: list[dict[str, Any]] = []  # the backtrack lesson the next request carries
        for _ in range(self.budget.limits.steps):
            self.budget.check()
            completion = self.client.complete(
                node.messages + pending,
                max_tokens=STEP_TOKENS,
                tools=specs if native else None,
                response_format=_step_format(self.tools.names())
                if self.capability is Capability.JSON_SCHEMA
                else None,
                stop=list(self.agenda.stop) if prompted and self.agenda.stop else None,
                temperature=SAMPLING_TEMPERATURE if sample else 0.0,
                timeout=self.budget.remaining_seconds(),
                cache=self.cache,
                sample=sample,
            )
            self.tally.paid(completion)
            if not completion.cached:
                self.budget.spend(completion.prompt_tokens, completion.completion_tokens)
            text = self.agenda.trimmed(completion.text)
            turn = self._actions(completion, text)
            node = search.expand(node)
            node.messages += [
                *pending,
                _assistant(completion, text, [call_id for call_id, _, _ in turn]),
            ]
            pending = []
            result = self._answer(node, turn)
            if result is not None and not search.low(node):
                return result
            if result is not None:
                search.candidates.append((node.score, result))
            if search.low(node) and (result is not None or node.scored):
                self.tally.backtracks += 1
                node = search.backtrack(node)
                pending = [self._reply("", "backtrack", abandoned=search.abandoned)]
        best = search.best_candidate()
        if best is None:
            raise GaveUp(f"no {self.agenda.finish} in {self.budget.limits.steps} steps")
        return best

    def _answer(
        self, node: Node, turn: list[tuple[str, AgentAction | None, str]]
    ) -> BaseModel | None:
        """Answer every action of a turn into `node` (observations, reflections, corrections); the
        result when the turn finished validly. The observations of earlier turns fold to their keys."""
        result: BaseModel | None = None
        observed: list[tuple[int, str, str]] = []
        for call_id, action, error in turn:
            if action is not None and action.action in (self.agenda.finish, REFLECT):
                try:
                    if action.action == self.agenda.finish:
                        result = self.agenda.result.model_validate(action.args)
                        continue
                    reflection = Reflection.model_validate(action.args)
                except ValidationError as exc:
                    action, error = None, _first_error(exc)
                else:
                    node.score, node.hypothesis, node.note, node.scored = (
                        reflection.score,
                        reflection.hypothesis,
                        reflection.note,
                        True,
                    )
                    self.tally.reflections += 1
                    node.messages.append(self._reply(call_id, "reflected", score=reflection.score))
                    continue
            if action is None:
                self.tally.regenerations += 1
                node.messages.append(self._reply(call_id, "invalid", error=error))
                continue
            reply, observation = self._observe(call_id, action, node.seen)
            node.messages.append(reply)
            if observation:
                observed.append((len(node.messages) - 1, action.action, observation))
                node.observed.append(action.action)
        if observed and self.tools.limit:
            for index, tool, text in node.shown:
                key = self.tools.snapshots.keep(text)
                node.messages[index] = self._reply(
                    node.messages[index].get("tool_call_id", ""),
                    "observation",
                    tool=tool,
                    text=f"[stored as {key}: call expand with key {key!r} to read it again]",
                )
            node.shown = observed
        return result

    def _observe(
        self, call_id: str, action: AgentAction, seen: set[str]
    ) -> tuple[dict[str, Any], str]:
        """(the message answering the action, the observation's whole text or '' for a correction)."""
        if action.action not in self.tools.names():
            self.tally.corrections["unknown_tool"] += 1
            return self._reply(call_id, "unknown_tool", tool=action.action), ""
        if signature(action.action, action.args) in seen:
            self.tally.corrections["repeated_action"] += 1
            return self._reply(call_id, "repeated_action", tool=action.action), ""
        seen.add(signature(action.action, action.args))
        try:
            text, whole, cut = self.tools.run(action.action, action.args)
        except (ValueError, TypeError) as exc:
            return self._reply(call_id, "bad_args", tool=action.action, error=str(exc)), ""
        self.tally.tool_calls += 1
        self.tally.snapshots += cut
        return self._reply(call_id, "observation", tool=action.action, text=text), whole

    def _actions(
        self, completion: Completion, text: str
    ) -> list[tuple[str, AgentAction | None, str]]:
        """Every action of the model's turn as (the tool call's id or '', the action, why there is
        none): an endpoint may answer with several tool calls at once (parallel tool calls), and
        observing them in one turn costs one call instead of several. `text` is the turn's text as trimmed."""
        if completion.tool_calls:
            return [self._tool_action(call) for call in completion.tool_calls]
        return [self._text_action(text)]

    def _tool_action(self, call: FunctionCall) -> tuple[str, AgentAction | None, str]:
        try:
            args, repaired = parse_json(call.arguments or "{}")
        except ValueError as exc:
            return call.id, None, f"the arguments of {call.name} are not JSON ({exc})"
        self.tally.repairs += repaired
        name, args = self.tools.resolve(call.name, args if isinstance(args, dict) else {})
        return call.id, AgentAction(action=name, args=args), ""

    def _text_action(self, text: str) -> tuple[str, AgentAction | None, str]:
        try:
            value, repaired = self.agenda.read(text)
        except ValueError as exc:
            return "", None, str(exc)
        self.tally.repairs += repaired
        try:
            action = AgentAction.model_validate(value)
        except ValidationError as exc:
            return "", None, _first_error(exc)
        name, args = self.tools.resolve(action.action, action.args)
        return "", action.model_copy(update={"action": name, "args": args}), ""

    def _reply(self, call_id: str, kind: str, **context: Any) -> dict[str, Any]:
        text = self.render(
            self.agenda.feedback,
            {
                "kind": kind,
                "tool": "",
                "text": "",
                "error": "",
                "tools": self.tools.names(),
                "native_tools": self.capability is Capability.TOOLS,
                "capability": self.capability.value,
                **context,
            },
        )
        return (
            {"role": "tool", "tool_call_id": call_id, "content": text}
            if call_id
            else {"role": "user", "content": text}
        )


def signature(action: str, args: dict[str, Any]) -> str:
    """An action as the controller recognizes its repeat."""
    return json.dumps([action, args], sort_keys=True, default=str)


def _assistant(completion: Completion, text: str, call_ids: list[str]) -> dict[str, Any]:
    """The model's turn as the next request repeats it (`text`, trimmed at the agenda's stops): with
    the tool calls the controller answers."""
    if not any(call_ids):
        return {"role": "assistant", "content": text}
    return {
        "role": "assistant",
        "content": text or None,
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in completion.tool_calls
            if c.id in call_ids
        ],
    }


def _step_format(names: list[str]) -> dict[str, Any]:
    """The strict schema of one turn: the action one of the tools' names (a constrained decoder
    cannot invent an "explore"), every field required, nothing else allowed."""
    return {
        "type": "json_schema",
        "json_schema": {
            "name": "action",
            "schema": {
                "type": "object",
                "properties": {
                    "thought": {"type": "string"},
                    "action": {"type": "string", "enum": names},
                    "args": {"type": "object"},
                },
                "required": ["thought", "action", "args"],
                "additionalProperties": False,
            },
        },
    }


def _first_error(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:3])
