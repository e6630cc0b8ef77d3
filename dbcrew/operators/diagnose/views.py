"""The views the LLM diagnosis's experts observe: registered operators of the diagnosis surface over
the sampled facts record (the window, its baseline, the abnormal metrics, waits, statements, plans)
and the knowledge retrieval.

Every view answers JSON (its Observation's summary); dbcrew/roles/diagnosis/tools.py offers them as one
`observe` tool whose `what` and parameters come from this registry, and keeps long answers behind
snapshot keys. Database text (statement texts, table names) travels inside these observations, so
it reaches a prompt only as JSON data inside a <data> fence, never as instructions. Their parameter
models ignore what they do not use: `observe` carries the parameters of every view in one call.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field

from dbcrew.models import Role
from dbcrew.operators.diagnose.facts import FactsRecord
from dbcrew.operators.knowledge import knowledge_base
from dbcrew.operators.registry import Observation, Surface, operator
from dbcrew.operators.window.evidence import WindowEvidence
from dbcrew.redact import redact
from dbcrew.vocabulary import Category

STATS = ("mean", "peak", "min", "median", "baseline_median")
VIEW = frozenset({Surface.DIAGNOSIS})


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


def _json(value: Any) -> Observation:
    return Observation(summary=json.dumps(value, sort_keys=True, default=str))


class ViewParams(BaseModel):
    model_config = ConfigDict(extra="ignore")


class MetricsParams(ViewParams):
    names: list[str] = Field(default_factory=list, description="series names; all when empty")


class StatementsParams(ViewParams):
    limit: int = Field(10, ge=1, le=50, description="how many of the heaviest statements")


class KnowledgeParams(ViewParams):
    query: str = Field("", description="what to retrieve knowledge chunks for")


@operator(role=Role.RETRIEVER, category=Category.DIAGNOSE, surfaces=VIEW)
def abnormal(record: FactsRecord, _params: ViewParams) -> Observation:
    """All metrics off the baseline."""
    return _json(
        {
            "baseline": record.baseline_source or "none: nothing can be called abnormal",
            "abnormal": [
                {
                    "metric": m.name,
                    "baseline_median": _rounded(m.baseline_median),
                    "median": _rounded(m.window_median),
                    "z": round(m.z, 1),
                }
                for m in record.abnormal
            ],
        }
    )


@operator(role=Role.RETRIEVER, category=Category.DIAGNOSE, surfaces=VIEW)
def metrics(record: FactsRecord, params: MetricsParams) -> Observation:
    """Statistics of the named series (all if none)."""
    w = record.window
    return _json(
        {
            n: {
                s: _rounded(v)
                for s in STATS
                if (v := metric_stat(w, record.baseline, n, s)) is not None
            }
            for n in params.names or sorted(w.series)
            if n in w.series
        }
    )


@operator(role=Role.RETRIEVER, category=Category.DIAGNOSE, surfaces=VIEW)
def waits(record: FactsRecord, _params: ViewParams) -> Observation:
    """Wait-event shares of the active session samples, and blocked sessions."""
    w = record.window
    total = sum(w.waits.values())
    return _json(
        {
            "session_samples": w.session_samples,
            "active_samples": total,
            "shares": {
                k: round(n / total, 3) for k, n in sorted(w.waits.items(), key=lambda kv: -kv[1])
            }
            if total
            else {},
            "blocked": [b.model_dump() for b in w.blocked[:10]],
        }
    )


@operator(role=Role.RETRIEVER, category=Category.DIAGNOSE, surfaces=VIEW)
def statements(record: FactsRecord, params: StatementsParams) -> Observation:
    """The heaviest statements of the window."""
    heaviest = sorted(record.window.statements, key=lambda s: -s.total_exec_time_ms)[: params.limit]
    return _json(
        [
            {
                "queryid": s.queryid,
                "kind": s.kind,
                "query": redact(s.query[:300]),
                "calls": s.calls,
                "total_exec_time_ms": round(s.total_exec_time_ms, 1),
                "rows_per_call": round(s.rows_per_call, 1),
            }
            for s in heaviest
        ]
    )


@operator(role=Role.RETRIEVER, category=Category.DIAGNOSE, surfaces=VIEW)
def plans(record: FactsRecord, _params: ViewParams) -> Observation:
    """The heaviest statements' plans and their issues (a subplan run per row, a nested loop without an inner index, a selective sequential scan, a scan through dead rows)."""
    return _json(
        [
            {
                "queryid": p.queryid,
                "query": redact(p.query[:300]),
                "share": round(p.share, 2),
                "numbers": p.numbers,
                "issues": [i.model_dump() for i in p.issues],
                "remarks": p.remarks,
                "error": p.error,
            }
            for p in record.plans
        ]
    )


@operator(role=Role.RETRIEVER, category=Category.DIAGNOSE, surfaces=VIEW)
def tables(record: FactsRecord, _params: ViewParams) -> Observation:
    """The most written tables: rows inserted, updated, deleted, live and dead, sequential and index scans, indexes."""
    return _json(
        [t.model_dump() for t in sorted(record.window.tables, key=lambda t: -t.writes)[:10]]
    )


@operator(role=Role.RETRIEVER, category=Category.DIAGNOSE, surfaces=VIEW)
def settings(record: FactsRecord, _params: ViewParams) -> Observation:
    """The server's settings (synchronous_commit, fsync, commit_delay, work_mem, shared_buffers, autovacuum, ...), CPU count and memory."""
    w = record.window
    return _json(
        {**w.settings, "cpu_count": w.cpu_count, "memory_total_bytes": w.memory_total_bytes}
    )


@operator(role=Role.RETRIEVER, category=Category.DIAGNOSE, surfaces=VIEW)
def knowledge(record: FactsRecord, params: KnowledgeParams) -> Observation:
    """Knowledge chunks for the abnormal metrics and `query`."""
    matches = knowledge_base().retrieve([m.name for m in record.abnormal], params.query, k=3)
    return _json(
        [
            {
                "code": m.chunk.code,
                "name": m.chunk.name,
                "metrics": m.chunk.metrics,
                "steps": m.chunk.steps,
                "source": m.chunk.source,
            }
            for m in matches
        ]
    )


# The views of the window as a whole, which every expert observes: the abnormal metrics it starts
# from, the statistics it cites, the knowledge. The others are matched to each expert's area
# (dbcrew/roles/diagnosis/tools.py: views_for).
GENERAL_VIEWS = frozenset(view.__name__ for view in (abnormal, metrics, knowledge))
