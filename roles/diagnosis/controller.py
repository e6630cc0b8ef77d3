"""RCAgent's controller: one expert's Thought/Action/Observation turns against the endpoint, as
D-Bot's tree search (tree.py: reflect, score, backtrack).

Per endpoint capability the model acts through native tool calls, through JSON constrained by a
schema, or through JSON asked for in the prompt; all three end in the same `ExpertAction`. The
controller, not the model, keeps the loop sane:
- an answer that is not clean JSON is repaired by json-repair first (fences, prose, trailing
  commas), and only an answer still unusable is asked for again (a regeneration);
- an unknown tool or an action repeated with the same arguments gets a corrective message, not an
  observation, and both are counted;
- an observation longer than the limit is cut behind a snapshot key (DiagnosisTools), and once a
  newer turn observes, an older turn's observations are shown by their keys alone: each call carries
  one turn's observations, not the whole history of them (without a limit nothing is cut or folded);
- several tool calls in one turn (parallel tool calls) are all answered: one call, not several;
- every call is paid from the diagnosis's budget first (BudgetExhausted stops the loop between calls),
  and answered from the response cache when the same request was asked before.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import json_repair
from pydantic import BaseModel, Field, ValidationError

from dbcrew.llm.base import BrainError
from dbcrew.llm.client import (
    Completion,
    LlmClient,
    Render,
    ResponseCache,
    ToolCall,
    strip_fences,
)
from dbcrew.settings import Capability
from roles.diagnosis.budget import Budget
from roles.diagnosis.guard import ProposedCause
from roles.diagnosis.tools import PROPOSE, REFLECT, DiagnosisTools
from roles.diagnosis.tree import Node, Search

SAMPLING_TEMPERATURE = 0.7  # self-consistency needs samples that can differ


class ExpertAction(BaseModel):
    """One turn of an expert: its thought, the tool it calls and that tool's arguments."""

    thought: str = ""
    action: str
    args: dict[str, Any] = Field(default_factory=dict)


class CauseProposal(BaseModel):
    """The arguments of propose_causes: the causes an expert puts forward."""

    causes: list[ProposedCause]


class Reflection(BaseModel):
    hypothesis: str = ""
    score: float = Field(ge=0, le=1)
    note: str = ""


class GaveUp(BrainError):
    """The expert used its steps without proposing causes."""


@dataclass
class Tally:
    """What the controller did, summed over every expert of a diagnosis (the report's counters)."""

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


@dataclass
class Controller:
    client: LlmClient
    render: Render
    tools: DiagnosisTools
    budget: Budget
    capability: Capability
    tally: Tally
    cache: ResponseCache | None = None

    def run_expert(
        self, expert: str, context: dict[str, Any], sample: int = 0
    ) -> list[ProposedCause]:
        """The causes one expert proposes after a tree search of at most `steps` calls (tree.py).
        BudgetExhausted, BrainError (EndpointDown included) or GaveUp otherwise."""
        native = self.capability is Capability.TOOLS
        specs = self.tools.specs()
        search = Search(
            Node(
                messages=[
                    {
                        "role": "system",
                        "content": self.render(
                            "diagnose_system.j2", {"native_tools": native, "tools": specs}
                        ),
                    },
                    {
                        "role": "user",
                        "content": self.render("diagnose_expert.j2", {**context, "expert": expert}),
                    },
                ]
            )
        )
        node = search.root
        pending: list[dict[str, Any]] = []  # the backtrack lesson the next request carries
        for _ in range(self.budget.limits.steps):
            self.budget.check()
            completion = self.client.complete(
                node.messages + pending,
                tools=specs if native else None,
                response_format=_step_format()
                if self.capability is Capability.JSON_SCHEMA
                else None,
                temperature=SAMPLING_TEMPERATURE if sample else 0.0,
                timeout=self.budget.remaining_seconds(),
                cache=self.cache,
                sample=sample,
            )
            self.tally.paid(completion)
            if not completion.cached:
                self.budget.spend(completion.prompt_tokens, completion.completion_tokens)
            turn = self._actions(completion)
            node = search.expand(node)
            node.messages += [*pending, _assistant(completion, [call_id for call_id, _, _ in turn])]
            pending = []
            proposed = self._answer(node, turn)
            if proposed is not None and not search.low(node):
                return proposed
            if proposed is not None:
                search.candidates.append((node.score, proposed))
            if search.low(node) and (proposed is not None or node.scored):
                self.tally.backtracks += 1
                node = search.backtrack(node)
                pending = [self._reply("", "backtrack", abandoned=search.abandoned)]
        best = search.best_candidate()
        if best is None:
            raise GaveUp(f"no causes proposed in {self.budget.limits.steps} steps")
        return best

    def _answer(
        self, node: Node, turn: list[tuple[str, ExpertAction | None, str]]
    ) -> list[ProposedCause] | None:
        """Answer every action of a turn into `node` (observations, reflections, corrections); the
        proposal when the turn made a valid one. The observations of earlier turns fold to their keys."""
        proposed: list[ProposedCause] | None = None
        observed: list[tuple[int, str, str]] = []
        for call_id, action, error in turn:
            if action is not None and action.action in (PROPOSE, REFLECT):
                try:
                    if action.action == PROPOSE:
                        proposed = CauseProposal.model_validate(action.args).causes
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
        return proposed

    def _observe(
        self, call_id: str, action: ExpertAction, seen: set[str]
    ) -> tuple[dict[str, Any], str]:
        """(the message answering the action, the observation's whole text or '' for a correction)."""
        if action.action not in self.tools.names():
            self.tally.corrections["unknown_tool"] += 1
            return self._reply(call_id, "unknown_tool", tool=action.action), ""
        signature = json.dumps([action.action, action.args], sort_keys=True, default=str)
        if signature in seen:
            self.tally.corrections["repeated_action"] += 1
            return self._reply(call_id, "repeated_action", tool=action.action), ""
        seen.add(signature)
        try:
            text, whole, cut = self.tools.run(action.action, action.args)
        except (ValueError, TypeError) as exc:
            return self._reply(call_id, "bad_args", tool=action.action, error=str(exc)), ""
        self.tally.tool_calls += 1
        self.tally.snapshots += cut
        return self._reply(call_id, "observation", tool=action.action, text=text), whole

    def _actions(self, completion: Completion) -> list[tuple[str, ExpertAction | None, str]]:
        """Every action of the model's turn as (the tool call's id or '', the action, why there is
        none): an endpoint may answer with several tool calls at once (parallel tool calls), and
        observing them in one turn costs one call instead of several."""
        if completion.tool_calls:
            return [self._tool_action(call) for call in completion.tool_calls]
        return [self._text_action(completion.text)]

    def _tool_action(self, call: ToolCall) -> tuple[str, ExpertAction | None, str]:
        try:
            args, repaired = parse_json(call.arguments or "{}")
        except ValueError as exc:
            return call.id, None, f"the arguments of {call.name} are not JSON ({exc})"
        self.tally.repairs += repaired
        name, args = self.tools.resolve(call.name, args if isinstance(args, dict) else {})
        return call.id, ExpertAction(action=name, args=args), ""

    def _text_action(self, text: str) -> tuple[str, ExpertAction | None, str]:
        try:
            value, repaired = parse_json(text)
        except ValueError as exc:
            return "", None, str(exc)
        self.tally.repairs += repaired
        if isinstance(value, dict) and "causes" in value and "action" not in value:
            value = {"action": PROPOSE, "args": value}  # a bare final answer is a proposal
        try:
            action = ExpertAction.model_validate(value)
        except ValidationError as exc:
            return "", None, _first_error(exc)
        name, args = self.tools.resolve(action.action, action.args)
        return "", action.model_copy(update={"action": name, "args": args}), ""

    def _reply(self, call_id: str, kind: str, **context: Any) -> dict[str, Any]:
        text = self.render(
            "diagnose_feedback.j2",
            {
                "kind": kind,
                "tool": "",
                "text": "",
                "error": "",
                "tools": self.tools.names(),
                "native_tools": self.capability is Capability.TOOLS,
                **context,
            },
        )
        return (
            {"role": "tool", "tool_call_id": call_id, "content": text}
            if call_id
            else {"role": "user", "content": text}
        )


def _assistant(completion: Completion, call_ids: list[str]) -> dict[str, Any]:
    """The model's turn as the next request repeats it: with the tool calls the controller answers."""
    if not any(call_ids):
        return {"role": "assistant", "content": completion.text}
    return {
        "role": "assistant",
        "content": completion.text or None,
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in completion.tool_calls
            if c.id in call_ids
        ],
    }


def _step_format() -> dict[str, Any]:
    return {
        "type": "json_schema",
        "json_schema": {"name": "action", "schema": ExpertAction.model_json_schema()},
    }


def _first_error(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:3])
