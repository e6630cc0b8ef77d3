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
Also measured: the share of checks that ran, the alerts (failures the workers did not fix
themselves, each the monitor's work), the task runs recoveries caused, and the wall time.
`--configs` and `--cases` narrow the run while developing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.lab.outside import later, locked, revoking, role_setting, terminating
from dbcrew.lab.shop import DemoShop
from dbcrew.models import Report
from dbcrew.roles.crew.context import RunContext
from dbcrew.roles.spine import PlainPhases, review
from dbcrew.settings.run import Ablations, Settings
from dbcrew.targets import parse_target

WINDOW = 3.0
LONG_WINDOW = 12.0  # sessions ended every 2 s and 5 s: several kills land inside the window
LOCKED = "orders"
LEFT_OUT = "left out, locked by another session: "
WAIT = 30.0  # the product's default target_wait_seconds
OUTAGE = 8.0  # a restart with a long crash recovery, a failover that takes its time
SHORT_WAIT = 2.0  # a review told to wait for its target only that long (target_wait_seconds)
OUTAGE_BUDGET = Settings.model_fields["outage_wait_seconds"].default  # the product's default
REVIEWER = "reviewer"  # the least-privilege role a review runs as when the case needs one


@dataclass
class Lab:
    """What a fault is thrown at: the server, its replica, and the shop's DSN as the administrator."""

    pg: EmbeddedPostgres
    standby: EmbeddedPostgres
    dsn: str

    @contextmanager
    def replica_gone(self) -> Iterator[None]:
        """The replica stopped as the review starts (its slot goes inactive), back after it."""
        self.standby.stop()
        try:
            yield
        finally:
            self.standby.start()

    def outage(self) -> None:
        """The server stopped, and started again only `OUTAGE` seconds later."""
        self.pg.stop()
        time.sleep(OUTAGE)
        self.pg.start()

    @contextmanager
    def gone_after(self, after: float) -> Iterator[None]:
        """The server stopped `after` seconds into the review, started again only after the review
        ended (a failover that outlasts it)."""
        try:
            with later(after, self.pg.stop):
                yield
        finally:
            self.pg.start()


@dataclass(frozen=True)
class ExternalCase:
    name: str
    fault: Callable[[Lab], AbstractContextManager[Any]]  # the fault, for as long as the review runs
    hidden: frozenset[tuple[str, str]] = frozenset()  # planted findings the fault may hide
    degraded: frozenset[tuple[str, str]] = (
        frozenset()
    )  # what a hidden plant may be reported as instead, seen less well
    hidden_codes: frozenset[str] = (
        frozenset()
    )  # codes of planted findings the fault may hide, whatever their object
    named: str = ""  # what the coverage must name as left out ("" = nothing)
    says: str = ""  # what some coverage entry must say about the fault ("" = nothing)
    window: float = WINDOW
    role: str = "postgres"  # the role the review runs as
    wait: float = WAIT  # how long the review waits for its target (target_wait_seconds)
    outage_wait: float = (
        OUTAGE_BUDGET  # how long, in all, its retries wait for the target (outage_wait_seconds)
    )
    hides_all: bool = (
        False  # the fault may hide every planted finding (the target gone before any check ran)
    )


CASES = [
    ExternalCase(
        "sessions terminated every 2 s",
        lambda lab: terminating(lab.dsn, every=2.0),
        window=LONG_WINDOW,
    ),
    ExternalCase(
        "sessions terminated every 5 s",
        lambda lab: terminating(lab.dsn, every=5.0),
        window=LONG_WINDOW,
    ),
    ExternalCase(
        f"{LOCKED} locked ACCESS EXCLUSIVE for the whole run",
        lambda lab: locked(lab.dsn, LOCKED),
        hidden=frozenset(
            {
                ("index_duplicate", "public.orders_customer_id_idx"),
                ("index_invalid", "public.orders_status_uniq"),
            }
        ),
        named=f"public.{LOCKED}",
    ),
    ExternalCase(
        "statement_timeout 50 ms on the review's role",
        lambda lab: role_setting(lab.dsn, "postgres", "statement_timeout", "50ms"),
    ),
    ExternalCase(
        "pg_read_all_stats revoked from the review's role mid-window",
        lambda lab: revoking(lab.dsn, "pg_read_all_stats", REVIEWER, after=WINDOW),
        window=2 * WINDOW,
        role=REVIEWER,
        hidden=frozenset({("index_missing", "public.customers(email)")}),
        says=f"GRANT pg_read_all_stats TO {REVIEWER};",
        # Without the statement texts, the missing index is named by its table only (a lower-confidence heuristic).
        degraded=frozenset({("index_missing", "public.customers")}),
    ),
    ExternalCase(
        "replica gone as the review starts",
        lambda lab: lab.replica_gone(),
        says="replica gone during the review",
    ),
    # Last: the restart also ends the shop's session idle in a transaction, a plant no later case would have.
    ExternalCase(
        "server restarted (pg_ctl restart -m fast) mid-window",
        lambda lab: later(WINDOW, lab.pg.restart),
        window=2 * WINDOW,
        hidden_codes=frozenset({"idle_in_transaction"}),
    ),
    ExternalCase(
        f"server down {OUTAGE:.0f} s mid-window, longer than the review's {SHORT_WAIT:.0f} s reconnect wait",
        lambda lab: later(WINDOW, lab.outage),
        window=2 * WINDOW,
        wait=SHORT_WAIT,
        hidden_codes=frozenset({"idle_in_transaction"}),
    ),
    # What a review can still report is what it finished before the target went: a re-plan that keeps
    # completed tasks keeps those checks; one that runs them again loses them (and alerts again).
    ExternalCase(
        "server gone mid-window for the rest of the review",
        lambda lab: lab.gone_after(WINDOW / 2),
        wait=SHORT_WAIT,
        outage_wait=2 * SHORT_WAIT,
        hides_all=True,
    ),
]


@dataclass
class ExternalFigures:
    correct: list[bool] = field(default_factory=list)
    kept: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    ended: list[int] = field(default_factory=list)
    alerts: list[int] = field(
        default_factory=list
    )  # failures the workers did not fix themselves: the monitor's work
    reexecuted: list[int] = field(default_factory=list)  # task runs the recoveries caused

    def line(self, name: str) -> str:
        n = len(self.correct)
        return (
            f"  {name:16} {sum(self.correct):3}/{n} {sum(self.correct) / n:5.0%}   {sum(self.kept) / n:12.0%}"
            f"   {sum(self.alerts) / n:10.1f}   {sum(self.reexecuted) / n:13.1f}"
            f"   {sum(self.seconds) / n:10.2f}   {sum(self.ended) / n:15.1f}"
        )


def sessions_killed(dsn: str) -> int:
    """The database's count of sessions ended by an administrator (pg_stat_database, PostgreSQL 14+)."""
    with psycopg.connect(dsn, autocommit=True, application_name="bench") as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT sessions_killed FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    return int(row[0]) if row else 0


def problems(report: Report) -> set[tuple[str, str]]:
    return {(f.code, f.object) for f in report.findings if f.severity.value != "info"}


def judge(
    case: ExternalCase, shop: DemoShop, baseline: set[tuple[str, str]], report: Report
) -> str:
    """Why the run is incorrect; empty when it is correct."""
    found = {(f.code, f.object) for f in report.findings}
    missed = (
        []
        if case.hides_all
        else sorted(p for p in shop.expected - case.hidden - found if p[0] not in case.hidden_codes)
    )
    if missed:
        return f"missed {sorted(missed)}"
    named = {
        c.reason.split(LEFT_OUT, 1)[1].split(" (", 1)[0]
        for c in report.coverage
        if LEFT_OUT in c.reason
    }
    if named != ({case.named} if case.named else set()):
        return (
            f"coverage names {sorted(named)} as left out, the fault hid {case.named or 'nothing'}"
        )
    if case.says and not any(case.says in c.reason for c in report.coverage):
        return f"no coverage entry says {case.says!r}"
    created = sorted(problems(report) - baseline - case.degraded)
    return f"the fault created {created}" if created else ""


def run_one(
    dsn: str,
    out: Path,
    memory: Path,
    ablations: Ablations,
    case: ExternalCase | None,
    fault: AbstractContextManager[Any] | None,
) -> tuple[Report | None, str, float]:
    """The review's report (None when it did not complete), why not, and its wall time."""
    settings = Settings(
        window_seconds=case.window if case else WINDOW,
        target_wait_seconds=case.wait if case else WAIT,
        outage_wait_seconds=case.outage_wait if case else OUTAGE_BUDGET,
        activity_samples=4,
        ablations=ablations,
        store_url=str(memory),
    )
    run = RunContext(target=parse_target(dsn), settings=settings, out_dir=out)
    started = time.perf_counter()
    try:
        if fault is None:
            return review(run, PlainPhases), "", time.perf_counter() - started
        with fault:
            return review(run, PlainPhases), "", time.perf_counter() - started
    except Exception as exc:  # noqa: BLE001 - a review that did not complete is an incorrect run, and the bench says why
        return None, f"did not complete: {type(exc).__name__}: {exc}", time.perf_counter() - started


def reviewer(shop: DemoShop, pg: EmbeddedPostgres) -> str:
    """The DSN of a least-privilege review role (pg_monitor's pg_read_all_stats granted directly, so it can be revoked)."""
    pg.psql(
        f"CREATE ROLE {REVIEWER} LOGIN; GRANT pg_read_all_stats, pg_read_all_settings, pg_stat_scan_tables TO {REVIEWER};"
    )
    return shop.dsn.replace("postgres@", f"{REVIEWER}@", 1)


def external(
    shop: DemoShop,
    pg: EmbeddedPostgres,
    work: Path,
    configs: list[tuple[str, Ablations]],
    cases: str = "",
) -> list[str]:
    """Run every case under every configuration: the table's lines, then what went wrong."""
    standby = pg.standby(work / "standby", "replica1")
    lab = Lab(pg, standby, shop.dsn)
    dsns = {"postgres": shop.dsn, REVIEWER: reviewer(shop, pg)}
    try:
        baselines = {}
        for role, dsn in dsns.items():
            clean, why, _ = run_one(
                dsn,
                work / "external" / f"baseline-{role}",
                work / "memory" / "external-baseline.duckdb",
                Ablations(),
                None,
                None,
            )
            assert clean is not None, why
            baselines[role] = problems(clean)
        return _cases(
            shop, lab, dsns, baselines, work, configs, [c for c in CASES if cases in c.name]
        )
    finally:
        standby.stop()


def _cases(
    shop: DemoShop,
    lab: Lab,
    dsns: dict[str, str],
    baselines: dict[str, set[tuple[str, str]]],
    work: Path,
    configs: list[tuple[str, Ablations]],
    chosen: list[ExternalCase],
) -> list[str]:
    results: dict[str, ExternalFigures] = {}
    ended: dict[str, list[int]] = {}
    alerts: dict[str, list[int]] = {}
    failures: list[str] = []
    for number, case in enumerate(chosen):
        for config, ablations in configs:
            slug = config.strip("-").replace(" ", "-")
            killed = sessions_killed(shop.dsn)
            report, why, seconds = run_one(
                dsns[case.role],
                work / "external" / slug / f"{number:02d}",
                work / "memory" / f"external-{slug}.duckdb",
                ablations,
                case,
                case.fault(lab),
            )
            why = why or judge(case, shop, baselines[case.role], report)  # type: ignore[arg-type]  (report is None only with a why)
            figures = results.setdefault(config, ExternalFigures())
            figures.correct.append(not why)
            figures.kept.append(
                sum(c.status.value == "ran" for c in report.coverage) / len(report.coverage)
                if report
                else 0.0
            )
            figures.seconds.append(seconds)
            figures.alerts.append(report.phases.alerts if report else 0)
            figures.reexecuted.append(report.phases.reexecuted_tasks if report else 0)
            figures.ended.append(sessions_killed(shop.dsn) - killed)
            ended.setdefault(case.name, []).append(figures.ended[-1])
            alerts.setdefault(case.name, []).append(figures.alerts[-1])
            if why:
                failures.append(f"{config}, {case.name}: {why}")
    return [
        f"{len(chosen)} external fault cases on the planted demo shop, window {WINDOW}s ({LONG_WINDOW}s for terminations), plain phase runner",
        f"  {'configuration':16} {'correct reports':>15}   {'checks kept':>12}   {'alerts/run':>10}   {'re-exec/run':>13}"
        f"   {'wall s/run':>10}   {'sessions ended/run':>15}",
        *(figures.line(config) for config, figures in results.items()),
        "  sessions ended and alerts per case (one number per configuration):",
        *(f"    {name}: ended {counts}, alerts {alerts[name]}" for name, counts in ended.items()),
        *(f"    - {line}" for line in failures),
    ]
