"""Bench section `faults`: how the crew recovers from injected faults, with each recovery feature switched off in turn.

One embedded PostgreSQL with the planted demo shop serves every run. Each scenario injects real
faults (statement timeouts, refused connections, operator misfits, damaged plans) and runs one
review through the plain phase runner with a short window. The scenarios run in order for each
configuration, each configuration with its own fresh long-term memory, as a series of reviews
of one target would.

A run is *correct* when it ends with a report in which
  1. every planted finding is present whose check the faults did not make impossible, and
  2. coverage is honest: a check reported as "ran" really completed, and a check the faults made
     impossible is reported as failed or skipped, with a reason.
A check is impossible when an operator it needs (itself or an upstream producer of what it
needs) fails on every call and has no working equivalent; a check that only *uses* a lost
artifact runs degraded, may miss its plant, and honestly reports that it ran.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import dbcrew.operators  # noqa: F401  (registers every operator)
from bench.external_faults import CASES as EXTERNAL_CASES
from bench.external_faults import external
from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.lab.shop import DemoShop
from dbcrew.models import Report
from dbcrew.models.faults import FaultKind, FaultSpec
from dbcrew.operators.registry import REGISTRY, equivalents
from dbcrew.roles.crew.context import RunContext
from dbcrew.roles.report.deadline import RUN_DEADLINE
from dbcrew.roles.spine import PlainPhases, review
from dbcrew.settings.run import Ablations, Settings
from dbcrew.targets import parse_target
from dbcrew.vocabulary import TaskStatus
from dbcrew.workspace import Workspace

WINDOW = 0.5
RUN_TIME_KINDS = (FaultKind.TIMEOUT, FaultKind.MISFIT, FaultKind.DISCONNECT)

# (name, faults): transient, persistent, wrong parameters, missing agents, wrong operators, lost order, combinations.
SCENARIOS: list[tuple[str, list[str]]] = [
    ("transient timeout, collector", ["collect_table_stats:timeout:1"]),
    ("transient timeout x2, collector", ["collect_index_stats:timeout:2"]),
    ("transient timeout, activity", ["collect_activity:timeout:1"]),
    ("transient timeout, check", ["check_vacuum_health:timeout:1"]),
    ("transient timeout x2, check", ["check_duplicate_indexes:timeout:2"]),
    ("transient disconnect, settings", ["collect_settings:disconnect:1"]),
    ("transient disconnect x2, schema", ["collect_schema:disconnect:2"]),
    ("transient disconnect, check", ["check_missing_indexes:disconnect:1"]),
    ("persistent timeout, collector with equivalent", ["collect_table_stats:timeout"]),
    ("persistent timeout, check", ["check_sessions:timeout"]),
    ("persistent timeout, collector without equivalent", ["collect_index_stats:timeout"]),
    ("persistent timeout, statements", ["collect_statements:timeout"]),
    ("wrong operator, collector with equivalent", ["collect_table_stats:misfit"]),
    ("wrong operator, collector without equivalent", ["collect_index_stats:misfit"]),
    ("wrong operator, check", ["check_primary_keys:misfit"]),
    ("wrong operator, settings", ["collect_settings:misfit"]),
    ("wrong operator, painter", ["paint_table_activity:misfit"]),
    ("wrong parameters, index collector", ["collect_index_stats:bad_param"]),
    ("wrong parameters, activity", ["collect_activity:bad_param"]),
    ("wrong parameters, check", ["check_vacuum_health:bad_param"]),
    ("wrong parameters, table collector", ["collect_table_stats:bad_param"]),
    ("missing agent, painter", ["paint_table_activity:missing_agent"]),
    ("missing agent, health-checker", ["check_sessions:missing_agent"]),
    ("missing agent, collector", ["collect_database_stats:missing_agent"]),
    ("lost dependency, vacuum check", ["check_vacuum_health:lost_dependency"]),
    ("lost dependency, duplicate-index check", ["check_duplicate_indexes:lost_dependency"]),
    (
        "wrong operator + transient timeout",
        ["collect_table_stats:misfit", "check_sessions:timeout:1"],
    ),
    (
        "persistent timeout + wrong parameters",
        ["collect_table_stats:timeout", "collect_index_stats:bad_param"],
    ),
    (
        "missing painter + transient timeout",
        ["paint_table_activity:missing_agent", "collect_activity:timeout:1"],
    ),
    (
        "both table collectors wrong (re-plan budget)",
        ["collect_table_stats:misfit", "collect_table_stats_all:misfit"],
    ),
    (
        "transient timeout + disconnect + wrong parameters",
        [
            "collect_index_stats:timeout:1",
            "collect_settings:disconnect:1",
            "check_vacuum_health:bad_param",
        ],
    ),
    (
        "missing health-checker + wrong operator",
        ["check_duplicate_indexes:missing_agent", "collect_table_stats:misfit"],
    ),
    (
        "persistent timeout + transient timeout",
        ["collect_table_stats:timeout", "check_primary_keys:timeout:1"],
    ),
    (
        "wrong operator + lost dependency",
        ["collect_table_stats:misfit", "check_vacuum_health:lost_dependency"],
    ),
]

CONFIGS: list[tuple[str, Ablations]] = [
    ("full system", Ablations()),
    ("--no-monitor", Ablations(monitor=False)),
    ("--no-reflection", Ablations(reflection=False)),
    ("--no-gap-narrow", Ablations(gap_narrow=False)),
    ("--no-memory", Ablations(memory=False)),
]


def impossible_checks(faults: list[FaultSpec], *, degraded: bool = False) -> set[str]:
    """Checks no recovery can run: they need an operator that always fails and has no working equivalent.

    With `degraded`, the checks that run but without something they only *use* (soft dependency):
    they may miss a planted finding, yet honestly report that they ran.
    """
    always = {f.operator for f in faults if f.kind in RUN_TIME_KINDS and f.times is None}
    broken = {name for name in always if all(e.name in always for e in equivalents(name))}
    dead_artifacts: set[str] = set()
    changed = True
    while changed:  # an artifact is dead when every producer is broken or needs a dead artifact
        changed = False
        for artifact in {a for op in REGISTRY.values() for a in op.produces} - dead_artifacts:
            producers = [op for op in REGISTRY.values() if artifact in op.produces]
            if all(op.name in broken or set(op.needs) & dead_artifacts for op in producers):
                dead_artifacts.add(artifact)
                changed = True
    return {
        op.name
        for op in REGISTRY.values()
        if op.category == "checks"
        and (op.name in broken or set(op.uses if degraded else op.needs) & dead_artifacts)
    }


@dataclass
class RunFigures:
    correct: bool
    why: str
    alerts: int
    replans: int
    reexecuted: int
    seconds: float


@dataclass
class ConfigFigures:
    runs: list[RunFigures] = field(default_factory=list)

    def line(self, name: str) -> str:
        n = len(self.runs)
        ok = sum(r.correct for r in self.runs)
        recoveries = sum(r.alerts for r in self.runs)
        per_recovery = sum(r.reexecuted for r in self.runs) / recoveries if recoveries else 0.0
        return (
            f"  {name:16} {ok:3}/{n} {ok / n:5.0%}   {per_recovery:16.2f}   {sum(r.replans for r in self.runs) / n:12.2f}"
            f"   {recoveries / n:10.2f}   {sum(r.seconds for r in self.runs) / n:10.2f}"
        )


def completed_tasks(run: RunContext) -> set[str]:
    """The tasks that really completed, from the run's sensory memory: a record kept apart from the report."""
    rows = Workspace(run.workspace_path).query(
        "SELECT task_id FROM memory_sensory WHERE status = ?", [TaskStatus.DONE.value]
    )
    return {r["task_id"] for r in rows}


def judge(
    shop: DemoShop, faults: list[FaultSpec], run: RunContext, report: Report
) -> tuple[bool, str]:
    """Correct = every planted finding that was possible is found, and coverage is honest."""
    impossible = impossible_checks(faults)
    excused = impossible | impossible_checks(faults, degraded=True)
    emitter = {code: op.name for op in REGISTRY.values() for code in op.checks}
    found = {(f.code, f.object) for f in report.findings}
    missed = [
        plant for plant in shop.expected if emitter[plant[0]] not in excused and plant not in found
    ]
    if missed:
        return False, f"missed {sorted(missed)}"
    completed = completed_tasks(run)
    for entry in report.coverage:
        if entry.check == RUN_DEADLINE:
            continue  # the run's own line (what stood down before its deadline), not a check's
        done = entry.check in completed
        if entry.status.value == "ran" and not done:
            return False, f"{entry.check} reported as ran but did not complete"
        if entry.check in impossible and (entry.status.value == "ran" or not entry.reason):
            return (
                False,
                f"{entry.check} was impossible but coverage says {entry.status.value} {entry.reason!r}",
            )
    return True, ""


def run_one(
    shop: DemoShop, work: Path, memory: Path, ablations: Ablations, faults: list[FaultSpec]
) -> RunFigures:
    settings = Settings(
        window_seconds=WINDOW, activity_samples=2, ablations=ablations, store_url=str(memory)
    )
    run = RunContext(target=parse_target(shop.dsn), settings=settings, out_dir=work, faults=faults)
    started = time.perf_counter()
    try:
        report = review(run, PlainPhases)
    except Exception as exc:  # noqa: BLE001 - a crashed review is an incorrect run, and the bench says why
        return RunFigures(
            False, f"crashed: {type(exc).__name__}: {exc}", 0, 0, 0, time.perf_counter() - started
        )
    seconds = time.perf_counter() - started
    correct, why = judge(shop, faults, run, report)
    return RunFigures(
        correct,
        why,
        report.phases.alerts,
        report.phases.replans,
        report.phases.reexecuted_tasks,
        seconds,
    )


def main(argv: Sequence[str] = ()) -> None:
    """Injected faults, then external ones (`--external`: the external cases only)."""
    parser = argparse.ArgumentParser(prog="python -m bench faults", add_help=False)
    parser.add_argument(
        "--external", action="store_true", help="only the faults thrown from outside the product"
    )
    parser.add_argument(
        "--configs",
        default="",
        help="comma-separated configurations to run (default: all), e.g. 'full system,--no-reflection'",
    )
    parser.add_argument(
        "--cases", default="", help="only the external cases whose name contains this text"
    )
    options = parser.parse_args(list(argv))
    only_external = options.external
    chosen = {c.strip() for c in options.configs.split(",") if c.strip()}
    configs = [(name, ablations) for name, ablations in CONFIGS if not chosen or name in chosen]
    if not configs:
        parser.error(
            f"--configs: no configuration named {sorted(chosen)}; known: {[n for n, _ in CONFIGS]}"
        )
    if not any(options.cases in case.name for case in EXTERNAL_CASES):
        parser.error(f"--cases: no external case's name holds {options.cases!r}")
    work = Path(tempfile.mkdtemp(prefix="dbcrew-bench-faults-"))
    pg = EmbeddedPostgres(work / "pgdata").start()
    shop = None
    results: dict[str, ConfigFigures] = {}
    failures: dict[str, list[str]] = {}
    try:
        pg.psql("CREATE DATABASE shop;")
        shop = DemoShop(pg.dsn("shop")).build()
        shop.run_workload(6.0)
        shop.wait_until_idle_long_enough()
        # One uncounted review first, so no configuration pays for cold imports and caches.
        run_one(
            shop, work / "runs" / "warm-up", work / "memory" / "warm-up.duckdb", Ablations(), []
        )
        # Configurations take turns scenario by scenario, so a slow spell of the machine hits them all alike;
        # each keeps its own memory and sees the scenarios in the same order.
        for number, (name, faults) in enumerate([] if only_external else SCENARIOS):
            specs = [FaultSpec.parse(f) for f in faults]
            for config, ablations in configs:
                slug = config.strip("-").replace(" ", "-")
                outcome = run_one(
                    shop,
                    work / "runs" / slug / f"{number:02d}",
                    work / "memory" / f"{slug}.duckdb",
                    ablations,
                    specs,
                )
                results.setdefault(config, ConfigFigures()).runs.append(outcome)
                if not outcome.correct:
                    failures.setdefault(config, []).append(
                        f"{name} [{', '.join(faults)}]: {outcome.why}"
                    )
        external_lines = external(shop, pg, work, configs, options.cases)
    finally:
        if shop is not None:
            shop.close()
        pg.stop()
        shutil.rmtree(work, ignore_errors=True)  # a cluster of up to a few GB: never left in /tmp
    for line in external_lines:
        print(line)
    if only_external:
        return
    print(
        f"{len(SCENARIOS)} fault scenarios on the planted demo shop, window {WINDOW}s, plain phase runner, 2 cores"
    )
    print(
        f"  {'configuration':16} {'correct reports':>15}   {'re-exec/recovery':>16}   {'re-plans/run':>12}"
        f"   {'alerts/run':>10}   {'wall s/run':>10}"
    )
    for config, figures in results.items():
        print(figures.line(config))
    for config, lines in failures.items():
        print(f"  incorrect under {config}:")
        for line in lines:
            print(f"    - {line}")
