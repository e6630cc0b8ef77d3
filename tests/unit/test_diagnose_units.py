"""Diagnosis parts as plain functions: accuracy, detection, plan patterns, experts, cross review, knowledge, plan."""

from __future__ import annotations

import random

import pytest
from pglast.ast import SelectStmt

import dbcrew.operators  # noqa: F401  (registers every operator)
from bench.diagnose import accuracy, main
from bench.injections import COMBINATIONS, RECIPES
from dbcrew.models import Brief
from dbcrew.models.crew import PlanRequest
from dbcrew.operators.diagnose.candidates import Candidate, Facts
from dbcrew.operators.diagnose.cross_review import MAX_CAUSES, cross_review
from dbcrew.operators.diagnose.experts import EXPERTS, select_experts
from dbcrew.operators.diagnose.facts import changed_statements
from dbcrew.operators.diagnose.heavy_statements import statement_candidates
from dbcrew.operators.diagnose.judgements import plan_issues
from dbcrew.operators.explain import refused_text
from dbcrew.operators.knowledge import knowledge_base
from dbcrew.operators.registry import catalogue
from dbcrew.operators.window.anomaly import abnormal_metrics
from dbcrew.operators.window.evidence import StatementDelta, TableDelta, WindowEvidence
from dbcrew.operators.window.readers import ActivityTally
from dbcrew.roles.brains.rules import RulesBrain
from dbcrew.roles.crew.validators import validate
from dbcrew.settings.thresholds import Thresholds
from dbcrew.vocabulary import Scenario


def window(series: dict[str, list[float]] | None = None, **fields: object) -> WindowEvidence:
    return WindowEvidence(started_at=0.0, seconds=5.0, interval=0.5, series=series or {}, **fields)


def test_accuracy_follows_dbot_formula() -> None:
    assert accuracy(["a"], ["a"]) == 1.0
    assert accuracy(["a"], ["a", "b"]) == pytest.approx(0.9)
    assert accuracy(["a", "b"], ["a"]) == 0.5
    assert accuracy(["a"], ["b", "c"]) == 0.0  # never negative
    assert accuracy(["a"], ["b", "c", "d", "e", "a"]) == 0.0  # only the first 4 causes count


def test_step_in_a_metric_is_abnormal_and_noise_is_not() -> None:
    rng = random.Random(1)
    base = window(
        {
            "db.tup_updated": [100 + rng.gauss(0, 5) for _ in range(12)],
            "db.xact_commit": [50 + rng.gauss(0, 3) for _ in range(12)],
        }
    )
    now = window(
        {
            "db.tup_updated": [3000 + rng.gauss(0, 50) for _ in range(12)],
            "db.xact_commit": [50 + rng.gauss(0, 3) for _ in range(12)],
        }
    )
    found = abnormal_metrics(now, base)
    assert [m.name for m in found] == ["db.tup_updated"] and found[0].direction == "up"
    assert abnormal_metrics(now, None) == []


SUBPLAN = {
    "Node Type": "Seq Scan",
    "Relation Name": "orders",
    "Plan Rows": 4000,
    "Plans": [
        {
            "Node Type": "Aggregate",
            "Parent Relationship": "SubPlan",
            "Subplan Name": "SubPlan 1",
            "Plan Rows": 1,
            "Plans": [
                {
                    "Node Type": "Seq Scan",
                    "Relation Name": "items",
                    "Parent Relationship": "Outer",
                    "Plan Rows": 10,
                }
            ],
        }
    ],
}
HASHED = {
    "Node Type": "Seq Scan",
    "Relation Name": "orders",
    "Plan Rows": 4000,
    "Plans": [
        {
            "Node Type": "Seq Scan",
            "Relation Name": "items",
            "Parent Relationship": "SubPlan",
            "Subplan Name": "hashed SubPlan 1",
            "Plan Rows": 10,
        }
    ],
}


def nested_loop(inner: dict[str, object]) -> dict[str, object]:
    return {
        "Node Type": "Nested Loop",
        "Plan Rows": 1000,
        "Join Filter": "(i.order_id >= o.id)",
        "Plans": [{"Node Type": "Seq Scan", "Relation Name": "orders", "Plan Rows": 4000}, inner],
    }


def test_plan_patterns() -> None:
    assert [i.code for i in plan_issues(SUBPLAN)] == ["query_correlated_subquery"]
    assert plan_issues(HASHED) == []
    few_outer = {**SUBPLAN, "Plan Rows": 50}
    assert plan_issues(few_outer) == [], "50 runs of a subquery over a small table are no problem"
    assert [i.code for i in plan_issues(few_outer, {"items": 400_000})] == [
        "query_correlated_subquery"
    ], "50 scans of 400k rows are"
    big_inner = {
        "Node Type": "Materialize",
        "Plan Rows": 40000,
        "Plans": [{"Node Type": "Seq Scan", "Relation Name": "items", "Plan Rows": 40000}],
    }
    issues = plan_issues(nested_loop(big_inner))
    assert [i.code for i in issues] == ["query_poor_join"] and issues[0].relations == [
        "items",
        "orders",
    ]
    indexed = {"Node Type": "Index Scan", "Relation Name": "items", "Plan Rows": 40000}
    assert plan_issues(nested_loop(indexed)) == []


def test_only_single_selects_calling_pg_catalog_are_explained() -> None:
    def explainable(query: str) -> bool:
        return refused_text(query, (SelectStmt,)) is None

    assert explainable("SELECT * FROM t WHERE id = $1 AND lower(name) = pg_catalog.upper($2)")
    assert not explainable("DELETE FROM t")
    assert not explainable("SELECT 1; DROP TABLE t")
    assert not explainable("SELECT * FROM t WHERE")  # truncated text
    assert not explainable("SELECT * FROM t WHERE id = public.evil()")
    assert not explainable("SELECT * FROM t WHERE a OPERATOR(public.===) b")
    assert not explainable("SELECT '1'::public.evil_type")


def test_monitoring_statements_are_not_workload() -> None:
    w = window(
        statements=[
            StatementDelta(
                queryid=1,
                query="SELECT * FROM pg_stat_activity",
                calls=10,
                total_exec_time_ms=900,
                rows=10,
            ),
            StatementDelta(
                queryid=2,
                query="SELECT * FROM t WHERE id = $1",
                calls=10,
                total_exec_time_ms=100,
                rows=10,
            ),
        ],
        running={"SELECT o.id FROM orders o": 3},
    )
    assert {q for q, _ in statement_candidates(w)} == {
        "SELECT o.id FROM orders o",
        "SELECT * FROM t WHERE id = $1",
    }


def test_a_statement_sampled_with_many_literals_is_one_candidate_of_their_summed_share() -> None:
    """Behind a queue of lock waiters a statement's finished time is a few per cent of the window's,
    while its sessions work: twenty parameters seen in the samples are one statement, not twenty."""
    join = "SELECT r.id, count(*) FROM reply r JOIN vote v ON v.reply_id = r.id WHERE r.thread = $1 GROUP BY r.id"
    waiter = "SELECT 1 FROM queue WHERE slot = $1 FOR UPDATE"
    w = window(
        statements=[
            StatementDelta(queryid=1, query=waiter, calls=400, total_exec_time_ms=97_000, rows=400),
            StatementDelta(queryid=2, query=join, calls=150, total_exec_time_ms=3_000, rows=150),
        ],
        running={
            "SELECT 1 FROM queue WHERE slot = 3 FOR UPDATE": 900,
            **{join.replace("$1", str(t)): 5 for t in range(20)},
            **{f"SELECT sum(x) FROM audit WHERE day = {d}": 20 for d in range(3)},
        },
    )
    shares = dict(statement_candidates(w))
    assert set(shares) == {waiter, join, "SELECT sum(x) FROM audit WHERE day = 0"}
    assert shares[join] == pytest.approx(100 / 1060)  # its samples over all literals, not 5 of 1060
    assert shares["SELECT sum(x) FROM audit WHERE day = 0"] == pytest.approx(60 / 1060)


def test_experts_judge_by_thresholds() -> None:
    busy = window({"act.on_cpu": [6.0] * 10, "host.cpu_busy": [100.0] * 10}, cpu_count=2)
    assert [c.code for c in EXPERTS["cpu"](Facts(busy, None, []))] == ["cpu_contention"]
    remote = busy.model_copy(update={"cpu_count": None})
    assert (
        EXPERTS["cpu"](Facts(remote, None, [])) == []
    )  # no host metrics for a remote target: no claim
    locked = window(
        {"act.wait_lock": [4.0] * 10},
        waits={"Lock:transactionid": 40, "CPU": 2},
        session_samples=10,
    )
    assert [c.code for c in EXPERTS["locks"](Facts(locked, None, []))] == ["lock_contention"]
    flushing = window(
        {"act.wait_wal_flush": [5.0] * 10},
        waits={"LWLock:WALWrite": 50},
        session_samples=10,
        settings={"synchronous_commit": "on"},
    )
    assert [c.code for c in EXPERTS["configuration"](Facts(flushing, None, []))] == [
        "sync_commit_pressure"
    ]
    relaxed = flushing.model_copy(update={"settings": {"synchronous_commit": "off"}})
    assert EXPERTS["configuration"](Facts(relaxed, None, [])) == []
    # Flushes dominate but fewer sessions wait (the clients spend their time elsewhere): still the cause.
    light = window(
        {"act.wait_wal_flush": [0.45] * 10},
        waits={"LWLock:WALWrite": 30, "IO:WalSync": 10, "CPU": 8},
        session_samples=50,
        settings={"synchronous_commit": "on"},
    )
    assert [c.code for c in EXPERTS["configuration"](Facts(light, None, []))] == [
        "sync_commit_pressure"
    ]
    # A healthy OLTP load also flushes at every commit, but few sessions wait and flushes are not its main wait.
    healthy = window(
        {"act.wait_wal_flush": [0.18] * 10},
        waits={"IO:WalSync": 8, "CPU": 9, "Lock:transactionid": 11},
        session_samples=50,
        settings={"synchronous_commit": "on"},
    )
    assert EXPERTS["configuration"](Facts(healthy, None, [])) == []
    # Measured windows: pgbench at 300 tps on a slow disk waits on flushes for most of its active time
    # but its clients idle between transactions longer; back-to-back transfers go straight on.
    paced = window(
        {
            "act.wait_wal_flush": [0.85] * 10,
            "act.active": [1.0] * 10,
            "act.idle_between": [2.68] * 10,
        },
        waits={"IO:WalSync": 43, "CPU": 7},
        session_samples=50,
        flusher_idle_between=134,
        settings={"synchronous_commit": "on"},
    )
    assert EXPERTS["configuration"](Facts(paced, None, [])) == []
    pressed = window(
        {
            "act.wait_wal_flush": [0.9] * 10,
            "act.active": [1.02] * 10,
            "act.idle_in_xact": [0.63] * 10,
            "act.idle_between": [0.35] * 10,
        },
        waits={"IO:WalSync": 45, "CPU": 5},
        session_samples=50,
        flusher_idle_between=18,
        settings={"synchronous_commit": "on"},
    )
    found = EXPERTS["configuration"](Facts(pressed, None, []))
    assert [c.code for c in found] == ["sync_commit_pressure"] and found[0].evidence[
        "flush_waiters_share_vs_idle_between"
    ] == 0.71
    small = window({"db.tup_inserted": [400_000.0] * 10, "db.xact_commit": [10_000.0] * 10})
    bulk = window({"db.tup_inserted": [200_000.0] * 10, "db.xact_commit": [10.0] * 10})
    assert [c.code for c in EXPERTS["workload"](Facts(small, None, []))] == [
        "workload_many_inserts"
    ]
    assert [c.code for c in EXPERTS["workload"](Facts(bulk, None, []))] == ["workload_large_insert"]


def test_the_experts_judge_by_the_runs_thresholds() -> None:
    busy = window({"act.on_cpu": [6.0] * 10, "host.cpu_busy": [100.0] * 10}, cpu_count=2)
    assert [c.code for c in EXPERTS["cpu"](Facts(busy, None, []))] == ["cpu_contention"]
    raised = Thresholds(
        **{"diagnosis.cpu_sessions_per_core": 4.0}
    )  # 6 runnable sessions on 2 cores are not 4 a core
    assert EXPERTS["cpu"](Facts(busy, None, [], thresholds=raised)) == []


def test_too_many_indexes_is_one_count_for_the_health_check_and_the_expert() -> None:
    """The index expert once called 8 indexes too many while the health check said 10."""

    def written(indexes: int) -> WindowEvidence:
        return window(
            tables=[TableDelta(name="public.ledger", n_tup_upd=50_000, index_count=indexes)]
        )  # 10,000 writes/s

    assert Thresholds().indexes_too_many == 10
    assert [c.code for c in EXPERTS["index"](Facts(written(10), None, []))] == ["indexes_too_many"]
    assert EXPERTS["index"](Facts(written(9), None, [])) == []
    assert [
        c.code
        for c in EXPERTS["index"](
            Facts(written(9), None, [], thresholds=Thresholds(indexes_too_many=9))
        )
    ] == ["indexes_too_many"]


def activity(pid: int, state: str, wait: str = "", idle_seconds: float = 0.0) -> dict[str, object]:
    """One pg_stat_activity row as the session sampler reads it."""
    kind, _, event = wait.partition(":")
    return {
        "pid": pid,
        "backend_type": "client backend",
        "state": state,
        "state_seconds": idle_seconds,
        "wait_event_type": kind or None,
        "wait_event": event or None,
        "query": "COMMIT",
        "blocked_by": "",
        "xact_seconds": 0.0,
    }


def test_flush_hold_is_counted_over_the_sessions_that_flush() -> None:
    # Two committers (pids 1, 2) wait on the flush in 3 of 4 samples and idle between transactions in 1;
    # a batch job with asynchronous commits (pid 3) sits idle between its statements in every sample.
    tally = ActivityTally()
    for tick in range(4):
        committers = [
            activity(pid, "idle", idle_seconds=0.001)
            if tick == pid
            else activity(pid, "active", "IO:WalSync")
            for pid in (1, 2)
        ]
        tally.add([*committers, activity(3, "idle", idle_seconds=0.05)])
    assert tally.flusher_idle_between() == 2, (
        "the batch job's idle samples are not the committers' think time"
    )
    pressed = window(
        {"act.wait_wal_flush": [1.5] * 4, "act.idle_between": [1.5] * 4},
        waits=dict(tally.waits),
        session_samples=4,
        flusher_idle_between=tally.flusher_idle_between(),
        settings={"synchronous_commit": "on"},
    )
    found = EXPERTS["configuration"](Facts(pressed, None, []))
    # Over all sessions the flush would hold 1.5 / (1.5 + 1.5) = 0.5 of them; per flushing session 6 / (6 + 2).
    assert [c.code for c in found] == ["sync_commit_pressure"] and found[0].evidence[
        "flush_waiters_share_vs_idle_between"
    ] == 0.75
    paced = pressed.model_copy(
        update={"flusher_idle_between": 12}
    )  # the committers' own think time outweighs their flushes
    assert EXPERTS["configuration"](Facts(paced, None, [])) == []


def test_an_update_rate_is_a_cause_when_heavy_for_the_host_whoever_gets_its_cpu() -> None:
    # Measured windows (2 cores): healthy pgbench keeping 1000 tps; a flood of single-row commits.
    pgbench = window(
        {
            "db.tup_updated": [3095.0] * 10,
            "db.xact_commit": [1053.0] * 10,
            "pg.cpu_cores": [0.62] * 10,
            "act.on_cpu": [0.15] * 10,
        },
        cpu_count=2,
    )
    flood = window(
        {
            "db.tup_updated": [21000.0] * 10,
            "db.xact_commit": [21000.0] * 10,
            "pg.cpu_cores": [0.75] * 10,
            "act.on_cpu": [0.27] * 10,
        },
        cpu_count=2,
    )
    assert EXPERTS["workload"](Facts(pgbench, None, [])) == [], (
        "a healthy load's server CPU share is no update cause"
    )
    found = EXPERTS["workload"](Facts(flood, None, []))
    assert [c.code for c in found] == ["workload_high_updates"] and found[0].evidence[
        "rows_updated_per_s_per_core"
    ] == 10500
    # Its clients taking most of the CPU leave the server a small share: the flood is no less heavy.
    starved = flood.model_copy(update={"series": {**flood.series, "pg.cpu_cores": [0.3] * 10}})
    assert [c.code for c in EXPERTS["workload"](Facts(starved, None, []))] == [
        "workload_high_updates"
    ]
    # The same rate on a host with 16 cores is 1,300 rows a second a core: a rate the host handles, no cause.
    assert EXPERTS["workload"](Facts(flood.model_copy(update={"cpu_count": 16}), None, [])) == []
    # A remote target (no host metrics): judged against one core, the sessions sampled on the CPU show its cost.
    remote = flood.model_copy(update={"cpu_count": None})
    assert [c.code for c in EXPERTS["workload"](Facts(remote, None, []))] == [
        "workload_high_updates"
    ]
    idle_remote = remote.model_copy(update={"series": {**remote.series, "act.on_cpu": [0.05] * 10}})
    assert EXPERTS["workload"](Facts(idle_remote, None, [])) == []
    assert (
        EXPERTS["workload"](Facts(pgbench.model_copy(update={"cpu_count": None}), None, [])) == []
    )


def test_a_cte_fed_bulk_load_is_an_insert_not_a_fetch() -> None:
    load = StatementDelta(
        queryid=1,
        query="WITH src AS (SELECT g FROM generate_series($1, $2) g) INSERT INTO t SELECT * FROM src",
        calls=5,
        total_exec_time_ms=4000,
        rows=400_000,
    )
    report = StatementDelta(
        queryid=2,
        query="WITH r AS (SELECT * FROM t) SELECT * FROM r",
        calls=2,
        total_exec_time_ms=900,
        rows=100_000,
    )
    assert (load.kind, report.kind) == ("insert", "select")
    loading = window(
        {"db.tup_inserted": [80_000.0] * 10, "db.xact_commit": [1.0] * 10}, statements=[load]
    )
    assert [c.code for c in EXPERTS["workload"](Facts(loading, None, []))] == [
        "workload_large_insert"
    ]
    fetching = window(statements=[report])
    assert [c.code for c in EXPERTS["workload"](Facts(fetching, None, []))] == [
        "workload_large_fetch"
    ]


def test_cross_review_resolves_conflicts_and_keeps_four() -> None:
    facts = Facts(window({"db.tup_inserted": [3000.0], "db.xact_commit": [3000.0]}), None, [])
    sync = Candidate(code="sync_commit_pressure", expert="configuration", strength=2.0)
    inserts = Candidate(code="workload_many_inserts", expert="workload", strength=1.1)
    causes, notes = cross_review([sync, inserts], facts)
    assert [c.code for c in causes] == ["sync_commit_pressure"]
    assert any(n.code == "workload_many_inserts" and n.verdict.startswith("dropped") for n in notes)
    # Durable transfers: two single-row updates per commit are the flush's cost, not an update workload;
    # updates of thousands of rows per commit are the update workload, their flushes its WAL volume.
    updates = Candidate(code="workload_high_updates", expert="workload", strength=2.5)
    transfers = Facts(window({"db.tup_updated": [2400.0], "db.xact_commit": [1200.0]}), None, [])
    assert [c.code for c in cross_review([sync, updates], transfers)[0]] == ["sync_commit_pressure"]
    batches = Facts(window({"db.tup_updated": [24000.0], "db.xact_commit": [12.0]}), None, [])
    assert [c.code for c in cross_review([sync, updates], batches)[0]] == ["workload_high_updates"]
    unrelated = (
        "workload_many_deletes",
        "workload_large_fetch",
        "query_poor_join",
        "cpu_contention",
        "io_contention",
        "memory_pressure",
    )
    many = [Candidate(code=code, expert="x", strength=1.0 + i) for i, code in enumerate(unrelated)]
    assert len(cross_review(many, facts)[0]) == MAX_CAUSES


def test_baseline_weakens_unsupported_candidates() -> None:
    base = window({"act.wait_lock": [0.0] * 10})
    candidate = Candidate(
        code="lock_contention", expert="locks", strength=1.0, indicators=["act.wait_lock"]
    )
    with_baseline = cross_review([candidate], Facts(window(), base, []))[0]
    without = cross_review([candidate], Facts(window(), None, []))[0]
    assert with_baseline == [] and [c.code for c in without] == ["lock_contention"]


def test_knowledge_covers_every_injected_cause_and_cites_the_manual() -> None:
    kb = knowledge_base()
    for code in RECIPES:
        chunk = kb.for_code(code)
        assert chunk is not None, code
        assert chunk.metrics and chunk.steps and chunk.solution
    assert all(c.source.startswith("PostgreSQL manual") for c in kb.chunks)
    assert (
        kb.retrieve(["act.wait_wal_flush", "io.wal.fsyncs"], "")[0].chunk.code
        == "sync_commit_pressure"
    )
    assert (
        kb.retrieve([], "rows locked by another transaction, sessions blocked", expert="locks")[
            0
        ].chunk.code
        == "lock_contention"
    )


def test_expert_selection_by_alert_and_abnormal_metrics() -> None:
    assert select_experts("", [], have_baseline=False) == list(EXPERTS)
    base = window({"act.wait_lock": [0.0] * 10, "db.xact_commit": [10.0] * 10})
    now = window({"act.wait_lock": [5.0] * 10, "db.xact_commit": [10.0] * 10})
    chosen = select_experts("checkout is slow", abnormal_metrics(now, base), have_baseline=True)
    assert "locks" in chosen and "query" in chosen and "memory" not in chosen


def test_rules_brain_plans_a_valid_expert_team() -> None:
    brief = Brief(
        server_version="18.0",
        server_version_num=180000,
        database="db",
        current_user="u",
        extensions=["pg_stat_statements"],
        preloaded_libraries=["pg_stat_statements"],
    )
    request = PlanRequest(scenario="diagnose", brief=brief, catalogue=catalogue())
    strategy = RulesBrain().plan(request)
    assert validate(strategy, request.catalogue) == []
    names = {a.name for a in strategy.team}
    assert {f"{e}-expert" for e in EXPERTS} <= names and "chief-dba" in names
    review = strategy.task("cross_review_causes")
    assert {f"expert_{e}" for e in EXPERTS} <= set(review.needs)


def test_benchmark_has_at_least_five_combinations_of_known_causes() -> None:
    assert len(COMBINATIONS) >= 5
    assert all(len(c) == 2 and set(c) <= set(RECIPES) for c in COMBINATIONS)


def test_selective_sequential_scan_is_a_missing_index() -> None:
    lookup = {
        "Node Type": "Seq Scan",
        "Relation Name": "items",
        "Filter": "(k = $1)",
        "Plan Rows": 3,
    }
    issues = plan_issues(lookup, {"items": 300_000})
    assert [i.code for i in issues] == ["index_missing"] and "CREATE INDEX ON items (k)" in issues[
        0
    ].detail
    assert issues[0].relations == ["items", "items(k)"], (
        "the table (as a subquery names it) and the key"
    )
    assert plan_issues(lookup, {"items": 500}) == []  # a small table is fine scanned
    broad = {**lookup, "Filter": "(id <= 200000)", "Plan Rows": 200_000}
    assert (
        plan_issues(broad, {"items": 300_000}) == []
    )  # most of the table: an index would not help
    expression = {**lookup, "Filter": "(md5(a) < md5(b))"}
    assert plan_issues(expression, {"items": 300_000}) == []


def test_a_scan_of_a_mostly_dead_table_is_its_dead_tuples_and_its_size_counts_them() -> None:
    """A scan reads every row version: 240k dead beside 60k live rows are the statement's cost (named
    once per table), and they make a table of few live rows large enough to want its index."""
    lookup = {"Node Type": "Seq Scan", "Relation Name": "t", "Filter": "(id = $1)", "Plan Rows": 1}
    issues = plan_issues(lookup, {"t": 60_000}, {"t": 240_000})
    assert [i.code for i in issues] == ["index_missing", "dead_tuples_high"]
    dead = issues[1]
    assert dead.relations == ["t"] and dead.numbers == {"live_rows": 60_000, "dead_rows": 240_000}
    assert "VACUUM t" in dead.detail
    twice = {"Node Type": "Append", "Plans": [lookup, lookup]}
    assert [i.code for i in plan_issues(twice, {"t": 60_000}, {"t": 240_000})].count(
        "dead_tuples_high"
    ) == 1
    few_live = plan_issues(lookup, {"t": 5_000}, {"t": 200_000})
    assert "index_missing" in [i.code for i in few_live]  # 205k row versions read per call
    assert [i.code for i in plan_issues(lookup, {"t": 5_000})] == []  # 5k rows: fine scanned
    # Fewer dead versions than live ones, or too few to matter: no finding of them.
    assert "dead_tuples_high" not in [
        i.code for i in plan_issues(lookup, {"t": 300_000}, {"t": 100_000})
    ]
    assert (
        plan_issues({**lookup, "Filter": "(id <= $1)", "Plan Rows": 900}, {"t": 9}, {"t": 900})
        == []
    )


def test_rules_summary_of_a_diagnosis_names_the_causes() -> None:
    from dbcrew.models import Finding, Severity

    cause = Finding(
        code="lock_contention",
        severity=Severity.CRITICAL,
        object="database",
        title="t",
        confidence=0.9,
        source="cross_review_causes",
    )
    assert (
        RulesBrain().summarize(Scenario.DIAGNOSE, [cause], [])
        == "1 root causes: lock_contention (confidence 0.90)."
    )
    assert (
        RulesBrain().summarize(
            Scenario.DIAGNOSE, [], [], "the window was compared with no baseline"
        )
        == "No root cause above the reporting confidence: the window was compared with no baseline."
    )


def test_what_a_diagnosis_compared_is_said_from_its_facts() -> None:
    from dbcrew.roles.report.reporter import compared_with

    assert compared_with({}) == ""  # nothing sampled: nothing compared, nothing said
    assert compared_with({"baseline_source": "", "abnormal": []}).startswith(
        "the window was compared with no baseline (no --baseline file"
    )
    kept = {"baseline_source": "a quiet window of 2026-11-27", "abnormal": []}
    assert compared_with(kept) == (
        "the window was compared with the baseline (a quiet window of 2026-11-27), and no metric left it"
    )
    assert compared_with({**kept, "abnormal": [{}, {}]}).endswith("which 2 metrics left")


def test_the_statements_that_changed_most_are_ranked_by_time_per_second() -> None:
    """Per second on each side (a 60 s baseline against a 10 s window), matched by (queryid, userid): a lookup that lost
    its index (same calls, slower) and a new statement rank above a steady one; monitoring and noise are left out."""

    def statement(
        queryid: int, query: str, calls: float, ms: float, userid: int = 10
    ) -> StatementDelta:
        return StatementDelta(
            queryid=queryid,
            userid=userid,
            query=query,
            calls=calls,
            total_exec_time_ms=ms,
            rows=calls,
        )

    lookup = "SELECT * FROM t WHERE k = $1"
    before = window(
        statements=[
            statement(1, lookup, 600, 60),  # 10 calls/s at 0.1 ms: 1 ms/s
            statement(2, "UPDATE steady SET v = $1", 600, 600),
            statement(3, "SELECT * FROM pg_stat_statements", 60, 60),
        ]
    ).model_copy(update={"seconds": 60.0})
    during = window(
        statements=[
            statement(1, lookup, 100, 5000),  # 10 calls/s at 50 ms: 500 ms/s
            statement(
                1, lookup, 10, 5, userid=11
            ),  # another role's runs: their own entry, 0.5 ms/s
            statement(2, "UPDATE steady SET v = $1", 100, 100),
            statement(4, "INSERT INTO new_one VALUES ($1)", 50, 200),
            statement(3, "SELECT * FROM pg_stat_statements", 100, 9000),
        ]
    ).model_copy(update={"seconds": 10.0})
    changed = changed_statements(during, before)
    assert [(c.queryid, c.userid) for c in changed] == [(1, 10), (4, 10)], (
        "the steady update (10 ms/s on both sides) and another role's 0.5 ms/s are no change; monitoring is not workload"
    )
    top = changed[0]
    assert (top.time_ms_per_s_before, top.time_ms_per_s_during) == (1.0, 500.0)
    assert top.calls_per_s_before == top.calls_per_s_during == 10.0
    assert (top.mean_ms_before, top.mean_ms_during) == (0.1, 50.0)
    assert changed[1].mean_ms_before is None and changed[1].time_ms_per_s_during == 20.0
    assert changed_statements(during, None) == [], "no baseline, nothing to compare"


@pytest.mark.parametrize(
    "argv", [["--case", "no_such_cause"], ["--case", "lock_contention", "--rounds", "2"]]
)
def test_bench_diagnose_narrowed_to_a_case_refuses_what_it_does_not_know(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """`python -m bench diagnose --case CAUSE` narrows the injection suite to single causes it has a
    recipe for; anything else is one usage line and exit 2, before a server starts."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert "usage: python -m bench diagnose" in capsys.readouterr().err
