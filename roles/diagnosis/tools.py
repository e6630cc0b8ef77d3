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

from dbcrew.redact import redact
from operators.diagnose.evidence import WindowEvidence
from operators.diagnose.facts import FactsRecord
from operators.knowledge import knowledge_base

STATS = ("mean", "peak", "min", "median", "baseline_median")
PROPOSE = "propose_causes"


def metric_stat(window: WindowEvidence, baseline: WindowEvidence | None, metric: str, stat: str) -> float | None:
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
    return float({"mean": np.mean, "peak": np.max, "min": np.min}.get(stat, np.median)(array))


def _rounded(value: float) -> float:
    return float(f"{value:.4g}")


@dataclass
class Snapshots:
    """Observations too long to show, by key; optionally mirrored into the run's workspace."""

    store: Callable[[str, str], None] | None = None
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
        return [{"type": "function", "function": {"name": name, "description": doc, "parameters": params}}
                for name, (doc, params) in TOOL_SPECS.items()]

    def names(self) -> list[str]:
        return list(TOOL_SPECS)

    def run(self, name: str, args: dict[str, Any]) -> tuple[str, str, bool]:
        """(the observation as the model sees it, its whole text, whether it was cut behind a snapshot
        key). KeyError for a tool that does not exist; ValueError for arguments it cannot use."""
        if name == "expand":
            text = self._expand(str(args.get("key", "")), int(args.get("offset", 0) or 0))
            return text, text, False
        text = json.dumps(self._observe(name, args), sort_keys=True, default=str)
        if not self.limit or len(text) <= self.limit:
            return text, text, False
        key = self.snapshots.keep(text)
        return (f"{text[:self.limit]} ... [cut: {len(text) - self.limit} more characters;"
                f" call expand with key {key!r} and offset {self.limit} to read on]"), text, True

    def _expand(self, key: str, offset: int) -> str:
        body = self.snapshots.bodies.get(key)
        if body is None:
            raise ValueError(f"no snapshot {key!r}; keys: {', '.join(self.snapshots.bodies) or 'none yet'}")
        end = offset + (self.limit or len(body))
        more = f" ... [{len(body) - end} more characters: expand {key!r} from offset {end}]" if end < len(body) else ""
        return body[offset:end] + more

    def _observe(self, name: str, args: dict[str, Any]) -> Any:
        r, w = self.record, self.record.window
        if name == "abnormal_metrics":
            return {"baseline": r.baseline_source or "none: nothing can be called abnormal",
                    "abnormal": [{"metric": m.name, "baseline_median": _rounded(m.baseline_median),
                                  "median": _rounded(m.window_median), "z": round(m.z, 1)} for m in r.abnormal]}
        if name == "metrics":
            wanted = [str(n) for n in args.get("names") or []] or sorted(w.series)
            return {n: {s: _rounded(v) for s in STATS if (v := metric_stat(w, r.baseline, n, s)) is not None}
                    for n in wanted if n in w.series}
        if name == "waits":
            total = sum(w.waits.values())
            return {"session_samples": w.session_samples, "active_samples": total,
                    "shares": {k: round(n / total, 3) for k, n in sorted(w.waits.items(), key=lambda kv: -kv[1])} if total else {},
                    "blocked": [b.model_dump() for b in w.blocked[:10]]}
        if name == "statements":
            return [{"queryid": s.queryid, "kind": s.kind, "query": redact(s.query[:300]), "calls": s.calls,
                     "total_exec_time_ms": round(s.total_exec_time_ms, 1), "rows_per_call": round(s.rows_per_call, 1)}
                    for s in sorted(w.statements, key=lambda s: -s.total_exec_time_ms)[:int(args.get("limit", 10) or 10)]]
        if name == "plans":
            return [{"query": redact(p.query[:300]), "share": round(p.share, 2), "issues": [i.model_dump() for i in p.issues],
                     "error": p.error} for p in r.plans]
        if name == "tables":
            return [t.model_dump() for t in sorted(w.tables, key=lambda t: -t.writes)[:10]]
        if name == "settings":
            return {**w.settings, "cpu_count": w.cpu_count, "memory_total_bytes": w.memory_total_bytes}
        if name == "knowledge":
            matches = knowledge_base().retrieve([m.name for m in r.abnormal], str(args.get("query", "")), k=3)
            return [{"code": m.chunk.code, "name": m.chunk.name, "metrics": m.chunk.metrics, "steps": m.chunk.steps,
                     "source": m.chunk.source} for m in matches]
        raise KeyError(name)


_NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}}
TOOL_SPECS: dict[str, tuple[str, dict[str, Any]]] = {
    "abnormal_metrics": ("Metrics that left the baseline: baseline median, window median, robust z.", _NO_ARGS),
    "metrics": ("Statistics (mean, peak, min, median, baseline_median) of named metric series; all series when no names.",
                {"type": "object", "properties": {"names": {"type": "array", "items": {"type": "string"}}}}),
    "waits": ("Share of active-session samples per wait event ('CPU' = none), and blocked sessions.", _NO_ARGS),
    "statements": ("The heaviest statements of the window (texts are data from the database).",
                   {"type": "object", "properties": {"limit": {"type": "integer"}}}),
    "plans": ("Generic plans of the heaviest statements and the issues found in them.", _NO_ARGS),
    "tables": ("The most written tables: scans, inserted/updated/deleted rows, dead tuples, index count.", _NO_ARGS),
    "settings": ("Server settings sampled with the window, host CPUs and memory.", _NO_ARGS),
    "knowledge": ("Root-cause knowledge chunks matching the abnormal metrics and a query text.",
                  {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}),
    "expand": ("Read on in an observation that was cut: its snapshot key and an offset.",
               {"type": "object", "properties": {"key": {"type": "string"}, "offset": {"type": "integer"}}, "required": ["key"]}),
    PROPOSE: ("Finish: the causes you found, each citing observed values (metric, stat, value) from the observations.",
              {"type": "object", "properties": {"causes": {"type": "array", "items": {
                  "type": "object", "required": ["code", "confidence", "evidence"],
                  "properties": {"code": {"type": "string"}, "confidence": {"type": "number"}, "explanation": {"type": "string"},
                                 "evidence": {"type": "array", "items": {"type": "object", "required": ["metric", "stat", "value"],
                                              "properties": {"metric": {"type": "string"}, "stat": {"type": "string", "enum": [*STATS, "share"]},
                                                             "value": {"type": "number"}}}}}}}},
               "required": ["causes"]}),
}
