"""Real faults thrown at a review from outside the product: they cost only what they touch."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from dbcrew.errors import TargetError
from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.lab.outside import later, locked, once_sent, terminating
from dbcrew.lab.scripted_llm import Reply, ScriptedServer
from dbcrew.lab.shop import DemoShop
from dbcrew.models.faults import FaultSpec
from dbcrew.operators.held import Held, guarded
from dbcrew.operators.sql import fetch
from dbcrew.operators.stat_views import SESSIONS_SQL, TABLE_STATS
from dbcrew.operators.window.live import sample_window
from dbcrew.roles.crew.context import RunContext
from dbcrew.roles.spine import PlainPhases
from dbcrew.roles.spine import review as review_run
from dbcrew.settings.run import Settings
from dbcrew.targets import parse_target
from dbcrew.targets.resumable import resumable
from tests.integration.test_recovery import review

SESSION_SAMPLE = "AS sample_no"  # in the statement of each pg_stat_activity sample (SESSIONS_SQL)

LOCKED = "orders"


def test_a_table_locked_for_the_whole_review_costs_that_table_only(shop: DemoShop, tmp_path: Path):
    with locked(shop.dsn, LOCKED) as pid:
        report = review(shop.dsn, tmp_path, [])
    found = {(f.code, f.object) for f in report.findings}
    assert ("index_missing", "public.customers(email)") in found  # planted on a table nobody locked
    assert ("dead_tuples_high", "public.cart_items") in found
    # Nothing waited the lock out: no alert, no instruction, and every check ran.
    assert (report.phases.alerts, report.phases.instructions) == (0, 0)
    assert {c.status.value for c in report.coverage} == {"ran"}
    cov = {c.check: c.reason for c in report.coverage}
    named = (
        f"left out, locked by another session: public.{LOCKED} (held ACCESS EXCLUSIVE by pid {pid})"
    )
    for check in (
        "check_missing_indexes",
        "check_duplicate_indexes",
        "check_fk_without_index",
        "check_vacuum_health",
    ):
        assert named in cov[check], check
    assert named not in cov["check_settings"]
    # The locked table is not judged from what could not be read (its indexes): no finding about it.
    assert not [obj for _, obj in found if obj.startswith(f"public.{LOCKED}")]


def test_a_lock_taken_after_the_held_set_was_read_is_retried_without_it(shop: DemoShop):
    target = parse_target(shop.dsn).model_copy(update={"lock_timeout_ms": 50})
    with locked(shop.dsn, LOCKED), target.session() as conn:
        # An empty held set, as if read just before the lock was taken: the first read times out.
        held, (columns, rows) = guarded(
            conn, Held(), lambda args: fetch(conn, TABLE_STATS.sql, args)
        )
    names = [c for c, _ in columns]
    assert f"public.{LOCKED}" in held.reasons
    relnames = {row[names.index("relname")] for row in rows}
    assert LOCKED not in relnames and "customers" in relnames


def test_sessions_terminated_mid_review_are_resumed_with_full_coverage(
    shop: DemoShop, tmp_path: Path
):
    settings = Settings(window_seconds=2.0, activity_samples=4)
    with terminating(shop.dsn, every=0.05, older_than=0.4) as ended:
        report = review_run(
            RunContext(target=parse_target(shop.dsn), settings=settings, out_dir=tmp_path),
            PlainPhases,
        )
    assert ended  # the window's samplers live longer than 0.4 s: each was ended at least once
    assert (report.phases.alerts, report.phases.instructions) == (0, 0)
    assert {c.status.value for c in report.coverage} == {"ran"}
    # A killed session is not a problem of the database: no warning or critical finding that the shop did not plant.
    planted = {code for code, _ in shop.expected}
    assert {f.code for f in report.findings if f.severity.value != "info"} <= planted
    assert not [f for f in report.findings if any(f"pid:{pid}" == f.object for pid in ended)]
    assert ("index_missing", "public.customers(email)") in {
        (f.code, f.object) for f in report.findings
    }


def test_an_instruction_that_failed_twice_becomes_a_replan_that_carries_the_global_state(
    shop: DemoShop, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # Every call of check_checkpoints meets a refused connection: "retry" cannot help, twice.
    server = ScriptedServer(
        otherwise=Reply(content="no JSON here")
    )  # every question falls back to the rules brain
    monkeypatch.setenv("DBCREW_LLM_BASE_URL", server.url)
    monkeypatch.setenv("DBCREW_LLM_MODEL", "scripted")
    run = RunContext(
        target=parse_target(shop.dsn),
        out_dir=tmp_path,
        brain="openai",
        settings=Settings(window_seconds=1.0, activity_samples=2),
        faults=[FaultSpec.parse("check_checkpoints:disconnect")],
    )
    try:
        report = review_run(run, PlainPhases)
    finally:
        server.close()
    remedies = [d.remedy for d in report.decisions if d.task_id == "check_checkpoints"]
    # The second retry read the run's memory (the same failure a moment before) and waited for the target, which answered.
    assert remedies[:2] == [
        "instruction: retry",
        "instruction: retry once the target answers (waits up to 2 s: the same failure"
        " happened earlier in this run) (the target answered)",
    ]
    assert (
        remedies[2]
        == "replan (escalated: 2 instructions failed (connection: retry)): replace_operator"
    )
    assert (report.phases.instructions, report.phases.replans) == (2, 1)
    # The re-plan request carries the escalation, the alert with the worker's reflection, and the global state.
    asked = [r["messages"][1]["content"] for r in server.requests]
    replan_prompt = next(p for p in asked if p.startswith("Re-plan scenario"))
    assert "Escalated: 2 instructions failed (connection: retry)" in replan_prompt
    assert (
        "The crew's global state when it paused" in replan_prompt and '"done": [' in replan_prompt
    )
    assert (
        "connection problem; retrying after a short pause" in replan_prompt
    )  # the worker's reflection
    assert "The crew's global state when it paused" in next(
        p for p in asked if p.startswith("A worker failed")
    )
    # The planner removed what no instruction could fix (it stays failed, with its error); everything else ran.
    assert [(e.kind.value, e.task_id, e.source) for e in report.edits] == [
        ("remove", "check_checkpoints", "replan")
    ]
    assert (
        report.declined and "### Re-plan edits not applied" in (tmp_path / "report.md").read_text()
    )
    coverage = {c.check: c for c in report.coverage}
    assert (
        coverage["check_checkpoints"].status.value == "failed"
        and "Connection refused" in coverage["check_checkpoints"].reason
    )
    assert {c.status.value for name, c in coverage.items() if name != "check_checkpoints"} == {
        "ran"
    }


def test_sessions_resumed_through_a_server_restart_keep_what_they_read(tmp_path: Path):
    # Its own cluster: a restart ends every session, the shared shop's planted idle one too.
    pg = EmbeddedPostgres(tmp_path / "data").start()
    try:
        target = parse_target(pg.dsn())
        with resumable(target, wait=30.0) as session:
            before = session.run(
                lambda conn: conn.execute("SELECT pg_postmaster_start_time() AS t").fetchone()["t"]
            )
            pg.stop()  # the first half of `pg_ctl restart -m fast`: the session is ended, new ones are refused
            with later(
                0.2, lambda: pg.start() and None
            ):  # the second half, while the read waits for it
                after = session.run(
                    lambda conn: conn.execute("SELECT pg_postmaster_start_time() AS t").fetchone()[
                        "t"
                    ]
                )
        assert after > before and session.reconnects == 1
        assert session.refused >= 1  # it waited through the outage: the report can say so
        # The diagnosis's sampler across a restart: it waits for the server, and no rate spans the restart.
        # The restart comes once the sampler sampled the sessions, which it does after its first
        # counters (1.2 s into the window came before them where the set-up read took longer).
        assert SESSION_SAMPLE in SESSIONS_SQL
        with once_sent(pg.dsn(), SESSION_SAMPLE, pg.restart):
            window = sample_window(target, 3.0, wait=30.0)
        assert window.restarts == 1 and window.reconnects >= 1
        assert window.series["db.xact_commit"] and min(window.series["db.xact_commit"]) >= 0
        # Without worker self-correction (--no-reflection), the first ended session is the read's failure.
        with resumable(target, resume=False) as plain:
            pid = plain.run(
                lambda conn: conn.execute("SELECT pg_backend_pid() AS pid").fetchone()["pid"]
            )
            pg.psql(f"SELECT pg_terminate_backend({pid});")
            with pytest.raises(psycopg.OperationalError):
                plain.run(lambda conn: conn.execute("SELECT 1"))
            assert plain.reconnects == 0
        with resumable(
            target
        ) as unready:  # no wait: a server still down is the worker's error at once
            unready.run(lambda conn: conn.execute("SELECT 1"))
            pg.stop()
            with pytest.raises(TargetError):
                unready.run(lambda conn: conn.execute("SELECT 1"))
    finally:
        pg.stop()
