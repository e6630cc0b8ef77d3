"""Bench section `faults`, external part: faults thrown at a review from outside the product.

Other sessions of the same server do to the review what production does: end its sessions every
2 s and every 5 s (an administrator, a pooler), hold one table ACCESS EXCLUSIVE for the whole run
(a migration), give the review's role a 50 ms statement_timeout. Each case runs one review per
configuration (full system and each ablation) on the planted shop, with a window long enough for
the fault to land inside it.

A run is *correct* when the review completed and
  1. every planted finding the fault does not hide is found,
  2. the coverage names exactly what the fault hid (the locked table, and nothing for the others),
  3. no warning or critical finding is there that a fault-free review of the same shop did not raise.
Also measured: the share of checks that ran, and the wall time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from dbcrew.models import Report
from dbcrew.settings import Ablations, Settings
from dbcrew.targets import parse_target
from lab.outside import locked, role_setting, terminating
from lab.shop import DemoShop
from roles.crew import PlainPhases, RunContext
from roles.review import review

WINDOW = 3.0
LOCKED = "orders"
LEFT_OUT = "left out, locked by another session: "


@dataclass(frozen=True)
class ExternalCase:
    name: str
    fault: Callable[[str], AbstractContextManager[Any]]  # the shop's DSN -> the fault, for as long as the review runs
    hidden: frozenset[tuple[str, str]] = frozenset()  # planted findings the fault hides
    named: str = ""  # what the coverage must name as left out ("" = nothing)


CASES = [
    ExternalCase("sessions terminated every 2 s", lambda dsn: terminating(dsn, every=2.0)),
    ExternalCase("sessions terminated every 5 s", lambda dsn: terminating(dsn, every=5.0)),
    ExternalCase(f"{LOCKED} locked ACCESS EXCLUSIVE for the whole run", lambda dsn: locked(dsn, LOCKED),
                 hidden=frozenset({("index_duplicate", "public.orders_customer_id_idx"), ("index_invalid", "public.orders_status_uniq")}),
                 named=f"public.{LOCKED}"),
    ExternalCase("statement_timeout 50 ms on the review's role", lambda dsn: role_setting(dsn, "postgres", "statement_timeout", "50ms")),
]


@dataclass
class ExternalFigures:
    correct: list[bool] = field(default_factory=list)
    kept: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    ended: list[int] = field(default_factory=list)

    def line(self, name: str) -> str:
        n = len(self.correct)
        return (f"  {name:16} {sum(self.correct):3}/{n} {sum(self.correct) / n:5.0%}   {sum(self.kept) / n:12.0%}"
                f"   {sum(self.seconds) / n:10.2f}   {sum(self.ended) / n:15.1f}")


def sessions_killed(dsn: str) -> int:
    """The database's count of sessions ended by an administrator (pg_stat_database, PostgreSQL 14+)."""
    with psycopg.connect(dsn, autocommit=True, application_name="bench") as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute("SELECT sessions_killed FROM pg_stat_database WHERE datname = current_database()").fetchone()
    return int(row[0]) if row else 0


def problems(report: Report) -> set[tuple[str, str]]:
    return {(f.code, f.object) for f in report.findings if f.severity.value != "info"}


def judge(case: ExternalCase, shop: DemoShop, baseline: set[tuple[str, str]], report: Report) -> str:
    """Why the run is incorrect; empty when it is correct."""
    found = {(f.code, f.object) for f in report.findings}
    missed = sorted(shop.expected - case.hidden - found)
    if missed:
        return f"missed {missed}"
    named = {c.reason.split(LEFT_OUT, 1)[1].split(" (", 1)[0] for c in report.coverage if LEFT_OUT in c.reason}
    if named != ({case.named} if case.named else set()):
        return f"coverage names {sorted(named)} as left out, the fault hid {case.named or 'nothing'}"
    created = sorted(problems(report) - baseline)
    return f"the fault created {created}" if created else ""


def run_one(shop: DemoShop, out: Path, memory: Path, ablations: Ablations, case: ExternalCase | None) -> tuple[Report | None, str, float]:
    """The review's report (None when it did not complete), why not, and its wall time."""
    settings = Settings(window_seconds=WINDOW, activity_samples=4, ablations=ablations, store_url=str(memory))
    run = RunContext(target=parse_target(shop.dsn), settings=settings, out_dir=out)
    started = time.perf_counter()
    try:
        if case is None:
            return review(run, PlainPhases), "", time.perf_counter() - started
        with case.fault(shop.dsn):
            return review(run, PlainPhases), "", time.perf_counter() - started
    except Exception as exc:  # noqa: BLE001 - a review that did not complete is an incorrect run, and the bench says why
        return None, f"did not complete: {type(exc).__name__}: {exc}", time.perf_counter() - started


def external(shop: DemoShop, work: Path, configs: list[tuple[str, Ablations]]) -> list[str]:
    """Run every case under every configuration: the table's lines, then what went wrong."""
    clean, why, _ = run_one(shop, work / "external" / "baseline", work / "memory" / "external-baseline.duckdb", Ablations(), None)
    assert clean is not None, why
    baseline = problems(clean)
    results: dict[str, ExternalFigures] = {}
    failures: list[str] = []
    for number, case in enumerate(CASES):
        for config, ablations in configs:
            slug = config.strip("-").replace(" ", "-")
            killed = sessions_killed(shop.dsn)
            report, why, seconds = run_one(shop, work / "external" / slug / f"{number:02d}", work / "memory" / f"external-{slug}.duckdb",
                                           ablations, case)
            why = why or judge(case, shop, baseline, report)  # type: ignore[arg-type]  (report is None only with a why)
            figures = results.setdefault(config, ExternalFigures())
            figures.correct.append(not why)
            figures.kept.append(sum(c.status.value == "ran" for c in report.coverage) / len(report.coverage) if report else 0.0)
            figures.seconds.append(seconds)
            figures.ended.append(sessions_killed(shop.dsn) - killed)
            if why:
                failures.append(f"{config}, {case.name}: {why}")
    return [f"{len(CASES)} external fault cases on the planted demo shop, window {WINDOW}s, plain phase runner",
            f"  {'configuration':16} {'correct reports':>15}   {'checks kept':>12}   {'wall s/run':>10}   {'sessions ended/run':>15}",
            *(figures.line(config) for config, figures in results.items()),
            *(f"    - {line}" for line in failures)]
