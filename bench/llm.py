"""`python -m bench llm`: what an LLM diagnosis costs through the scripted OpenAI-compatible server.

One real window (an embedded server under an injected flood of small inserts, against its idle
baseline) is diagnosed by a scripted competent team (the experts the abnormal metrics call in, at
most three: each looks at every metric series, the waits, the statements and the knowledge in one
turn of parallel tool calls, then proposes a cause citing the window's real values). The server counts tokens from the request's size (about four
characters a token), so the table shows what the prompts weigh with RCAgent's snapshot keys
(observations cut at DBCREW_LLM_OBSERVATION_CHARS' default) and without them (every observation
whole), and the latency of one call through the real `openai` client.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import injections
from bench.diagnose import WINDOW_SECONDS, DiagnosisServer
from dbcrew.lab.scripted_llm import Reply, ScriptedServer
from dbcrew.llm.client import Capability, Completion, LlmClient
from dbcrew.models import RootCause
from dbcrew.models.report import LlmDiagnosis
from dbcrew.operators.diagnose.cross_review import cross_review
from dbcrew.operators.diagnose.experts import EXPERTS
from dbcrew.operators.diagnose.facts import FactsRecord, gather
from dbcrew.operators.diagnose.views import metric_stat
from dbcrew.operators.window.evidence import WindowBaseline, WindowEvidence
from dbcrew.prompts import render
from dbcrew.roles.agent.budget import AgentLimits
from dbcrew.roles.diagnosis.chief import LlmDiagnoser, team_for
from dbcrew.targets import parse_target

CAUSE = "workload_many_inserts"
GOAL_PROMPT_TOKENS = 10_000


class TimedClient(LlmClient):
    """The client, with each call's wall time kept."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.latencies: list[float] = []

    def complete(self, messages: list[dict[str, Any]], **kwargs: Any) -> Completion:
        started = time.perf_counter()
        try:
            return super().complete(messages, **kwargs)
        finally:
            self.latencies.append(time.perf_counter() - started)


def script(record: FactsRecord, experts: int) -> list[Reply]:
    """A competent expert's two turns, once per expert: four observations at once (parallel tool calls;
    the abnormal metrics are in its task), then the flood proposed with its real values."""
    cited = [
        {
            "metric": m,
            "stat": "mean",
            "value": round(metric_stat(record.window, record.baseline, m, "mean") or 0.0, 1),
        }
        for m in ("db.tup_inserted", "db.xact_commit")
    ]
    observe = [("observe", {"what": w}) for w in ("metrics", "waits", "statements")] + [
        ("observe", {"what": "knowledge", "query": "many small inserts"})
    ]
    propose = (
        "propose_causes",
        {
            "causes": [
                {
                    "code": CAUSE,
                    "confidence": 0.8,
                    "explanation": "many small commits",
                    "evidence": cited,
                }
            ]
        },
    )
    return [
        reply
        for _ in range(experts)
        for reply in (Reply(tool_calls=observe), Reply(tool_calls=[propose]))
    ]


def diagnose(
    record: FactsRecord, rules: list[RootCause], observation_chars: int
) -> tuple[LlmDiagnosis, list[float]]:
    limits = AgentLimits(observation_chars=observation_chars, experts=3, calls=60, tokens=1_000_000)
    server = ScriptedServer(
        replies=script(record, len(team_for(record, limits.experts))), measure_usage=True
    )
    try:
        client = TimedClient(
            render,
            base_url=server.url,
            api_key="bench",
            model="scripted",
            timeout=30.0,
            max_retries=0,
        )
        _, _, report = LlmDiagnoser(client, render, limits, Capability.TOOLS).diagnose(
            record, rules
        )
    finally:
        server.close()
    return report, client.latencies


def real_window(workdir: Path) -> FactsRecord:
    server = DiagnosisServer.start(workdir)
    try:
        baseline = WindowBaseline(
            window=WindowEvidence.load(server.baseline), source="the idle server's window"
        )
        with injections.injected(server.dsn, [CAUSE]):
            return gather(
                parse_target(server.dsn), WINDOW_SECONDS, baseline, "insert throughput dropped"
            )
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> None:
    """The scripted team's costs; with --real, a real local model's (bench/llm_real.py)."""
    if argv and "--real" in argv:
        from bench import llm_real

        llm_real.main(argv)
        return
    with tempfile.TemporaryDirectory(prefix="dbcrew-bench-llm-") as tmp:
        record = real_window(Path(tmp))
    facts = record.facts()
    causes, _ = cross_review([c for expert in EXPERTS.values() for c in expert(facts)], facts)
    rules = [RootCause(code=c.code, confidence=c.confidence, evidence=c.evidence) for c in causes]
    print(
        f"window: {len(record.window.series)} series, {len(record.window.statements)} statements,"
        f" {len(record.abnormal)} abnormal; rules: {', '.join(c.code for c in rules) or 'none'}"
    )
    print(f"team: {', '.join(team_for(record, AgentLimits().experts))}")
    print(
        f"{'observations':<28}{'calls':>6}{'prompt tok':>12}{'compl tok':>11}{'snapshots':>10}{'p50 ms':>8}{'max ms':>8}  accepted"
    )
    for label, chars in (
        ("snapshot keys (1200 chars)", AgentLimits().observation_chars),
        ("whole (no snapshot keys)", 0),
    ):
        report, latencies = diagnose(record, rules, chars)
        print(
            f"{label:<28}{report.calls:>6}{report.prompt_tokens:>12}{report.completion_tokens:>11}{report.snapshots:>10}"
            f"{statistics.median(latencies) * 1000:>8.1f}{max(latencies) * 1000:>8.1f}  {len(report.accepted)}"
        )
        if chars:
            verdict = "met" if report.prompt_tokens < GOAL_PROMPT_TOKENS else "missed"
            print(
                f"  goal < {GOAL_PROMPT_TOKENS} prompt tokens per diagnosis with snapshot keys: {verdict}"
            )
