"""The rules brain composes the team from the alert (dbcrew/roles/brains/composing.py) and reflects on its fit
before the run (dbcrew/roles/brains/team_fit.py); the fixed playbooks are the fallback.

The alerts here are not the benchmark's (bench/plan_cases*.yaml, kept out of the tests)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import dbcrew.operators  # noqa: F401  (registers operators)
from dbcrew.models import Brief, Report, Strategy
from dbcrew.models.crew import PlanRequest
from dbcrew.models.incident import STRONGEST_SIGNALS, IncidentSignal
from dbcrew.models.report import TargetInfo
from dbcrew.operators.diagnose.facts import FactsRecord
from dbcrew.operators.diagnose.steps import FACTS_KEY, joined_experts, retrieved
from dbcrew.operators.registry import OperatorContext, catalogue, get
from dbcrew.operators.window.anomaly import AbnormalMetric
from dbcrew.operators.window.evidence import WindowEvidence
from dbcrew.roles.brains.composing import signals_named, words
from dbcrew.roles.brains.playbooks import EXPERT_PREFIX
from dbcrew.roles.brains.rules import RulesBrain
from dbcrew.roles.brains.team_fit import team_problems, uncovered
from dbcrew.roles.crew.capabilities import plan_constraints, prune
from dbcrew.roles.crew.planner import make_plan
from dbcrew.roles.crew.validators import validate
from dbcrew.roles.diagnosis.review import librarians_chunks
from dbcrew.roles.report.reporter import render_markdown, team_of
from dbcrew.settings.run import Ablations, Settings
from dbcrew.targets import parse_target
from dbcrew.vocabulary import ProblemKind, Scenario
from dbcrew.workspace import Workspace

EXPERTS = {e.name for e in catalogue() if e.name.startswith(EXPERT_PREFIX)}


def brief(**changes: object) -> Brief:
    base = {
        "server_version": "18.6",
        "server_version_num": 180006,
        "database": "shop",
        "current_user": "monitor",
        "extensions": ["pg_stat_statements", "hypopg"],
        "preloaded_libraries": ["pg_stat_statements"],
        "can_read_all_stats": True,
    }
    return Brief(**{**base, **changes})


def request(alert: str, scenario: Scenario = Scenario.DIAGNOSE, **changes: object) -> PlanRequest:
    b = brief()
    return PlanRequest(
        scenario=scenario,
        brief=b,
        catalogue=prune(b, catalogue()).available,
        alert=alert,
        **changes,
    )


def planned(req: PlanRequest) -> Strategy:
    strategy = make_plan(RulesBrain(), req, max_rounds=2).strategy
    assert validate(strategy, req.catalogue) == []
    return strategy


def operators_of(strategy: Strategy) -> set[str]:
    return {t.operator for t in strategy.tasks}


def test_a_symptom_gets_the_matching_expert_and_not_the_unrelated_ones():
    strategy = planned(request("user sessions hang, each one waiting for a lock another holds"))
    ops = operators_of(strategy)
    assert "expert_locks" in ops
    assert not {"expert_memory", "expert_io", "expert_cpu"} & ops
    # what every diagnosis carries, by declaration: the window, the cross review, the charts
    assert {"sample_anomaly_window", "cross_review_causes", "paint_abnormal_metrics"} <= ops
    assert strategy.rationale.startswith("composed from the alert")
    locks = strategy.task("expert_locks")
    assert locks.agent == "locks-expert" and "the alert matches" in locks.why


def test_a_standby_alert_brings_the_replication_check_and_its_collector():
    strategy = planned(request("reads from the hot standby lag far behind the primary"))
    ops = operators_of(strategy)
    assert "check_replication_lag" in ops
    assert "collect_replication" in ops  # closed over the check's needs
    assert not EXPERTS & ops - {"expert_workload", "expert_configuration", "expert_io"}
    collector = strategy.task("collect_replication")
    assert "which check_replication_lag needs" in collector.why
    assert strategy.agent(strategy.task("check_replication_lag").agent).role.value == "tasker"


def test_an_alert_in_other_words_matches_through_the_glossary():
    # 'logins' and 'session' are the glossary's words for a connection (knowledge/symptoms/terms.yaml):
    # without it the first alert matched nothing and the second only the session check
    for alert in (
        "the web tier's logins are turned away at peak",
        "the worker pool gets no session from the server at startup",
    ):
        assert "check_connections" in operators_of(planned(request(alert)))
    # an identifier stays one word beside its parts, and an inflection folds to its head
    assert {"max_connections", "max", "logins", "connection"} <= set(
        words("Logins fail at max_connections")
    )


def test_a_watcher_signal_calls_in_the_expert_that_judges_it():
    alert = "watcher incident from 10:00:00 to 10:04:00 UTC: host.swap_io_mb 0 -> 85"
    strategy = planned(request(alert))
    memory = strategy.task("expert_memory")
    assert "host.swap_io_mb" in memory.why


def test_an_incidents_typed_signals_compose_the_team_when_the_text_names_none():
    """A watcher's incident hands its signals over typed: the team is composed from them, not from the text."""
    swap = IncidentSignal(name="host.swap_io_mb", baseline_median=0.0, peak=85.0, z=9.0)
    for alert in ("", "checkout is slow"):
        strategy = planned(request(alert, signals=[swap]))
        memory = strategy.task("expert_memory")
        assert "host.swap_io_mb, a signal the incident found abnormal" in memory.why
        assert "not composed" not in strategy.rationale


def test_only_the_strongest_of_an_incidents_signals_pick_the_team():
    weak = IncidentSignal(name="act.wait_lock", baseline_median=0.0, peak=1.0, z=3.1)
    strong = [
        IncidentSignal(name="host.swap_io_mb", baseline_median=0.0, peak=85.0, z=20.0 - i)
        for i in range(STRONGEST_SIGNALS)
    ]
    req = request("", signals=[*strong, weak])
    assert signals_named(req) == ["host.swap_io_mb"]
    assert signals_named(request("", signals=[weak, *strong])) == [
        "act.wait_lock",
        "host.swap_io_mb",
    ]
    assert "expert_locks" not in operators_of(planned(req))


def test_no_alert_or_a_vague_one_runs_the_whole_playbook():
    for alert in ("", "zzz qqq"):
        strategy = planned(request(alert))
        assert EXPERTS <= operators_of(strategy)
        assert "not composed" in strategy.rationale


def test_the_nightly_review_keeps_its_full_coverage():
    full = planned(request("", Scenario.HEALTH))
    off = planned(request("", Scenario.HEALTH, compose=False))
    assert operators_of(full) == operators_of(off)
    assert {e.name for e in full.team} == {e.name for e in off.team}
    assert "check_bloat" in operators_of(full) and "check_replication_lag" in operators_of(full)


def test_composition_switched_off_plans_the_playbook_whatever_the_alert():
    strategy = planned(request("user sessions hang waiting for locks", compose=False))
    assert EXPERTS <= operators_of(strategy)
    assert "plan composition switched off" in strategy.rationale


def test_reflection_adds_the_expert_a_named_signal_needs_and_drops_an_idle_agent():
    req = request("watcher incident: act.wait_lock 0 -> 9")
    strategy = planned(req)
    damaged = strategy.remove_tasks({"expert_locks"})  # its agent stays, idle
    problems = team_problems(req, damaged)
    kinds = {p.kind for p in problems}
    assert kinds == {ProblemKind.MISSING_CHECK, ProblemKind.IDLE_AGENT}
    repaired = make_plan(RulesBrain(), req, 2, draft=lambda _s: damaged)
    assert len(repaired.rounds) == 1
    assert "expert_locks" in operators_of(repaired.strategy)
    assert team_problems(req, repaired.strategy) == []
    assert "added by reflection" in repaired.strategy.task("expert_locks").why
    assert all(
        any(t.agent == a.name for t in repaired.strategy.tasks) for a in repaired.strategy.team
    )


def test_a_signal_nothing_judges_is_a_reported_gap():
    req = request("watcher incident: act.wait_lock 0 -> 9")
    strategy = planned(req)
    assert uncovered(req, strategy) == []
    without_locks = strategy.remove_tasks({"expert_locks"})
    # the target can run no operator that judges it: nothing to add, the gap is reported
    req_without = req.model_copy(
        update={"catalogue": [e for e in req.catalogue if e.name != "expert_locks"]}
    )
    assert uncovered(req_without, without_locks) == ["act.wait_lock"]


def test_the_constraints_say_the_deadline_the_privileges_and_what_the_target_lacks():
    b = brief(can_read_all_stats=False, extensions=[], in_recovery=True)
    constraints = plan_constraints(b, 70.4)
    assert constraints[0] == "answer due within 70 s"
    assert any("pg_read_all_stats" in c for c in constraints)
    assert any(c.startswith("no hypopg") for c in constraints)
    assert any("standby" in c for c in constraints)


def test_the_report_says_why_each_agent_is_on_the_team():
    strategy = planned(request("sessions hang waiting for a lock another session holds"))
    report = Report(
        run_id="r1",
        target=TargetInfo(kind="postgresql", display="postgresql://h/shop"),
        scenario=Scenario.DIAGNOSE,
        started_at=datetime.now(UTC),
        finished_at=datetime.now(UTC),
        brain="rules",
        plan=strategy.rationale,
        team=team_of(strategy),
    )
    text = render_markdown(report, {})
    assert "### The team" in text and "why on the team" in text
    row = next(line for line in text.splitlines() if line.startswith("| locks-expert"))
    assert "the alert matches its description" in row


def test_the_chief_is_told_the_team_and_the_window_calls_in_the_experts_left_out():
    composed = planned(request("user sessions hang, each one waiting for a lock another holds"))
    team = composed.task("cross_review_causes").params["team"]
    assert "locks" in team and "memory" not in team
    assert planned(request("")).task("cross_review_causes").params == {}  # the playbook: all on it
    window = WindowEvidence(started_at=0.0, seconds=10.0, interval=1.0)
    swapping = AbnormalMetric(
        name="host.swap_io_mb", baseline_median=0.0, window_median=80.0, z=9.0, ks_p=0.001
    )
    record = FactsRecord(window=window, baseline=window, abnormal=[swapping], alert="locks")
    # memory is called in by the window and was not planned: it joins; locks ran as planned
    assert joined_experts(record, team, {"candidates_locks"}) == ["memory"]
    # a planned expert that failed (no candidates) is not run again here
    assert "locks" not in joined_experts(record, team, set())
    assert joined_experts(record, None, set()) == []


def test_a_diagnosis_plans_a_librarian_whose_chunks_reach_the_chief(tmp_path: Path):
    for alert in ("", "user sessions hang, each one waiting for a lock another holds"):
        strategy = planned(request(alert))
        task = strategy.task("retrieve_knowledge")
        assert task.agent == "librarian"
        assert "retrieve_knowledge" in strategy.task("cross_review_causes").needs
    window = WindowEvidence(started_at=0.0, seconds=10.0, interval=1.0)
    waits = AbnormalMetric(
        name="act.wait_lock", baseline_median=0.0, window_median=6.0, z=12.0, ks_p=0.001
    )
    record = FactsRecord(window=window, baseline=window, abnormal=[waits], alert="sessions wait")
    target = parse_target("postgresql://monitor@127.0.0.1:1/shop")
    for knowing in (True, False):
        workspace = Workspace(tmp_path / f"{knowing}.duckdb")
        workspace.put_observation(FACTS_KEY, record.model_dump_json())
        settings = Settings(ablations=Ablations(knowledge=knowing))
        ctx = OperatorContext(target, workspace, settings, None, tmp_path)
        seen = get("retrieve_knowledge").run(ctx, {})
        handed = retrieved(ctx)
        assert handed is not None
        if knowing:
            assert handed and handed[0].expert == "locks", handed
            assert librarians_chunks(workspace)["locks"][0].startswith(handed[0].name)
        else:
            assert handed == [] and "switched off" in seen.summary
            assert librarians_chunks(workspace) == {}


def test_a_composed_plan_that_cannot_be_made_valid_falls_back_to_the_playbook():
    def careless(strategy: Strategy) -> Strategy:
        if "not composed" in strategy.rationale:
            return strategy
        bogus = strategy.tasks[0].model_copy(update={"id": "x", "operator": "drop_everything"})
        return strategy.insert_task(bogus)

    req = request("user sessions hang, each one waiting for a lock another holds")
    strategy = make_plan(RulesBrain(), req, 2, reflection=False, draft=careless).strategy
    assert EXPERTS <= operators_of(strategy)
    assert "the composed plan could not be made valid" in strategy.rationale
