"""`python -m bench llm --real`: a real local model (SmolLM2-135M-Instruct behind llama.cpp's
llama-server, dbcrew/lab/llama_server.py) through a review, a diagnosis and a question, per capability mode.

One embedded server (bench/diagnose.py's: durable commits, a recorded idle baseline) is reviewed once
by the rules brain and once per mode by the LLM brain; each of CAUSES is injected and diagnosed by the
rules and then by the LLM brain in each mode (the window sampled before any model call, the rules'
causes standing); one instance question is asked per mode. Each row gives the model's calls, prompt
and completion tokens, the latency per call (the client's request time over its calls), the wall time
beyond the rules brain's run, the questions that fell back to the rules, and for the diagnoses D-Bot's
accuracy of the rules' causes and of the causes once the model had its say, both read on the LLM run's
own window (`rules_part`), and the model's unconfirmed hypotheses (`hyp`); a line per diagnosis names
them, beside the causes of the rules brain's own run of the same injection. The LLM budget (DBCREW_LLM_BUDGET) bounds what each run may
spend on the model: --budget, 20 s by default. Timings move with the machine's load: the table
prints the load average beside them.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import injections
from bench.diagnose import DiagnosisServer, accuracy
from dbcrew.lab.llama_server import LlamaServer, LocalModel
from dbcrew.llm.client import Completion, LlmClient
from dbcrew.models import Report
from dbcrew.prompts import render
from dbcrew.roles.ask.answer import ask
from dbcrew.roles.brains.openai import OpenAIBrain
from dbcrew.roles.crew.context import RunContext
from dbcrew.roles.spine import PlainPhases, review
from dbcrew.settings.llm import Capability
from dbcrew.settings.run import Settings
from dbcrew.targets import parse_target
from dbcrew.workspace import Workspace

CAUSES = ("workload_many_inserts", "lock_contention")
QUESTION = "how big is the inj_log table?"
DEFAULT_BUDGET = 20.0
IDLE_SECONDS = 600.0  # a request the budget cut is generated to its end (up to 2,048 tokens) before the next run


@dataclass
class Row:
    """One mode's runs of one kind (review, diagnosis, question), summed."""

    runs: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    questions: int = 0
    fallbacks: int = 0
    seconds: list[float] = field(default_factory=list)  # beyond the rules brain's run
    call_seconds: list[float] = field(default_factory=list)  # per call
    accuracy: list[float] = field(default_factory=list)
    rules_accuracy: list[float] = field(default_factory=list)
    hypotheses: int = 0  # the model's causes the measurements did not support (Report.hypotheses)


@contextmanager
def timed_calls() -> Iterator[list[float]]:
    """Every chat completion's wall time while inside (the brains are built deep in the runs, so the
    client's method is wrapped, for the bench only)."""
    seconds: list[float] = []
    plain = LlmClient.complete

    def complete(self: LlmClient, *args: Any, **kwargs: Any) -> Completion:
        started = time.monotonic()
        try:
            return plain(self, *args, **kwargs)
        finally:
            seconds.append(time.monotonic() - started)

    LlmClient.complete = complete  # type: ignore[method-assign]
    try:
        yield seconds
    finally:
        LlmClient.complete = plain  # type: ignore[method-assign]


@contextmanager
def environment(**values: str) -> Iterator[None]:
    """The DBCREW_* variables of one run, restored after it."""
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def timed_review(
    server: DiagnosisServer, out: Path, brain: str, scenario: str
) -> tuple[Report, float]:
    run = RunContext(
        target=parse_target(server.dsn),
        scenario=scenario,
        brain=brain,
        out_dir=out,
        settings=Settings(
            window_seconds=6.0 if scenario == "diagnose" else 2.0,
            baseline_path=str(server.baseline),
            alert="queries are slower than usual" if scenario == "diagnose" else "",
        ),
    )
    started = time.monotonic()
    report = review(run, PlainPhases)
    return report, time.monotonic() - started


def add(row: Row, report: Report, seconds: float, rules_seconds: float) -> None:
    llm = report.llm
    row.runs += 1
    row.calls += llm.calls
    row.prompt_tokens += llm.prompt_tokens
    row.completion_tokens += llm.completion_tokens
    row.questions += llm.questions
    row.fallbacks += llm.fallbacks
    row.seconds.append(seconds - rules_seconds)
    diagnosis = report.llm_diagnosis
    if diagnosis is not None:
        row.questions += len(diagnosis.experts) * diagnosis.samples
        row.calls += diagnosis.calls
        row.prompt_tokens += diagnosis.prompt_tokens
        row.completion_tokens += diagnosis.completion_tokens
        row.fallbacks += len(diagnosis.fallbacks)
    row.hypotheses += len(report.hypotheses)


def rules_part(report: Report) -> list[str]:
    """The causes the rules named in this run's own window, before the model had its say (a cause the
    model added carries evidence source "llm"): the model's part is judged on the same window, since
    two windows of one injection differ (on a loaded host, 8 inserters' relation-extension lock waits
    took 13 % to 50 % of the active time from one window to the next)."""
    return [c.code for c in report.root_causes if c.evidence.get("source") != "llm"]


def main(argv: list[str]) -> None:
    budget = float(argv[argv.index("--budget") + 1]) if "--budget" in argv else DEFAULT_BUDGET
    rows: dict[tuple[str, str], Row] = {}

    with tempfile.TemporaryDirectory(prefix="dbcrew-bench-llm-real-") as tmp:
        work = Path(tmp)
        server = DiagnosisServer.start(work / "pg")
        try:
            with LlamaServer(LocalModel.SMOLLM2) as llama:
                print(
                    f"model: {llama.model_name} (F16) on llama-server, 2 threads, context {llama.context}"
                )
                _, rules_seconds = timed_review(server, work / "rules", "rules", "health")
                rules_causes: dict[str, tuple[list[str], float]] = {}
                for cause in CAUSES:
                    with injections.injected(server.dsn, [cause], catalogue=server.catalogue):
                        report, seconds = timed_review(
                            server, work / f"rules-{cause}", "rules", "diagnose"
                        )
                    rules_causes[cause] = ([c.code for c in report.root_causes], seconds)
                for mode in Capability:
                    with environment(
                        DBCREW_LLM_BASE_URL=llama.url,
                        DBCREW_LLM_MODEL=llama.model_name,
                        DBCREW_LLM_CAPABILITY=mode.value,
                        DBCREW_LLM_BUDGET=str(budget),
                        DBCREW_LLM_MAX_RETRIES="0",
                        DBCREW_LLM_CONTEXT=str(llama.context),
                    ):
                        row = rows.setdefault((mode.value, "review"), Row())
                        with timed_calls() as calls:
                            report, seconds = timed_review(
                                server, work / f"{mode}-review", "openai", "health"
                            )
                        add(row, report, seconds, rules_seconds)
                        row.call_seconds += calls
                        llama.idle(IDLE_SECONDS)
                        row = rows.setdefault((mode.value, "diagnosis"), Row())
                        for cause in CAUSES:
                            with (
                                injections.injected(
                                    server.dsn, [cause], catalogue=server.catalogue
                                ),
                                timed_calls() as calls,
                            ):
                                report, seconds = timed_review(
                                    server, work / f"{mode}-{cause}", "openai", "diagnose"
                                )
                            codes, plain = rules_causes[cause]
                            add(row, report, seconds, plain)
                            row.call_seconds += calls
                            final = [c.code for c in report.root_causes]
                            own = rules_part(report)
                            row.accuracy.append(accuracy([cause], final))
                            row.rules_accuracy.append(accuracy([cause], own))
                            print(
                                f"{mode.value} {cause}: rules alone {', '.join(codes) or '-'}; this"
                                f" window's rules {', '.join(own) or '-'}; +llm {', '.join(final) or '-'};"
                                " hypotheses "
                                + (
                                    ", ".join(
                                        f"{h.code} ({h.unconfirmed})" for h in report.hypotheses
                                    )
                                    or "-"
                                ),
                                flush=True,
                            )
                            llama.idle(IDLE_SECONDS)
                        row = rows.setdefault((mode.value, "question"), Row())
                        target = parse_target(server.dsn)
                        started = time.monotonic()
                        ask(QUESTION, target, workspace=Workspace(work / f"{mode}-rules.duckdb"))
                        plain = time.monotonic() - started
                        brain = OpenAIBrain(render)
                        started = time.monotonic()
                        with timed_calls() as calls:
                            answer = ask(
                                QUESTION,
                                target,
                                brain=brain,
                                workspace=Workspace(work / f"{mode}-ask.duckdb"),
                            )
                        seconds = time.monotonic() - started
                        row.call_seconds += calls
                        row.runs += 1
                        row.calls += answer.llm.calls
                        row.prompt_tokens += answer.llm.prompt_tokens
                        row.completion_tokens += answer.llm.completion_tokens
                        row.questions += answer.llm.questions
                        row.fallbacks += answer.llm.fallbacks
                        row.seconds.append(seconds - plain)
                        llama.idle(IDLE_SECONDS)
        finally:
            server.stop()
    print(
        f"LLM budget per run: {budget:g} s; rules review {rules_seconds:.1f} s; load {os.getloadavg()[0]:.2f}"
    )
    print(
        f"{'mode':<12}{'run':<10}{'runs':>5}{'calls':>6}{'prompt tok':>11}{'compl tok':>10}"
        f"{'s/call':>8}{'+s/run':>8}{'fell back':>10}{'acc rules':>10}{'acc +llm':>9}{'hyp':>5}"
    )
    for (mode, kind), row in rows.items():
        per_call = f"{statistics.mean(row.call_seconds):.1f}" if row.call_seconds else "-"
        acc_rules = f"{statistics.mean(row.rules_accuracy):.2f}" if row.rules_accuracy else ""
        acc_llm = f"{statistics.mean(row.accuracy):.2f}" if row.accuracy else ""
        hypotheses = str(row.hypotheses) if row.accuracy else ""
        print(
            f"{mode:<12}{kind:<10}{row.runs:>5}{row.calls / row.runs:>6.1f}"
            f"{row.prompt_tokens / row.runs:>11.0f}{row.completion_tokens / row.runs:>10.0f}"
            f"{per_call:>8}{statistics.mean(row.seconds):>8.1f}"
            f"{f'{row.fallbacks}/{row.questions}':>10}{acc_rules:>10}{acc_llm:>9}{hypotheses:>5}"
        )
