"""The diagnosis's steps (sample the window, the experts, the cross review) as operators the planner can put in a strategy
(the LLM experts' step after them is llm_experts.py).

The collector samples the window (`sample_anomaly_window`); each expert is a tasker operator
reading those facts and writing its candidate causes; the chief DBA's `cross_review_causes`
turns the candidates into root causes with confidence, evidence and solution; the painter draws
the abnormal metrics. Experts not called in by the alert or an abnormal metric stand down.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from dbcrew.artifacts import Artifact, declare
from dbcrew.models import Finding, Role, RootCause, Severity
from dbcrew.operators.diagnose.candidates import Candidate
from dbcrew.operators.diagnose.cross_review import cross_review
from dbcrew.operators.diagnose.experts import EXPERT_SIGNALS, EXPERTS, TEAM, select_experts
from dbcrew.operators.diagnose.facts import FactsRecord, gather
from dbcrew.operators.diagnose.judgements import NOT_EXPLAINED
from dbcrew.operators.diagnose.past import prometheus_facts, recorded_facts
from dbcrew.operators.explain import not_explained
from dbcrew.operators.knowledge import knowledge_base
from dbcrew.operators.registry import Observation, OperatorContext, OperatorMisfit, operator
from dbcrew.operators.window.evidence import WindowBaseline, WindowEvidence
from dbcrew.operators.window.live import sample_window
from dbcrew.operators.window.metrics import ACTIVE
from dbcrew.store.samples import open_samples
from dbcrew.targets import resumed_note
from dbcrew.vocabulary import Category, Scenario

FACTS_KEY = declare("anomaly_facts")  # the sampled window's facts record the experts read
HEALTH_WINDOW_KEY = declare(
    "health_window"  # a health review's sampled window: the target's next baseline when quiet
)
STORED_BASELINE_KEY = declare(
    "stored_baseline"  # the target's latest quiet window from the store, staged by the crew
)


class AnomalyWindowParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    window_seconds: float | None = Field(None, ge=1, description="defaults to the run's window")


def load_facts(ctx: OperatorContext) -> FactsRecord:
    body = ctx.workspace.observation(FACTS_KEY)
    if body is None:
        raise LookupError("no anomaly facts in the workspace: sample_anomaly_window has not run")
    return FactsRecord.model_validate_json(body)


CANDIDATES_KEYS: dict[str, Artifact] = {
    expert: declare(f"candidates_{expert}")  # the expert's candidate causes
    for expert in EXPERTS
}


def _candidates_key(expert: str) -> Artifact:
    return CANDIDATES_KEYS[expert]


@operator(
    role=Role.EXTRACTOR,
    category=Category.DIAGNOSE,
    produces=(FACTS_KEY,),
    planned_for=frozenset({Scenario.DIAGNOSE}),
)
def sample_anomaly_window(ctx: OperatorContext, params: AnomalyWindowParams) -> Observation:
    """Sample statistics deltas, waits and host metrics over the window (or read a past interval's from the watcher's
    samples or from Prometheus), compare them with the baseline, EXPLAIN the heaviest statements."""
    if ctx.interval is not None:
        if ctx.brief is None:
            raise OperatorMisfit(
                "a past interval is found in the store by the target's identity, which the run's brief holds"
            )
        record = (
            prometheus_facts(
                ctx.target,
                ctx.brief,
                ctx.interval,
                ctx.prometheus,
                baseline_for(ctx),
                ctx.settings.alert,
            )
            if ctx.prometheus is not None
            else recorded_facts(
                ctx.target,
                ctx.brief,
                ctx.interval,
                open_samples(ctx.settings.store_url),
                baseline_for(ctx),
                ctx.settings.alert,
            )
        )
    else:
        record = gather(
            ctx.target,
            ctx.window(params.window_seconds),
            baseline_for(ctx),
            ctx.settings.alert,
            **ctx.resuming(),
        )
    ctx.workspace.put_observation(FACTS_KEY, record.model_dump_json())
    names = ", ".join(m.name for m in record.abnormal[:6]) or "none"
    partial = not_explained(
        (p.error.removeprefix(f"{NOT_EXPLAINED}: ") for p in record.plans),
        "heavy statement(s)",
    )
    return Observation(
        summary=f"{len(record.window.series)} metrics over {record.window.seconds:.1f}s; abnormal: {names}"
        + (f"; {partial}" if partial else ""),
        artifacts=[FACTS_KEY],
        partial=partial,
    )


def baseline_for(ctx: OperatorContext) -> WindowBaseline | None:
    """The `--baseline` file when given, else the stored quiet window the crew staged, else none."""
    if ctx.settings.baseline_path:
        path = Path(ctx.settings.baseline_path)
        return WindowBaseline(
            window=WindowEvidence.load(path), source=f"the baseline file {path.name}"
        )
    body = ctx.workspace.observation(STORED_BASELINE_KEY)
    return None if body is None else WindowBaseline.model_validate_json(body)


class HealthWindowParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    window_seconds: float | None = Field(None, ge=0, description="defaults to the run's window")


@operator(role=Role.EXTRACTOR, category=Category.COLLECT, produces=(HEALTH_WINDOW_KEY,))
def sample_activity_window(ctx: OperatorContext, params: HealthWindowParams) -> Observation:
    """Sample rates, waits and host metrics over the window, kept as the target's baseline for later diagnoses when quiet."""
    seconds = ctx.window(params.window_seconds)
    window = sample_window(ctx.target, seconds, **ctx.resuming())
    ctx.workspace.put_observation(HEALTH_WINDOW_KEY, window.model_dump_json())
    blocked = f", {len(window.blocked)} blocked sessions" if window.blocked else ""
    set_back = [
        f"{n} {what}"
        for n, what in (
            (window.restarts, "server restart(s)"),
            (window.resets, "statistics reset(s)"),
        )
        if n
    ]
    gaps = f"no rate spans the {' and '.join(set_back)} during the window" if set_back else ""
    return Observation(
        summary=f"{len(window.series)} metrics over {window.seconds:.1f}s{blocked}{resumed_note(window.reconnects)}",
        artifacts=[HEALTH_WINDOW_KEY],
        partial="; ".join(p for p in (window.left_out, gaps) if p),
    )


def run_expert(ctx: OperatorContext, expert: str) -> Observation:
    record = load_facts(ctx)
    engaged = select_experts(record.alert, record.abnormal, record.baseline is not None)
    if expert not in engaged:
        ctx.workspace.put_observation(_candidates_key(expert), "[]")
        return Observation(
            summary=f"{expert} expert stood down: neither the alert nor an abnormal metric concerns it",
            artifacts=[_candidates_key(expert)],
        )
    candidates = EXPERTS[expert](record.facts(ctx.settings.thresholds))
    ctx.workspace.put_observation(
        _candidates_key(expert), json.dumps([c.model_dump() for c in candidates])
    )
    found = ", ".join(f"{c.code} ({c.strength:.1f}x)" for c in candidates) or "no cause"
    return Observation(summary=f"{expert} expert: {found}", artifacts=[_candidates_key(expert)])


def _expert_operator(expert: str, doc: str) -> None:
    def fn(ctx: OperatorContext) -> Observation:
        return run_expert(ctx, expert)

    fn.__name__ = f"expert_{expert}"
    fn.__doc__ = doc
    operator(
        role=Role.TASKER,
        category=Category.DIAGNOSE,
        needs=(FACTS_KEY,),
        produces=(_candidates_key(expert),),
        signals=EXPERT_SIGNALS[expert][0],
        knowledge=expert,
    )(fn)


for _expert in TEAM:
    _expert_operator(_expert.name, _expert.doc)


def _severity(confidence: float) -> Severity:
    return Severity.CRITICAL if confidence >= 0.8 else Severity.WARNING


def warm_knowledge() -> None:
    """Build the knowledge base's indexes and embed one query while the window runs: done after it, on a
    host that 30 clients a core keep busy, the index and the embedder's first call took a minute
    (measured: cross review 82 s of a 143 s diagnosis of a 20 s window)."""
    knowledge_base().retrieve([ACTIVE.name], "warm", k=1)


KNOWLEDGE_KEY = declare("knowledge_chunks")  # the chunks the librarian handed on
JOINED_KEY = declare("experts_joined")  # the experts the window called in beyond the planned team
REVIEW_NOTES_KEY = declare("review_notes")  # the cross review's notes on each candidate
ROOT_CAUSES = declare("root_causes")  # the cross review's causes (in its observation, and stored)
CITED_KEY = declare("causes_cited")  # what the cross review's causes rest on, for the painters
TOP_CHUNKS = 4  # the chunks the librarian hands on: a few, as D-Bot injects its top chunks


class Retrieved(BaseModel):
    """One knowledge chunk the librarian handed on, and how well it matched the window."""

    name: str
    code: str
    expert: str
    source: str
    score: float


@operator(
    role=Role.RETRIEVER,
    category=Category.DIAGNOSE,
    needs=(FACTS_KEY,),
    produces=(KNOWLEDGE_KEY,),
    prepare=warm_knowledge,
    planned_for=frozenset({Scenario.DIAGNOSE}),
)
def retrieve_knowledge(ctx: OperatorContext) -> Observation:
    """Librarian: the knowledge chunks that best match the window's abnormal metrics and the alert (BM25 over the chunks' metric names, faiss over their text), handed to the experts and the chief."""
    record = load_facts(ctx)
    found: list[Retrieved] = []
    if ctx.settings.ablations.knowledge:
        matches = knowledge_base().retrieve(
            [m.name for m in record.abnormal], record.alert, k=TOP_CHUNKS
        )
        found = [
            Retrieved(
                name=m.chunk.name,
                code=m.chunk.code,
                expert=m.chunk.expert,
                source=m.chunk.source,
                score=m.score,
            )
            for m in matches
        ]
    ctx.workspace.put_observation(KNOWLEDGE_KEY, json.dumps([r.model_dump() for r in found]))
    if not ctx.settings.ablations.knowledge:
        said = "none (switched off)"
    else:
        said = ", ".join(f"{r.name} ({r.score:.2f})" for r in found) or "no chunk matches"
    return Observation(summary=f"knowledge: {said}", artifacts=[KNOWLEDGE_KEY])


def retrieved(ctx: OperatorContext) -> list[Retrieved] | None:
    """What the librarian handed on; None when no librarian ran (a plan without one)."""
    body = ctx.workspace.observation(KNOWLEDGE_KEY)
    return None if body is None else [Retrieved.model_validate(r) for r in json.loads(body)]


class CausesCited(BaseModel):
    """What the cross review's root causes rest on, stored for the painters that draw only that (a composed
    plan's): how many causes it kept, and their indicator metrics that left the baseline, strongest cause first."""

    causes: int
    metrics: list[str]


def causes_cited(ctx: OperatorContext) -> CausesCited | None:
    """What the cross review's causes rest on; None when no cross review completed in this run."""
    body = ctx.workspace.observation(CITED_KEY)
    return None if body is None else CausesCited.model_validate_json(body)


class CrossReviewParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    team: list[str] | None = Field(
        None,
        description="the experts on the plan's team (a plan composed from the alert leaves some out);"
        " None: every expert is on it",
    )


def joined_experts(record: FactsRecord, team: list[str] | None, present: set[str]) -> list[str]:
    """Experts the window calls in (its abnormal metrics, the alert's words) that the plan left off the
    team: the plan was made before the window was seen, so they join now. A planned expert that
    failed is not one of them: its failure stands as the coverage says."""
    if team is None:
        return []
    engaged = select_experts(record.alert, record.abnormal, record.baseline is not None)
    return [e for e in engaged if e not in team and _candidates_key(e) not in present]


@operator(
    role=Role.TASKER,
    category=Category.DIAGNOSE,
    needs=(FACTS_KEY,),
    uses=(*(_candidates_key(e) for e in EXPERTS), KNOWLEDGE_KEY),
    produces=(ROOT_CAUSES, CITED_KEY),
    prepare=warm_knowledge,
    planned_for=frozenset({Scenario.DIAGNOSE}),
)
def cross_review_causes(ctx: OperatorContext, params: CrossReviewParams) -> Observation:
    """Chief DBA: check every expert's candidates against the baseline and the others' evidence; keep the top root causes with solutions."""
    record = load_facts(ctx)
    keys = [_candidates_key(e) for e in EXPERTS]
    rows = ctx.workspace.query(
        f"SELECT key, body FROM observations WHERE key IN ({', '.join('?' for _ in keys)})", keys
    )
    candidates = [Candidate.model_validate(c) for row in rows for c in json.loads(row["body"])]
    facts = record.facts(ctx.settings.thresholds)
    joined = joined_experts(record, params.team, {row["key"] for row in rows})
    candidates += [c for expert in joined for c in EXPERTS[expert](facts)]
    causes, notes = cross_review(candidates, facts)
    kb = knowledge_base()
    abnormal = [m.name for m in record.abnormal]
    handed = retrieved(ctx)
    knowing = ctx.settings.ablations.knowledge
    root_causes, findings = [], []
    for cause in causes:
        chunk = kb.for_code(cause.code) if knowing else None
        if handed is None:  # no librarian on the team: the chief looks the knowledge up itself
            related = [
                m.chunk.source
                for m in kb.retrieve(
                    abnormal,
                    f"{record.alert} {cause.code.replace('_', ' ')}",
                    k=2,
                    expert=cause.expert,
                )
            ]
        else:  # the librarian's chunks that concern this cause's expert
            related = [r.source for r in handed if r.expert == cause.expert]
        related = related if knowing else []
        evidence = {
            **cause.evidence,
            "expert": cause.expert,
            "supported_by": cause.supported_by,
            **({"share_of_active_time": cause.time_share} if cause.time_share is not None else {}),
            "knowledge": list(dict.fromkeys(related)) or ([chunk.source] if chunk else []),
            **(
                {"joined": "called in by the window: not on the team planned from the alert"}
                if cause.expert in joined
                else {}
            ),
        }
        solution = chunk.solution if chunk else ""
        root_causes.append(
            RootCause(
                code=cause.code,
                confidence=cause.confidence,
                evidence=evidence,
                solution=solution,
                time_share=cause.time_share,
            )
        )
        findings.append(
            Finding(
                code=cause.code,
                severity=_severity(cause.confidence),
                object=", ".join(cause.objects) or "database",
                title=f"root cause: {chunk.name if chunk else cause.code} (confidence {cause.confidence:.2f})",
                evidence=evidence,
                recommendation=solution,
                confidence=cause.confidence,
                source="cross_review_causes",
            )
        )
    ctx.workspace.put_observation(
        ROOT_CAUSES, json.dumps([c.model_dump(mode="json") for c in root_causes])
    )
    ctx.workspace.put_observation(REVIEW_NOTES_KEY, json.dumps([n.model_dump() for n in notes]))
    ctx.workspace.put_observation(JOINED_KEY, json.dumps(joined))
    cited = CausesCited(
        causes=len(causes), metrics=list(dict.fromkeys(m for c in causes for m in c.left_baseline))
    )
    ctx.workspace.put_observation(CITED_KEY, cited.model_dump_json())
    summary = (
        ", ".join(f"{c.code} {c.confidence:.2f}" for c in root_causes)
        or "no root cause above the reporting confidence"
    )
    called = (
        f"; experts the window called in beyond the plan: {', '.join(joined)}" if joined else ""
    )
    return Observation(
        summary=f"cross review: {summary}{called}",
        findings=findings,
        root_causes=root_causes,
        artifacts=[ROOT_CAUSES, CITED_KEY],
    )
