"""Diagnosis on a real PostgreSQL: every root cause injected and found; a normal load finds none.

One diagnosis server for the module (fsync and synchronous_commit on, so WAL flushes cost what
they cost), one shared baseline, short windows. The injections run in a child process over their
own read-write connection; the diagnosis only ever reads.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from bench import injections
from bench.diagnose import DiagnosisServer
from dbcrew.lab.embedded import POSTGRES_BIN_PATH
from dbcrew.lab.scripted_llm import Reply, ScriptedServer
from dbcrew.models import Report
from dbcrew.roles.crew.context import RunContext
from dbcrew.roles.spine import PlainPhases, review
from dbcrew.settings.run import Settings
from dbcrew.targets import parse_target

WINDOW = 5.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DiagnosisServer]:
    started = DiagnosisServer.start(tmp_path_factory.mktemp("diagnose"), baseline_seconds=WINDOW)
    yield started
    started.stop()


@pytest.fixture(scope="module")
def diagnosed(
    server: DiagnosisServer, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], tuple[Report, Path]]:
    """The diagnosis under one injected cause, made once for the module: the report's layout is read
    from the lock contention diagnosis that cause's own test made (one 8 s diagnosis less)."""
    made: dict[str, tuple[Report, Path]] = {}

    def of(cause: str) -> tuple[Report, Path]:
        if cause not in made:
            out = tmp_path_factory.mktemp(cause) / "report"
            made[cause] = server.diagnose_injected([cause], out, window=WINDOW)[0], out
        return made[cause]

    return of


@pytest.mark.parametrize("cause", injections.SINGLE)
def test_injected_root_cause_is_found(
    diagnosed: Callable[[str], tuple[Report, Path]], cause: str
) -> None:
    report, _out = diagnosed(cause)
    found = [rc.code for rc in report.root_causes]
    assert cause in found, (
        f"{cause} not among {found}: {report.diagnosis.process if report.diagnosis else ''}"
    )
    cause_entry = next(rc for rc in report.root_causes if rc.code == cause)
    assert cause_entry.solution and cause_entry.evidence, (
        "a root cause carries its evidence and a solution"
    )
    assert any("PostgreSQL manual" in s for s in cause_entry.evidence["knowledge"])


def test_two_causes_at_once_are_both_found(server: DiagnosisServer, tmp_path: Path) -> None:
    causes = ["workload_large_fetch", "query_correlated_subquery"]
    report, _seconds = server.diagnose_injected(causes, tmp_path / "report", window=WINDOW)
    assert set(causes) <= {rc.code for rc in report.root_causes}


def test_report_has_dbot_sections(diagnosed: Callable[[str], tuple[Report, Path]]) -> None:
    report, out = diagnosed("lock_contention")
    assert report.scenario == "diagnose" and report.diagnosis is not None
    checks = [c.check for c in report.coverage]
    assert "lock_contention" in report.summary and "run_deadline" in checks
    # No health check to account for but those the alert called onto the team (they ran): only what the
    # run itself could not do (its deadline, the CPU it got, and on a busy host the session samples the
    # sampler could not take).
    planned = {t for member in report.team for t in member.tasks}
    assert all(c.check in planned for c in report.coverage if c.check.startswith("check_")), checks
    assert "locks" in report.diagnosis.experts
    assert report.diagnosis.abnormal_metrics, "the lock waits left the baseline"
    markdown = (out / "report.md").read_text()
    for section in (
        "Anomaly description",
        "Root causes",
        "Solutions",
        "Diagnosis process",
        "Abnormal metrics",
    ):
        assert section in markdown
    assert report.charts and (out / report.charts[0]).is_file()
    assert all(report.captions.get(c) for c in report.charts), "every chart says what it shows"
    lock = Report.model_validate_json((out / "report.json").read_text()).root_causes[0]
    assert lock.code == "lock_contention" and lock.evidence["blockers"], "the blocker is named"
    # The time attribution: the waiters' time went to the hot row's table, and the cause says how much of it.
    attribution = report.diagnosis.time_attribution
    assert attribution is not None and "Time attribution" in markdown
    assert attribution.by_relation[0].label == "public.inj_acct", attribution.by_relation
    assert lock.time_share is not None and lock.time_share >= 0.5, lock.time_share
    assert "charts/time_attribution.png" in report.charts


def _pgbench(*args: str) -> list[str]:
    return [str(POSTGRES_BIN_PATH / "pgbench"), *args]


@contextmanager
def _loaded(*pgbench_args: str, options: str = "") -> Iterator[None]:
    """pgbench running with `pgbench_args` for the block, ended when it ends (`options`: its sessions'
    PGOPTIONS)."""
    load = subprocess.Popen(
        _pgbench(*pgbench_args),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PGOPTIONS": options} if options else None,
    )
    try:
        yield
    finally:
        load.terminate()
        load.wait(timeout=30)


def test_normal_pgbench_load_yields_no_root_cause(server: DiagnosisServer, tmp_path: Path) -> None:
    url = server.dsn
    subprocess.run(
        _pgbench("-i", "-s", "2", "-q", url), check=True, capture_output=True, timeout=120
    )
    # A steady, rate-limited TPC-B-like load: what a healthy OLTP database does all day. Its commits do
    # not wait for their WAL flush: on a host loaded enough that a flush outlasts the transaction (the
    # suite's own load, 17 on 2 cores), 40 durable commits a second are commit pressure, which the
    # diagnosis rightly names; this test is about a load the host carries, whatever its speed.
    quick = "-c synchronous_commit=off"
    with _loaded("-c", "4", "-j", "2", "-R", "40", "-T", str(int(WINDOW) + 20), url, options=quick):
        report = server.diagnose(tmp_path / "report", window=WINDOW, alert="routine check")
    assert report.diagnosis is not None and report.diagnosis.abnormal_metrics, (
        "the load itself is visible against the quiet baseline"
    )
    assert report.root_causes == []
    assert [f for f in report.findings if f.is_problem] == []
    # The summary says what the window was held against: the baseline, and how far it left it.
    left = len(report.diagnosis.abnormal_metrics)
    assert (
        report.summary.startswith(
            "No root cause above the reporting confidence: the window was compared with the baseline ("
        )
        and f"which {left} metrics left." in report.summary
    ), report.summary


def test_a_diagnosis_without_a_baseline_says_it_compared_none(
    server: DiagnosisServer, tmp_path: Path
) -> None:
    """No --baseline file and no quiet window kept (the test's store is new): the summary must not
    speak of a baseline's workload, and the description has no baseline for a metric to leave."""
    run = RunContext(
        target=parse_target(server.dsn),
        scenario="diagnose",
        settings=Settings(window_seconds=2.0, alert="routine check"),
        out_dir=tmp_path / "report",
    )
    report = review(run, PlainPhases)
    assert report.root_causes == [], report.root_causes
    assert report.summary.startswith(
        "No root cause above the reporting confidence: the window was compared with no baseline"
    ), report.summary
    assert "baseline's workload" not in report.summary
    assert report.diagnosis is not None
    assert "metrics left the baseline" not in report.diagnosis.anomaly_description


LOOKUP = "\\set id random(1, 300000)\nSELECT * FROM dom_events WHERE id = :id;\n"


def test_a_dominant_scan_of_a_mostly_dead_table_names_its_index_and_its_dead_tuples(
    server: DiagnosisServer, tmp_path: Path
) -> None:
    """One statement takes the window: a look-up by a column no index serves, on a table 80 % of whose
    row versions are dead (autovacuum off for it). Its plan is judged before any resource is blamed:
    the missing index and the dead tuples, and the CPU they burn is their symptom, never ahead of them."""
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE dom_events (id int, body text) WITH (autovacuum_enabled = off)")
        conn.execute(
            "INSERT INTO dom_events SELECT g, repeat('x', 60) FROM generate_series(1, 300000) g"
        )
        conn.execute("DELETE FROM dom_events WHERE id % 5 <> 0")
        conn.execute("SELECT pg_stat_force_next_flush()")
    script = tmp_path / "lookup.sql"
    script.write_text(LOOKUP)
    lookups = ("-n", "-c", "4", "-j", "2", "-M", "prepared", "-T", "600", "-f", str(script))
    try:
        with _loaded(*lookups, server.dsn):
            report = server.diagnose(tmp_path / "report", window=WINDOW, alert="lookups slow")
    finally:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute("DROP TABLE dom_events")
    codes = [rc.code for rc in report.root_causes]
    assert {"index_missing", "dead_tuples_high"} <= set(codes), codes
    plan_causes = max(codes.index("index_missing"), codes.index("dead_tuples_high"))
    resources = [c for c in codes if c in ("cpu_contention", "io_contention", "memory_pressure")]
    assert all(codes.index(c) > plan_causes for c in resources), codes
    dead = next(rc for rc in report.root_causes if rc.code == "dead_tuples_high")
    assert "dom_events" in json.dumps(dead.evidence) and dead.solution


def _competent_expert(body: dict) -> Reply:
    """A scripted expert that reads what it observed: first the commit series, then a cause citing its
    observed mean. The brain's other questions (plan, summary) get an error: they fall back to the rules."""
    if "tools" not in body:
        return Reply(status=500, content="this script only diagnoses")
    shown = [
        m["content"]
        for m in body["messages"]
        if m["role"] == "tool" and "Observation of metrics" in m["content"]
    ]
    if not shown:
        return Reply(tool_calls=[("observe", {"what": "metrics", "names": ["db.xact_commit"]})])
    stats = json.loads(shown[-1].split("<data>")[1].split("</data>")[0])["db.xact_commit"]
    cited = [{"metric": "db.xact_commit", "stat": "mean", "value": stats["mean"]}]
    return Reply(
        tool_calls=[
            (
                "propose_causes",
                {
                    "causes": [
                        {
                            "code": "cpu_contention",
                            "confidence": 0.9,
                            "explanation": "commits keep the CPU busy",
                            "evidence": cited,
                        }
                    ]
                },
            )
        ]
    )


def test_llm_experts_in_a_whole_diagnosis_through_the_review_path(
    server: DiagnosisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm = ScriptedServer(respond=_competent_expert)
    monkeypatch.setenv("DBCREW_LLM_BASE_URL", llm.url)
    monkeypatch.setenv("DBCREW_LLM_MAX_RETRIES", "0")
    try:
        report = server.diagnose(
            tmp_path / "report", window=2.0, alert="queries are slow", brain="openai"
        )
    finally:
        llm.close()
    section = report.llm_diagnosis
    assert section is not None and section.experts and section.calls == 2 * len(section.experts)
    assert section.prompt_tokens > 0 and section.fallbacks == [] and section.rejected == []
    assert section.accepted == [f"{e}: cpu_contention" for e in section.experts]
    # The guard let it through (it cites the commit rate as observed), but nothing measured on an idle
    # server supports CPU contention: the model's hypothesis, apart from the root causes.
    assert "cpu_contention" not in {c.code for c in report.root_causes}
    assert [(h.code, h.explanation) for h in report.hypotheses] == [
        ("cpu_contention", "commits keep the CPU busy")
    ]
    assert "unconfirmed hypotheses, not root causes" in report.summary  # where a reader looks first
    assert "cpu_contention" in report.summary.split("unconfirmed hypotheses")[1]
    assert not any(f.source == "llm_experts" for f in report.findings)
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert (
        "### The model's unconfirmed hypotheses" in markdown
        and f"LLM experts ({', '.join(section.experts)}): {section.calls} calls" in markdown
    )
