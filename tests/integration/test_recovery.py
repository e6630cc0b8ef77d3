"""Recovery on a real PostgreSQL: the alert protocol, instructions, gap-narrow re-plans, the re-plan budget, ablations."""

from __future__ import annotations

from pathlib import Path

from dbcrew.lab.shop import DemoShop
from dbcrew.models import Report
from dbcrew.models.faults import FaultSpec
from dbcrew.roles.crew.context import RunContext
from dbcrew.roles.spine import PlainPhases
from dbcrew.roles.spine import review as review_run
from dbcrew.settings.run import Ablations, Settings
from dbcrew.targets import parse_target

WINDOW = 1.0


def review(dsn: str, out: Path, faults: list[str], **switches: bool) -> Report:
    settings = Settings(window_seconds=WINDOW, activity_samples=2, ablations=Ablations(**switches))
    run = RunContext(
        target=parse_target(dsn),
        settings=settings,
        out_dir=out,
        faults=[FaultSpec.parse(f) for f in faults],
    )
    return review_run(run, PlainPhases)


def coverage(report: Report) -> dict[str, str]:
    return {c.check: c.status.value for c in report.coverage}


def test_alert_pauses_the_crew_and_the_monitor_sees_the_compacted_global_state(
    shop: DemoShop, tmp_path: Path
):
    report = review(shop.dsn, tmp_path, ["check_sessions:timeout"])
    decision = report.decisions[0]
    state = decision.state
    assert state is not None and decision.task_id == "check_sessions"
    assert state.failed == ["check_sessions"] and "statement timeout" in state.error
    # Three attempts (the worker's two self-corrections), each with its reflection, and the log's tail.
    assert len(state.history) == 3 and "statement_timeout" in state.reflection
    assert any(line.startswith("failed: QueryCanceled") for line in state.logs)
    # Every task of the plan is in exactly one place of the compacted state.
    places = [*state.done, *state.failed, *state.skipped, *state.pending]
    assert len(places) == len(set(places)) and "check_sessions" not in state.pending
    assert set(state.running) <= set(state.done) | set(state.failed)
    assert all(
        worker.split(" finished ")[1].split(":")[0] in state.running for worker in state.workers
    )
    md = (tmp_path / "report.md").read_text()
    assert "### Monitor decisions" in md and "The crew paused:" in md


def test_use_equivalent_instruction_is_a_recorded_edit_and_reruns_only_the_replacement(
    shop: DemoShop, tmp_path: Path
):
    report = review(shop.dsn, tmp_path, ["collect_table_stats:timeout"])
    assert (report.phases.alerts, report.phases.replans) == (1, 0)
    edit = next(e for e in report.edits if e.source == "monitor")
    assert (edit.kind.value, edit.task_id, edit.after.operator) == (
        "replace",
        "collect_table_stats",
        "collect_table_stats_all",
    )
    assert report.phases.reexecuted_tasks == 1
    assert all(status == "ran" for status in coverage(report).values())
    assert ("dead_tuples_high", "public.cart_items") in {
        (f.code, f.object) for f in report.findings
    }


def test_replan_edits_are_reported_with_before_and_after(shop: DemoShop, tmp_path: Path):
    report = review(shop.dsn, tmp_path, ["collect_table_stats:misfit"])
    assert report.phases.replans == 1
    replace = next(e for e in report.edits if e.source == "replan")
    assert (replace.kind.value, replace.before.operator, replace.after.operator) == (
        "replace",
        "collect_table_stats",
        "collect_table_stats_all",
    )
    assert [e.kind.value for e in report.edits] == [
        "replace"
    ]  # nothing else of the plan was touched
    assert report.phases.reexecuted_tasks == 1 and report.phases.reused_tasks >= 6
    md = (tmp_path / "report.md").read_text()
    assert "### Plan edits" in md and "collect_table_stats_all" in md
    assert "<h3>Plan edits</h3>" in (tmp_path / "report.html").read_text()


def test_without_gap_narrow_a_replan_reruns_everything(shop: DemoShop, tmp_path: Path):
    # Memory off in both: the first run's lesson would otherwise spare the second its re-plan.
    narrow = review(shop.dsn, tmp_path / "narrow", ["collect_table_stats:misfit"], memory=False)
    wide = review(
        shop.dsn, tmp_path / "wide", ["collect_table_stats:misfit"], gap_narrow=False, memory=False
    )
    assert wide.phases.replans == 1 and wide.ablations == ["no-gap-narrow", "no-memory"]
    assert wide.phases.reused_tasks == 0 and narrow.phases.reused_tasks >= 6
    assert wide.phases.reexecuted_tasks > 3 * narrow.phases.reexecuted_tasks
    assert all(status == "ran" for status in coverage(wide).values())


def test_replan_budget_ends_in_an_honest_partial_report(shop: DemoShop, tmp_path: Path):
    # Both table-statistics collectors misfit: without its short-term memory read (the no-memory
    # ablation) the planner swaps between them until the budget is spent.
    report = review(
        shop.dsn,
        tmp_path,
        ["collect_table_stats:misfit", "collect_table_stats_all:misfit"],
        memory=False,
    )
    assert report.phases.replans == 3 and report.phases.plans == 4
    assert report.partial.startswith("stopped re-planning after 3 re-plans")
    assert report.decisions[-1].remedy.endswith("(refused: the re-plan budget is spent)")
    cov = {c.check: c for c in report.coverage}
    assert (
        cov["check_vacuum_health"].status.value == "skipped"
        and "collect_table_stats" in cov["check_vacuum_health"].reason
    )
    assert cov["check_duplicate_indexes"].status.value == "ran"
    assert ("index_duplicate", "public.orders_customer_id_idx") in {
        (f.code, f.object) for f in report.findings
    }
    assert "Partial review" in (tmp_path / "report.md").read_text()


def test_missing_agent_is_fixed_by_reflection_or_else_by_a_replan_that_adds_it(
    shop: DemoShop, tmp_path: Path
):
    reflected = review(
        shop.dsn, tmp_path / "reflected", ["paint_table_activity:missing_agent"], memory=False
    )
    assert reflected.phases.alerts == 0 and "paint_table_activity" not in {
        d.task_id for d in reflected.decisions
    }
    replanned = review(
        shop.dsn, tmp_path / "replanned", ["paint_table_activity:missing_agent"], reflection=False
    )
    decision = replanned.decisions[0]
    assert (decision.task_id, decision.branch) == (
        "paint_table_activity",
        "logic",
    ) and "MissingAgent" in decision.error
    assert replanned.phases.replans == 1
    assert "add_agent" in {e.kind.value for e in replanned.edits}
    # the painter's chart is drawn once its agent is added (the second run also has history's trends chart)
    assert "charts/table_activity.png" in replanned.charts


def test_without_monitor_a_failure_just_fails_and_its_dependents_skip(
    shop: DemoShop, tmp_path: Path
):
    report = review(shop.dsn, tmp_path, ["collect_index_stats:misfit"], monitor=False)
    assert report.decisions == [] and report.phases.replans == 0 and report.phases.alerts == 1
    cov = {c.check: c for c in report.coverage}
    assert cov["check_duplicate_indexes"].status.value == "skipped"
    assert "collect_index_stats" in cov["check_duplicate_indexes"].reason
    assert cov["check_vacuum_health"].status.value == "ran"


def test_without_reflection_workers_do_not_self_correct(shop: DemoShop, tmp_path: Path):
    # One transient timeout: the worker's own retry absorbs it, unless self-correction is off.
    full = review(shop.dsn, tmp_path / "full", ["check_checkpoints:timeout:1"], memory=False)
    bare = review(
        shop.dsn, tmp_path / "bare", ["check_checkpoints:timeout:1"], reflection=False, memory=False
    )
    assert full.phases.alerts == 0
    assert (
        bare.phases.alerts == 1
        and bare.decisions[0].state.reflection == "self-correction is off: raising an alert"
    )
    assert len(bare.decisions[0].state.history) == 1
