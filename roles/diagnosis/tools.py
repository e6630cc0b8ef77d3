"""The experts' tools: read-only views of the diagnosis workspace (the sampled window, its baseline,
the abnormal metrics, waits, statements, plans) and the knowledge retrieval.

Every observation is JSON; one longer than the limit is kept whole under a snapshot key and shown
as its head plus that key, which the `expand` tool pages through (RCAgent's observation
snapshots): a long statement list costs the prompt its first lines, not all of them. Database text
(statement texts, table names) travels inside these observations, so it reaches a prompt only as
JSON data inside a <data> fence, never as instructions.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from dbcrew.redact import redact
from dbcrew.vocabulary import RootCauseCode
from operators.diagnose.evidence import WindowEvidence
from operators.diagnose.experts_index import experts_by_code
from operators.diagnose.facts import FactsRecord
from operators.knowledge import knowledge_base

STATS = ("mean", "peak", "min", "median", "baseline_median")
PROPOSE = "propose_causes"


def metric_stat(
    window: WindowEvidence, baseline: WindowEvidence | None, metric: str, stat: str
) -> float | None:
    """The observed value an expert may cite: a series statistic, a baseline median, or a wait
    share (`metric` 'wait:Lock:' is the share of active-session samples waiting on Lock:*). None
    when the workspace holds no such observation."""
    if metric.startswith("wait:"):
        return window.wait_share(metric.removeprefix("wait:")) if window.waits else None
    source = baseline if stat == "baseline_median" else window
    values = source.series.get(metric) if source is not None else None
    if not values:
        return None
    array = np.asarray(values, dtype=float)
    reducers: dict[str, Callable[[npt.NDArray[np.float64]], Any]] = {
        "mean": np.mean,
        "peak": np.max,
        "min": np.min,
    }
    return float(reducers.get(stat, np.median)(array))


def _rounded(value: float) -> float:
    return float(f"{value:.4g}")


@dataclass
class Snapshots:
    """Observations too long to show, by key; optionally mirrored into the run's workspace."""

    store: Callable[[str, str], object] | None = None
    bodies: dict[str, str] = field(default_factory=dict)

    def keep(self, text: str) -> str:
        key = f"obs-{len(self.bodies) + 1}"
        self.bodies[key] = text
        if self.store is not None:
            self.store(f"llm_snapshot_{key}", text)
        return key


@dataclass
class DiagnosisTools:
    """The tools one diagnosis offers its experts, over one facts record."""

    record: FactsRecord
    limit: int = 1_200
    snapshots: Snapshots = field(default_factory=Snapshots)

    def specs(self) -> list[dict[str, Any]]:
        """OpenAI function specs of every tool, the final `propose_causes` included."""
        return [
            {
                "type": "function",
                "function": {"name": name, "description": doc, "parameters": params},
            }
            for name, (doc, params) in tool_specs().items()
        ]

    def names(self) -> list[str]:
        """What an action may name: the tools, and a view directly (`waits` for `observe` what=waits)."""
        return [OBSERVE, *VIEWS, EXPAND, REFLECT, PROPOSE]

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
            text = self._expand(str(args.get("key", "")), int(args.get("offset", 0) or 0))
            return text, text, False
        text = json.dumps(self._observe(name, args), sort_keys=True, default=str)
        if not self.limit or len(text) <= self.limit:
            return text, text, False
        key = self.snapshots.keep(text)
        return (
            (
                f"{text[: self.limit]} ... [cut: {len(text) - self.limit} more characters;"
                f" call expand with key {key!r} and offset {self.limit} to read on]"
            ),
            text,
            True,
        )

    def _expand(self, key: str, offset: int) -> str:
        body = self.snapshots.bodies.get(key)
        if body is None:
            raise ValueError(
                f"no snapshot {key!r}; keys: {', '.join(self.snapshots.bodies) or 'none yet'}"
            )
        end = offset + (self.limit or len(body))
        more = (
            f" ... [{len(body) - end} more characters: expand {key!r} from offset {end}]"
            if end < len(body)
            else ""
        )
        return body[offset:end] + more

    def _observe(self, name: str, args: dict[str, Any]) -> Any:
        r, w = self.record, self.record.window
        if name == "abnormal":
            return {
                "baseline": r.baseline_source or "none: nothing can be called abnormal",
                "abnormal": [
                    {
                        "metric": m.name,
                        "baseline_median": _rounded(m.baseline_median),
                        "median": _rounded(m.window_median),
                        "z": round(m.z, 1),
                    }
                    for m in r.abnormal
                ],
            }
        if name == "metrics":
            wanted = [str(n) for n in args.get("names") or []] or sorted(w.series)
            return {
                n: {
                    s: _rounded(v)
                    for s in STATS
                    if (v := metric_stat(w, r.baseline, n, s)) is not None
                }
                for n in wanted
                if n in w.series
            }
        if name == "waits":
            total = sum(w.waits.values())
            return {
                "session_samples": w.session_samples,
                "active_samples": total,
                "shares": {
                    k: round(n / total, 3)
                    for k, n in sorted(w.waits.items(), key=lambda kv: -kv[1])
                }
                if total
                else {},
                "blocked": [b.model_dump() for b in w.blocked[:10]],
            }
        if name == "statements":
            return [
                {
                    "queryid": s.queryid,
                    "kind": s.kind,
                    "query": redact(s.query[:300]),
                    "calls": s.calls,
                    "total_exec_time_ms": round(s.total_exec_time_ms, 1),
                    "rows_per_call": round(s.rows_per_call, 1),
                }
                for s in sorted(w.statements, key=lambda s: -s.total_exec_time_ms)[
                    : int(args.get("limit", 10) or 10)
                ]
            ]
        if name == "plans":
            return [
                {
                    "query": redact(p.query[:300]),
                    "share": round(p.share, 2),
                    "issues": [i.model_dump() for i in p.issues],
                    "error": p.error,
                }
                for p in r.plans
            ]
        if name == "tables":
            return [t.model_dump() for t in sorted(w.tables, key=lambda t: -t.writes)[:10]]
        if name == "settings":
            return {
                **w.settings,
                "cpu_count": w.cpu_count,
                "memory_total_bytes": w.memory_total_bytes,
            }
        if name == "knowledge":
            matches = knowledge_base().retrieve(
                [m.name for m in r.abnormal], str(args.get("query", "")), k=3
            )
            return [
                {
                    "code": m.chunk.code,
                    "name": m.chunk.name,
                    "metrics": m.chunk.metrics,
                    "steps": m.chunk.steps,
                    "source": m.chunk.source,
                }
                for m in matches
            ]
        raise KeyError(name)


OBSERVE, EXPAND, REFLECT = "observe", "expand", "reflect"
VIEWS = ("abnormal", "metrics", "waits", "statements", "plans", "tables", "settings", "knowledge")


def diagnosis_codes() -> list[str]:
    """The codes an expert may propose: the root causes and the finding codes the knowledge owns."""
    return sorted({*RootCauseCode, *experts_by_code()})


def tool_specs() -> dict[str, tuple[str, dict[str, Any]]]:
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
        OBSERVE: (
            "View the window. abnormal: all metrics off the baseline; metrics: stats of `names` (all if none); "
            "waits: shares of active samples; statements: heaviest (`limit`); plans: their issues; tables: most "
            "written; settings; knowledge: chunks for `query`.",
            {
                "type": "object",
                "required": ["what"],
                "properties": {
                    "what": {"type": "string", "enum": list(VIEWS)},
                    "names": {"type": "array", "items": {"type": "string"}},
                    "limit": {"type": "integer"},
                    "query": {"type": "string"},
                },
            },
        ),
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
