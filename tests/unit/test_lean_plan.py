"""A composed plan asks for the work the evidence calls for, and each task says what it cost.

The chart of abnormal metrics is most of a diagnosis's CPU after its window; a composed plan's chart
draws only the metrics the root causes rest on (dbcrew/roles/brains/composing.py `lean_params`,
dbcrew/operators/diagnose/charts.py `charted`), the playbook's the strongest six. Every task's worker
records its thread's CPU seconds beside its wall (dbcrew/roles/crew/worker.py), which the report's team
table shows. The alerts here are not the benchmark's (bench/plan_cases*.yaml, kept out of the tests).
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

import dbcrew.operators  # noqa: F401  (registers operators)
from dbcrew.models import Brief, Report, Strategy, TaskSpec
from dbcrew.models.crew import PlanRequest
from dbcrew.models.report import SkipCause, SkipKind, TargetInfo
from dbcrew.operators.diagnose.candidates import Candidate, Facts
from dbcrew.operators.diagnose.charts import charted
from dbcrew.operators.diagnose.cross_review import cross_review
from dbcrew.operators.diagnose.facts import FactsRecord
from dbcrew.operators.diagnose.steps import CITED_KEY, FACTS_KEY, CausesCited
from dbcrew.operators.registry import (
    REGISTRY,
    NoParams,
    Observation,
    OperatorContext,
    catalogue,
    get,
)
from dbcrew.operators.window.anomaly import AbnormalMetric
from dbcrew.operators.window.evidence import WindowEvidence
from dbcrew.roles.brains.composing import CITED_ONLY
from dbcrew.roles.brains.rules import RulesBrain
from dbcrew.roles.crew.capabilities import prune
from dbcrew.roles.crew.faults import FaultInjector
from dbcrew.roles.crew.planner import make_plan
from dbcrew.roles.crew.worker import TaskOutcome, perform, skipped
from dbcrew.roles.report.reporter import render_markdown, team_of
from dbcrew.settings.run import Settings
from dbcrew.targets import parse_target
from dbcrew.vocabulary import Scenario, TaskStatus
from dbcrew.workspace import Workspace

CHART = "paint_abnormal_metrics"
TARGET = parse_target("postgresql://monitor@127.0.0.1:1/shop")  # never reached here


def plan(alert: str, compose: bool = True) -> Strategy:
    brief = Brief(
        server_version="18.6",
        server_version_num=180006,
        database="shop",
        current_user="monitor",
        extensions=["pg_stat_statements"],
        preloaded_libraries=["pg_stat_statements"],
        can_read_all_stats=True,
    )
    request = PlanRequest(
        scenario=Scenario.DIAGNOSE,
        brief=brief,
        catalogue=prune(brief, catalogue()).available,
        alert=alert,
        compose=compose,
    )
    return make_plan(RulesBrain(), request, max_rounds=2).strategy


def metric(name: str, z: float) -> AbnormalMetric:
    return AbnormalMetric(name=name, baseline_median=0.0, window_median=z, z=z, ks_p=0.001)


def test_a_composed_diagnosis_charts_what_the_causes_rest_on_and_the_playbook_the_strongest():
    composed = plan("backends queue for row locks held by a long transaction")
    assert composed.rationale.startswith("composed from the alert")
    chart = composed.task(CHART)
    assert chart.params == {CITED_ONLY: True}
    assert "draws only what the root causes rest on" in chart.why
    # the chart reads the causes after the cross review (a soft need: a failed review leaves it the strongest)
    assert "cross_review_causes" in chart.needs
    playbook = plan("backends queue for row locks held by a long transaction", compose=False)
    assert "not composed" in playbook.rationale
    assert playbook.task(CHART).params == {}
    # only a painter whose parameters say it can is asked: every other task keeps its defaults
    for strategy in (composed, playbook):
        others = [
            t for t in strategy.tasks if t.id != CHART and t.operator != "cross_review_causes"
        ]
        assert all(t.params == {} for t in others), others


def test_the_chart_draws_the_cited_metrics_the_strongest_without_a_cause_and_none_when_they_cite_none():
    abnormal = [metric(f"m{i}", 20.0 - i) for i in range(8)]
    strongest = [m.name for m in abnormal[:6]]
    assert [m.name for m in charted(abnormal, None)[0]] == strongest  # the playbook's, or no review
    no_cause = CausesCited(causes=0, metrics=[])
    assert [
        m.name for m in charted(abnormal, no_cause)[0]
    ] == strongest  # never a chart silently gone
    shown, why = charted(abnormal, CausesCited(causes=2, metrics=["m7", "m1"]))
    assert [m.name for m in shown] == [
        "m1",
        "m7",
    ]  # by how far they left the baseline, past the six too
    assert "2 root causes" in why and "5 other abnormal metric(s) not drawn" in why
    shown, why = charted(abnormal, CausesCited(causes=1, metrics=["not.abnormal"]))
    assert shown == [] and why.startswith(
        "no chart of abnormal metrics: the 1 root cause rest on none"
    )


def test_the_cross_review_records_the_indicators_that_left_the_baseline():
    series = {"act.wait_lock": [0.0] * 10, "act.active": [1.0] * 10}
    window = WindowEvidence(started_at=0.0, seconds=5.0, interval=0.5, series=series)
    locks = Candidate(
        code="lock_contention",
        expert="locks",
        strength=2.0,
        indicators=["act.wait_lock", "act.active"],
    )
    causes, _ = cross_review([locks], Facts(window, window, [metric("act.wait_lock", 9.0)]))
    assert [(c.code, c.left_baseline) for c in causes] == [("lock_contention", ["act.wait_lock"])]


def draw(tmp_path: Path, cited: CausesCited | None, params: dict[str, object]) -> Observation:
    abnormal = [metric(f"m.{i}", 10.0 - i) for i in range(4)]
    window = WindowEvidence(
        started_at=0.0,
        seconds=5.0,
        interval=1.0,
        series={m.name: [1.0, 2.0, 3.0] for m in abnormal},
    )
    record = FactsRecord(window=window, baseline=window, abnormal=abnormal, alert="")
    workspace = Workspace(tmp_path / "w.duckdb")
    workspace.put_observation(FACTS_KEY, record.model_dump_json())
    if cited is not None:
        workspace.put_observation(CITED_KEY, cited.model_dump_json())
    ctx = OperatorContext(TARGET, workspace, Settings(), None, tmp_path)
    return get(CHART).run(ctx, params)


def test_the_painter_asked_for_the_cited_metrics_draws_only_those(tmp_path: Path):
    cause = CausesCited(causes=1, metrics=["m.2"])
    assert draw(tmp_path / "a", cause, {}).summary == "chart of 4 abnormal metrics"
    narrowed = draw(tmp_path / "b", cause, {CITED_ONLY: True})
    assert narrowed.summary.startswith("chart of 1 abnormal metrics (what the 1 root cause rest on")
    assert (tmp_path / "b" / narrowed.charts[0]).is_file()
    assert "that the root causes rest on" in next(iter(narrowed.captions.values()))
    # no cross review completed: the strongest, as the playbook draws them
    assert draw(tmp_path / "c", None, {CITED_ONLY: True}).summary == "chart of 4 abnormal metrics"
    nothing = draw(tmp_path / "d", CausesCited(causes=1, metrics=[]), {CITED_ONLY: True})
    assert nothing.charts == [] and "rest on none that left the baseline" in nothing.summary
    assert not (tmp_path / "d" / "charts").exists()


def test_a_task_records_the_cpu_seconds_of_its_thread(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def spin(_ctx: OperatorContext, _params: NoParams) -> Observation:
        started = time.thread_time()
        while time.thread_time() - started < 0.05:
            pass
        return Observation(summary="spun")

    def nap(_ctx: OperatorContext, _params: NoParams) -> Observation:
        time.sleep(0.3)  # asleep: no CPU of this thread, however loaded the host
        return Observation(summary="slept")

    for name, fn in (("test_spin", spin), ("test_nap", nap)):
        op = replace(get("check_bloat"), name=name, fn=fn, params_model=NoParams, needs=())
        monkeypatch.setitem(REGISTRY, name, op)
    ctx = OperatorContext(TARGET, Workspace(tmp_path / "w.duckdb"), Settings(), None, tmp_path)
    injector = FaultInjector([], TARGET)
    spun = perform(TaskSpec(id="spin", agent="a", operator="test_spin"), ctx, injector, 0)
    slept = perform(TaskSpec(id="nap", agent="a", operator="test_nap"), ctx, injector, 0)
    assert spun.cpu_seconds >= 0.05 and spun.seconds >= spun.cpu_seconds
    assert slept.seconds >= 0.3 and slept.cpu_seconds < 0.1


def test_the_team_table_says_what_each_task_cost():
    strategy = plan("backends queue for row locks held by a long transaction")
    ran = TaskOutcome(
        task_id="sample_anomaly_window",
        operator="sample_anomaly_window",
        status=TaskStatus.DONE,
        seconds=6.25,
        cpu_seconds=0.41,
    )
    outcomes = {
        ran.task_id: ran,
        "paint_incident": skipped(
            strategy.task("paint_incident"), SkipCause(kind=SkipKind.DEADLINE, detail="near")
        ),
    }
    team = team_of(strategy, outcomes)
    collector = next(m for m in team if "sample_anomaly_window" in m.tasks)
    at = collector.tasks.index("sample_anomaly_window")
    assert (collector.seconds[at], collector.cpu_seconds[at]) == (6.25, 0.41)
    painter = next(m for m in team if "paint_incident" in m.tasks)
    assert painter.seconds[painter.tasks.index("paint_incident")] is None
    report = Report(
        run_id="r1",
        target=TargetInfo(kind="postgresql", display="postgresql://h/shop"),
        scenario=Scenario.DIAGNOSE,
        started_at=datetime.now(UTC),
        finished_at=datetime.now(UTC),
        brain="rules",
        plan=strategy.rationale,
        team=team,
    )
    text = render_markdown(report, {})
    assert "time (wall, CPU)" in text
    row = next(line for line in text.splitlines() if line.startswith(f"| {collector.agent}"))
    assert "6.25 s, 0.41 s CPU" in row
    row = next(line for line in text.splitlines() if line.startswith(f"| {painter.agent}"))
    assert "did not run" in row
    # a report written before these figures renders without them
    older = report.model_copy(
        update={"team": [m.model_copy(update={"seconds": [], "cpu_seconds": []}) for m in team]}
    )
    assert "did not run" not in render_markdown(older, {})
