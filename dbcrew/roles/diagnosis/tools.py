"""The experts' tools: the registry's diagnosis views (dbcrew/operators/diagnose/views.py) offered as one
`observe` tool, with `expand`, `reflect` and the final `propose_causes`.

Each expert observes the views its area calls for, matched as the planner matches operators to an
alert (D-Bot matches each expert's tools to the anomaly): the expert's passages (its description,
its knowledge chunks, how its causes present) against each view's description, by the same index
and floor (dbcrew/roles/brains/composing.py), with the views of the window as a whole that every
expert observes (GENERAL_VIEWS). Every view over the floor joins, not only those close to the best
as for an alert: an expert's area spans several views (the configuration expert's WAL waits score
0.19 against its settings' 0.41, and it needs both). A lock expert observes the wait events, not
the plans; the query expert the statements and plans, not the settings.

Every observation is JSON; one longer than the limit is kept whole under a snapshot key and shown
as its head plus that key, which the `expand` tool pages through (dbcrew/roles/agent/snapshots.py): a
long statement list costs the prompt its first lines, not all of them. Database text (statement
texts, table names) travels inside these observations, so it reaches a prompt only as JSON data
inside a <data> fence, never as instructions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from dbcrew.operators.diagnose.experts import experts_by_code
from dbcrew.operators.diagnose.facts import FactsRecord
from dbcrew.operators.diagnose.views import GENERAL_VIEWS, STATS
from dbcrew.operators.registry import Operator, Surface, catalogue, exposed, get
from dbcrew.roles.agent.snapshots import Snapshots
from dbcrew.roles.agent.tree import REFLECT
from dbcrew.roles.brains.composing import MATCH_FLOOR, match_scores, passages, words
from dbcrew.roles.brains.playbooks import EXPERT_PREFIX
from dbcrew.vocabulary import RootCauseCode

OBSERVE, EXPAND, PROPOSE = "observe", "expand", "propose_causes"


def views() -> list[Operator]:
    """What `observe` may show: the registry's operators of the diagnosis surface."""
    return exposed(Surface.DIAGNOSIS)


@lru_cache(maxsize=32)
def views_for(expert: str) -> tuple[Operator, ...]:
    """The views `expert` observes, in registration order: the general ones and those its passages
    match over the floor. An expert the catalogue does not hold, or whose passages match no view, observes every
    view (as every expert did before views were matched)."""
    every = tuple(views())
    entry = next((e for e in catalogue() if e.name == EXPERT_PREFIX + expert), None)
    if entry is None:
        return every
    specific = [v for v in every if v.name not in GENERAL_VIEWS]
    documents = [
        [" ".join(words(f"{v.name.replace('_', ' ')}. {v.description}"))] for v in specific
    ]
    scores = match_scores(passages(entry), documents)
    matched = {view.name for view, score in zip(specific, scores) if score >= MATCH_FLOOR}
    if not matched:
        return every
    return tuple(v for v in every if v.name in GENERAL_VIEWS | matched)


@dataclass
class DiagnosisTools:
    """The tools one diagnosis offers an expert, over one facts record: `offered` are the views its
    `observe` shows (every view until `for_expert` narrows them)."""

    record: FactsRecord
    limit: int = 1_200
    snapshots: Snapshots = field(default_factory=Snapshots)
    offered: tuple[Operator, ...] = field(default_factory=lambda: tuple(views()))

    def for_expert(self, expert: str) -> DiagnosisTools:
        """The same tools over the same record and snapshots, observing the views `expert` matches."""
        return replace(self, offered=views_for(expert))

    def specs(self) -> list[dict[str, Any]]:
        """OpenAI function specs of every tool, the final `propose_causes` included."""
        return [
            {
                "type": "function",
                "function": {"name": name, "description": doc, "parameters": params},
            }
            for name, (doc, params) in tool_specs(self.offered).items()
        ]

    def names(self) -> list[str]:
        """What an action may name: the tools, and a view directly (`waits` for `observe` what=waits)."""
        return [OBSERVE, *(op.name for op in self.offered), EXPAND, REFLECT, PROPOSE]

    @staticmethod
    def resolve(name: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """`observe` what=<view> as the view it names, so both spellings are one action."""
        if name == OBSERVE and "what" in args:
            return str(args["what"]), {k: v for k, v in args.items() if k != "what"}
        return name, args

    def run(self, name: str, args: dict[str, Any]) -> tuple[str, str, bool]:
        """(the observation as the model sees it, its whole text, whether it was cut behind a snapshot
        key). KeyError for a tool that does not exist; ValueError for arguments it cannot use."""
        if name == EXPAND:
            text = self.snapshots.expand(
                str(args.get("key", "")), int(args.get("offset", 0) or 0), self.limit
            )
            return text, text, False
        if name not in {op.name for op in self.offered}:
            raise KeyError(f"{name} is not a view this expert observes")
        text = get(name).run(self.record, args).summary
        shown, key = self.snapshots.show(text, self.limit)
        return shown, text, key is not None


def diagnosis_codes() -> list[str]:
    """The codes an expert may propose: the root causes and the finding codes the knowledge owns."""
    return sorted({*RootCauseCode, *experts_by_code()})


def observe_spec(offered: Sequence[Operator] | None = None) -> tuple[str, dict[str, Any]]:
    """`observe`, generated from the registry: `what` is the enum of the views (`offered`, else every
    one), and the parameters are the union of theirs (each view's schema as its model declares it)."""
    ops = list(views() if offered is None else offered)
    properties: dict[str, Any] = {"what": {"type": "string", "enum": [op.name for op in ops]}}
    for op in ops:
        properties.update(op.params_schema().get("properties", {}))
    doc = (
        "View the window. "
        + "; ".join(f"{op.name}: {op.description.rstrip('.')}" for op in ops)
        + "."
    )
    return doc, {"type": "object", "required": ["what"], "properties": properties}


def tool_specs(offered: Sequence[Operator] | None = None) -> dict[str, tuple[str, dict[str, Any]]]:
    """The experts' tools, terse because every call of a conversation carries them: one `observe`
    over the views (not a function per view), `expand`, and `propose_causes` whose codes are an enum
    (the vocabulary is stated here once, and an endpoint with structured output enforces it)."""
    cited = {
        "type": "object",
        "required": ["metric", "stat", "value"],
        "properties": {
            "metric": {"type": "string"},
            "stat": {"type": "string", "enum": [*STATS, "share"]},
            "value": {"type": "number"},
        },
    }
    cause = {
        "type": "object",
        "required": ["code", "confidence", "evidence"],
        "properties": {
            "code": {"type": "string", "enum": diagnosis_codes()},
            "confidence": {"type": "number"},
            "explanation": {"type": "string"},
            "evidence": {"type": "array", "items": cited},
        },
    }
    return {
        OBSERVE: observe_spec(offered),
        EXPAND: (
            "Read a cut or stored observation on.",
            {
                "type": "object",
                "required": ["key"],
                "properties": {"key": {"type": "string"}, "offset": {"type": "integer"}},
            },
        ),
        REFLECT: (
            "Score your line of inquiry: `hypothesis` (a code), `score` 0-1 (how well the observations support it), "
            "`note`. Below 0.4 the search backtracks to its best earlier point.",
            {
                "type": "object",
                "required": ["hypothesis", "score"],
                "properties": {
                    "hypothesis": {"type": "string"},
                    "score": {"type": "number"},
                    "note": {"type": "string"},
                },
            },
        ),
        PROPOSE: (
            "Finish: causes citing observed values (a wait share: metric wait:<prefix>, stat share).",
            {
                "type": "object",
                "required": ["causes"],
                "properties": {"causes": {"type": "array", "items": cause}},
            },
        ),
    }
