"""Memory that carries over, on a real PostgreSQL: a remembered fix applied by the re-plan, a fix that
failed in this run never brought back, and an unfixed error remembered and reported by the next run."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.lab.shop import DemoShop
from dbcrew.models import Report
from dbcrew.models.faults import FaultSpec
from dbcrew.models.plan import EditKind
from dbcrew.roles.crew.context import RunContext
from dbcrew.roles.crew.memory import LongTermMemory, UnfixedError
from dbcrew.roles.crew.run import Initialized
from dbcrew.roles.spine import PlainPhases
from dbcrew.roles.spine import review as review_run
from dbcrew.settings.run import Ablations, Settings
from dbcrew.store import open_store
from dbcrew.targets import parse_target


def run_for(dsn: str, out: Path, faults: list[str], **switches: bool) -> RunContext:
    return RunContext(
        target=parse_target(dsn),
        out_dir=out,
        faults=[FaultSpec.parse(f) for f in faults],
        settings=Settings(window_seconds=1.0, activity_samples=2, ablations=Ablations(**switches)),
    )


def planned_already(init: Initialized) -> type[PlainPhases]:
    """The plain phases with the plan made earlier (before another run's lesson reached the store)."""
    return type("PlannedEarlier", (PlainPhases,), {"initialize": staticmethod(lambda run: init)})


def test_a_fix_another_run_remembered_is_applied_by_the_rules_replan(
    shop: DemoShop, tmp_path: Path
):
    faults = ["collect_table_stats:misfit"]
    # Two runs on one target overlap: the later one planned while memory still knew nothing.
    later = run_for(shop.dsn, tmp_path / "later", faults)
    init = PlainPhases.initialize(later)
    assert init.edits == [] and "collect_table_stats" in {t.operator for t in init.strategy.tasks}
    first = review_run(run_for(shop.dsn, tmp_path / "first", faults), PlainPhases)
    (brain_fix,) = [e for e in first.edits if e.kind is EditKind.REPLACE]
    assert brain_fix.source == "replan"  # the first run's fix came from the rules brain

    report: Report = review_run(later, planned_already(init))
    assert report.phases.replans == 1 and report.decisions[0].leaf == "wrong_operator"
    (fix,) = [e for e in report.edits if e.kind is EditKind.REPLACE]
    assert fix.source == "memory" and fix.reason.startswith("memory: collect_table_stats failed")
    assert (fix.before.operator, fix.after.operator) == (
        "collect_table_stats",
        "collect_table_stats_all",
    )
    assert all(c.status.value == "ran" for c in report.coverage)


def test_a_replan_never_brings_back_a_call_that_failed_in_this_run(shop: DemoShop, tmp_path: Path):
    # Both table-statistics collectors misfit: with its short-term memory read, the second re-plan
    # does not swap back to the collector that failed first; it removes what cannot run.
    report = review_run(
        run_for(
            shop.dsn, tmp_path, ["collect_table_stats:misfit", "collect_table_stats_all:misfit"]
        ),
        PlainPhases,
    )
    assert report.phases.replans == 2 and not report.partial
    brought = [e.after.operator for e in report.edits if e.after is not None]
    assert brought.count("collect_table_stats") == 0, report.edits
    removed = {e.task_id for e in report.edits if e.kind is EditKind.REMOVE}
    assert "collect_table_stats_all" in removed
    cov = {c.check: c for c in report.coverage}
    assert cov["check_vacuum_health"].status.value != "ran"
    assert cov["check_duplicate_indexes"].status.value == "ran"
    # (Without memory it swaps between the two until the budget is spent: tests/integration/test_recovery.py.)


def test_an_unfixed_privilege_error_is_remembered_and_reported_next_run(
    pg: EmbeddedPostgres, tmp_path: Path, private_store: Path
):
    # A real refusal: pg_stat_statements readable by no one but its owner, reviewed as a pg_monitor role.
    pg.psql("CREATE DATABASE kept;")
    pg.psql(
        "CREATE EXTENSION pg_stat_statements; REVOKE ALL ON pg_stat_statements FROM PUBLIC;"
        " CREATE TABLE t (id int PRIMARY KEY);",
        dbname="kept",
    )
    pg.psql(
        "CREATE ROLE keeper LOGIN; GRANT pg_monitor TO keeper; GRANT CONNECT ON DATABASE kept TO keeper;"
    )
    dsn = pg.dsn("kept", user="keeper")
    first = review_run(run_for(dsn, tmp_path / "first", []), PlainPhases)
    refused = {d.task_id for d in first.decisions if d.leaf == "permission"}
    assert refused and first.unfixed_before == []
    memory = LongTermMemory(open_store(str(private_store)))
    (target,) = {t.target for t in memory.store.targets()}
    known = {e.operator: e for e in memory.unfixed(target) if e.leaf == "permission"}
    assert set(known) == refused  # every task the refusal stopped (their ids are their operators)
    assert all(e.runs == 1 and "permission denied" in e.error for e in known.values())

    second = review_run(run_for(dsn, tmp_path / "second", []), PlainPhases)
    said = {line.split(" ")[0]: line for line in second.unfixed_before}
    assert set(said) == set(known)
    for operator, line in said.items():
        assert line.startswith(f"{operator} left unfixed in 1 earlier run (first {first.run_id}")
        assert line.endswith(f"This run: {operator} failed")
    assert "Errors earlier runs left unfixed" in (tmp_path / "second" / "report.md").read_text()
    again = {e.operator: e for e in memory.unfixed(target)}
    assert {o: (e.runs, e.first_run) for o, e in again.items()} == dict.fromkeys(
        known, (2, first.run_id)
    )

    # Granted: the operators run to the end, the report says so, and memory forgets their errors.
    pg.psql("GRANT SELECT ON pg_stat_statements TO keeper;", dbname="kept")
    third = review_run(run_for(dsn, tmp_path / "third", []), PlainPhases)
    assert sorted(line.split(". This run: ")[1] for line in third.unfixed_before) == sorted(
        f"{o} done" for o in known
    )
    assert memory.unfixed(target) == []


@pytest.mark.parametrize("backend", ["duckdb", "postgresql"])
def test_unfixed_errors_are_counted_and_forgotten_in_either_store(
    backend: str, pg: EmbeddedPostgres, tmp_path: Path
):
    if backend == "duckdb":
        url = str(tmp_path / "store.duckdb")
    else:
        name = f"store_{uuid.uuid4().hex[:8]}"
        pg.psql(f"CREATE DATABASE {name};")
        url = pg.dsn(name)
    memory = LongTermMemory(open_store(url))
    error = UnfixedError(
        target="1/shop",
        operator="collect_statements",
        leaf="permission",
        error="InsufficientPrivilege: permission denied for view pg_stat_statements",
        remedy="instruction: skip, then failed",
        first_run="r1",
        last_run="r1",
    )
    memory.keep_unfixed("1/shop", [error], ran=set())
    later = error.model_copy(update={"first_run": "r2", "last_run": "r2"})
    memory.keep_unfixed("1/shop", [later], ran={"collect_settings"})
    (kept,) = memory.unfixed("1/shop")
    assert (kept.runs, kept.first_run, kept.last_run) == (2, "r1", "r2")
    assert memory.unfixed("2/other") == []
    memory.keep_unfixed("1/shop", [], ran={"collect_statements"})
    assert memory.unfixed("1/shop") == []
