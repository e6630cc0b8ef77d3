"""Time attribution: sampled sessions by wait, statement and relation, and the causes ranked by the time they explain.

The windows are built from pg_stat_activity rows as the sampler reads them (ActivityTally), by hand."""

from __future__ import annotations

from dbcrew.operators.diagnose.attribution import attribute, cause_shares
from dbcrew.operators.diagnose.candidates import Candidate, Facts
from dbcrew.operators.diagnose.cross_review import cross_review
from dbcrew.operators.diagnose.experts import CAUSE_TIME, EXPERTS
from dbcrew.operators.diagnose.judgements import PlanIssue, StatementPlan
from dbcrew.operators.window.anomaly import AbnormalMetric
from dbcrew.operators.window.evidence import TableDelta, WindowEvidence
from dbcrew.operators.window.live import sampling_coverage
from dbcrew.operators.window.metrics import WAIT_LOCK
from dbcrew.operators.window.readers import ActivityTally
from dbcrew.vocabulary import RootCauseCode

SAMPLES = 20


def session(
    pid: int, query: str, wait: str = "", lock_relation: str | None = None
) -> dict[str, object]:
    """One active client backend in one sample, as SESSIONS_SQL returns it."""
    kind, _, event = wait.partition(":")
    return {
        "pid": pid,
        "backend_type": "client backend",
        "state": "active",
        "state_seconds": 0.01,
        "wait_event_type": kind or None,
        "wait_event": event or None,
        "query": query,
        "blocked_by": "",
        "xact_seconds": 0.01,
        "lock_relation": lock_relation,
    }


def sampled(sessions: list[dict[str, object]], **fields: object) -> WindowEvidence:
    """A 5 s window whose every sample saw `sessions`; the gauges are the samples' means."""
    tally = ActivityTally()
    gauges = [tally.add(sessions) for _ in range(SAMPLES)]
    series = {k: [g[k] for g in gauges] for k in gauges[0]}
    extra = fields.pop("series", {})
    assert isinstance(extra, dict)
    return WindowEvidence(
        started_at=0.0,
        seconds=5.0,
        interval=0.5,
        series={**series, **extra},
        waits=dict(tally.waits),
        session_samples=tally.samples,
        time_slices=tally.time_slices(),
        statement_texts=tally.texts,
        running=dict(tally.running),
        **fields,  # type: ignore[arg-type]
    )


def diagnosed(window: WindowEvidence) -> list[tuple[str, float | None]]:
    facts = Facts(window, None, [])
    candidates = [c for expert in EXPERTS.values() for c in expert(facts)]
    causes, notes = cross_review(candidates, facts)
    assert all(n.verdict for n in notes)
    return [(c.code, c.time_share) for c in causes]


HOT = "UPDATE hot SET hits = hits + 1 WHERE id = 1"


def test_lock_waits_on_one_relation_name_lock_contention_on_it_first() -> None:
    # Eight updaters of one hot row: five wait on the holder's transaction (pg_locks names no relation:
    # the statement's table counts), two on the row's tuple lock (pg_locks names it), one runs;
    # two readers of another table run beside them. The update rate is over the host's capacity.
    sessions = [session(pid, HOT, "Lock:transactionid") for pid in range(1, 6)]
    sessions += [session(pid, HOT, "Lock:tuple", "public.hot") for pid in (6, 7)]
    sessions += [session(8, HOT), session(9, "SELECT * FROM other WHERE id = 3")]
    sessions += [session(10, "SELECT * FROM other WHERE id = 4", "IO:DataFileRead")]
    window = sampled(
        sessions,
        series={"db.tup_updated": [20_000.0] * SAMPLES, "db.xact_commit": [20_000.0] * SAMPLES},
        cpu_count=2,
        tables=[TableDelta(name="public.hot", n_tup_upd=100_000), TableDelta(name="public.other")],
    )
    attribution = attribute(window)
    assert attribution is not None and attribution.samples == 10 * SAMPLES
    assert (attribution.by_relation[0].label, attribution.by_relation[0].share) == (
        "public.hot",
        0.8,
    )
    assert attribution.by_wait_class[0].label == "Lock"
    found = diagnosed(window)
    assert found[0] == ("lock_contention", 0.7), found
    lock = next(
        c
        for c in EXPERTS["locks"](Facts(window, None, []))
        if c.code == RootCauseCode.LOCK_CONTENTION
    )
    assert lock.objects == ["public.hot"]
    # The updates' own work (one runner of eight) explains a tenth: dropped beside 70 % of lock waits.
    assert "workload_high_updates" not in dict(found)


INSERT = "INSERT INTO events (kind, at) VALUES ('click', now()), ('view', now()), ('buy', now())"
FLUSHED = {
    "series": {"db.tup_inserted": [24_000.0] * SAMPLES, "db.xact_commit": [8_000.0] * SAMPLES},
    "settings": {"synchronous_commit": "on"},
    "tables": [TableDelta(name="public.events", n_tup_ins=120_000)],
}


def test_many_small_autocommit_inserts_are_the_inserts_first_and_commit_pressure_second() -> None:
    # Twelve clients commit three-row inserts, autocommit: seven run, five wait for their commit's WAL
    # flush, sampled under the INSERT's text. The flushes are the inserts' own time (ASH's time by
    # statement) and commit pressure's: both named, the inserts first; three rows a commit is small, so
    # the flushes are the price of committing often, not the inserts' WAL volume.
    sessions = [session(pid, INSERT) for pid in range(1, 8)]
    sessions += [session(pid, INSERT, "IO:WalSync") for pid in range(8, 12)]
    sessions += [session(12, INSERT, "LWLock:WALWrite")]
    found = diagnosed(sampled(sessions, **FLUSHED))
    assert found == [("workload_many_inserts", 1.0), ("sync_commit_pressure", 0.417)]


def test_inserters_queued_on_their_tables_extension_lock_are_the_inserts_not_lock_contention() -> (
    None
):
    # Eight clients insert into one table; on a busy host half of them wait, at every sample, for the
    # relation-extension lock (pg_locks names the table): a heavyweight lock, but held only while a
    # writer adds a page, never by a transaction another waits out. Their waits are the inserts' own
    # work; no other session's lock holds anyone back.
    sessions = [session(pid, INSERT) for pid in range(1, 5)]
    sessions += [session(pid, INSERT, "Lock:extend", "public.events") for pid in range(5, 9)]
    window = sampled(sessions, **FLUSHED)
    assert window.mean(WAIT_LOCK) == 4.0  # the sessions do wait on a Lock-class event
    assert diagnosed(window) == [("workload_many_inserts", 1.0)]
    assert not EXPERTS["locks"](Facts(window, None, []))


def test_single_row_inserts_bound_by_their_flushes_are_named_by_the_time_of_their_statements() -> (
    None
):
    # One row a commit, nine of twelve clients waiting on the flush: far under any rows-per-second line
    # (2,000 a second), the inserts are a cause because they took all of the time; the flush second.
    sessions = [session(pid, INSERT, "IO:WalSync") for pid in range(1, 10)]
    sessions += [session(pid, INSERT) for pid in range(10, 13)]
    window = sampled(
        sessions,
        series={"db.tup_inserted": [2_000.0] * SAMPLES, "db.xact_commit": [2_000.0] * SAMPLES},
        settings={"synchronous_commit": "on"},
        tables=[TableDelta(name="public.events", n_tup_ins=10_000)],
    )
    assert diagnosed(window) == [("workload_many_inserts", 1.0), ("sync_commit_pressure", 0.75)]


def test_flushes_of_explicit_transactions_dominating_are_commit_pressure_first() -> None:
    # Transactions commit with COMMIT: the flush is sampled under the COMMIT, no insert's own time.
    sessions = [session(pid, "COMMIT", "IO:WalSync") for pid in range(1, 10)]
    sessions += [session(pid, INSERT) for pid in range(10, 13)]
    found = diagnosed(sampled(sessions, **FLUSHED))
    # The inserts' own work (a quarter) commits three rows at a time: the same commits, named once.
    assert found == [("sync_commit_pressure", 0.75)]


TRANSFER = "UPDATE accounts SET balance = balance + $1 WHERE id = $2"
SMALL_UPDATES = {
    "series": {"db.tup_updated": [20_000.0] * SAMPLES, "db.xact_commit": [10_000.0] * SAMPLES},
    "settings": {"synchronous_commit": "on"},
    "cpu_count": 2,
    "tables": [TableDelta(name="public.accounts", n_tup_upd=100_000)],
}


def test_updates_two_a_transaction_held_back_by_their_commits_flush_are_commit_pressure_alone() -> (
    None
):
    # Transfers: BEGIN, two single-row updates, COMMIT. Eight of twelve clients wait for the COMMIT's
    # flush, four run an update: 20,000 rows a second is over what 2 cores carry, yet the rows are the
    # transactions' two each, and the flushes of those commits took twice the updates' time.
    sessions = [session(pid, "COMMIT", "IO:WalSync") for pid in range(1, 9)]
    sessions += [session(pid, TRANSFER) for pid in range(9, 13)]
    window = sampled(sessions, **SMALL_UPDATES)
    facts = Facts(window, None, [])
    candidates = [c for expert in EXPERTS.values() for c in expert(facts)]
    assert {c.code for c in candidates} >= {"sync_commit_pressure", "workload_high_updates"}
    causes, notes = cross_review(candidates, facts)
    assert [(c.code, c.time_share) for c in causes] == [("sync_commit_pressure", 0.667)]
    assert any(
        n.code == "workload_high_updates"
        and n.verdict.startswith("dropped: the same commits as sync_commit_pressure")
        for n in notes
    )


def test_autocommit_updates_whose_flush_is_their_own_time_are_named_beside_commit_pressure() -> (
    None
):
    # The same clients without BEGIN/COMMIT: each update's flush is sampled under its own text, so the
    # updates explain as much time as the flushes: both named, the updates first.
    sessions = [session(pid, TRANSFER, "IO:WalSync") for pid in range(1, 9)]
    sessions += [session(pid, TRANSFER) for pid in range(9, 13)]
    found = diagnosed(sampled(sessions, **SMALL_UPDATES))
    assert found == [("workload_high_updates", 1.0), ("sync_commit_pressure", 0.667)]


def test_a_small_share_never_outranks_most_of_the_time_whatever_the_strengths() -> None:
    sessions = [session(pid, "COMMIT", "IO:WalSync") for pid in range(1, 12)]
    sessions += [session(12, INSERT)]
    window = sampled(sessions, **FLUSHED)
    facts = Facts(window, None, [])
    strong = Candidate(code="workload_many_inserts", expert="workload", strength=50.0)
    weak = Candidate(code="sync_commit_pressure", expert="configuration", strength=1.0)
    causes, notes = cross_review([strong, weak], facts)
    assert [c.code for c in causes] == ["sync_commit_pressure"]
    assert any(
        n.code == "workload_many_inserts"
        and n.verdict
        == "dropped: the same commits as sync_commit_pressure, whose flushes explain more of the time"
        " (92% against 8%)"
        for n in notes
    )


def test_an_update_flood_flushing_hundreds_of_rows_a_commit_is_not_commit_pressure() -> None:
    # Autocommit updates of 300 rows each: the flushes they wait on carry their WAL, not many commits.
    flood = "UPDATE orders SET price = price * 1.01 WHERE id BETWEEN $1 AND $2"
    sessions = [session(pid, flood, "IO:WalSync") for pid in range(1, 8)]
    sessions += [session(pid, flood) for pid in range(8, 13)]
    window = sampled(
        sessions,
        series={"db.tup_updated": [300_000.0] * SAMPLES, "db.xact_commit": [1_000.0] * SAMPLES},
        settings={"synchronous_commit": "on"},
        cpu_count=2,
        tables=[TableDelta(name="public.orders", n_tup_upd=1_500_000)],
    )
    assert diagnosed(window) == [("workload_high_updates", 1.0)]


def test_inserts_into_a_table_carrying_many_indexes_are_the_index_count() -> None:
    audit = "INSERT INTO audit (a, b, c) VALUES ($1, $2, $3)"
    sessions = [session(pid, audit, "IO:WalSync") for pid in range(1, 9)]
    sessions += [session(pid, audit) for pid in range(9, 11)]
    window = sampled(
        sessions,
        series={"db.tup_inserted": [400.0] * SAMPLES, "db.xact_commit": [400.0] * SAMPLES},
        settings={"synchronous_commit": "on"},
        tables=[TableDelta(name="public.audit", n_tup_ins=2_000, index_count=12)],
    )
    found = [code for code, _ in diagnosed(window)]
    assert found[0] == "indexes_too_many", found
    assert "workload_many_inserts" not in found


def test_cpu_spent_by_a_statement_another_cause_names_is_its_symptom() -> None:
    scan = "SELECT * FROM big WHERE k = 7"
    sessions = [session(pid, scan) for pid in range(1, 10)] + [session(10, "SELECT 1")]
    window = sampled(sessions)
    missing = Candidate(
        code="index_missing", expert="index", strength=3.0, evidence={"query": scan}
    )
    cpu = Candidate(code="cpu_contention", expert="cpu", strength=3.0)
    shares = cause_shares([missing, cpu], window, CAUSE_TIME)
    assert shares == {"index_missing": 0.9, "cpu_contention": 0.1}
    assert cause_shares([cpu], window, CAUSE_TIME) == {"cpu_contention": 1.0}


def test_a_window_without_session_samples_measures_no_share() -> None:
    window = WindowEvidence(started_at=0.0, seconds=5.0, interval=0.5)
    lock = Candidate(code="lock_contention", expert="locks", strength=2.0)
    assert attribute(window) is None
    assert cause_shares([lock], window, CAUSE_TIME) == {"lock_contention": None}


def test_a_sampler_that_fell_behind_says_so_in_the_coverage() -> None:
    on_time = WindowEvidence(
        started_at=0.0, seconds=5.0, interval=0.5, session_samples=48, planned_samples=50
    )
    assert sampling_coverage(on_time) == []
    behind = on_time.model_copy(update={"session_samples": 21})
    (entry,) = sampling_coverage(behind)
    assert entry.check == "session_samples" and "21 of 50" in entry.reason
    past = on_time.model_copy(update={"planned_samples": 0, "session_samples": 2})
    assert sampling_coverage(past) == [], (
        "a past interval's samples were not scheduled by a sampler"
    )


def test_a_small_cause_of_its_own_statements_stays_after_the_leading_one() -> None:
    # Six clients hash on the CPU, one runs a poor join: the join is a seventh of the time, but its own.
    hashing = "SELECT count(*) FROM t WHERE md5(a) < md5(b)"
    join = "SELECT count(*) FROM o JOIN i ON i.order_id BETWEEN o.id AND o.id + 0"
    window = sampled([session(pid, hashing) for pid in range(1, 7)] + [session(7, join)])
    cpu = Candidate(code="cpu_contention", expert="cpu", strength=2.0)
    poor = Candidate(code="query_poor_join", expert="query", strength=2.0, evidence={"query": join})
    causes, notes = cross_review([poor, cpu], Facts(window, None, []))
    assert [(c.code, c.time_share) for c in causes] == [
        ("cpu_contention", 0.857),
        ("query_poor_join", 0.143),
    ]
    assert any(n.code == "query_poor_join" and n.verdict.startswith("kept after") for n in notes)


def test_a_bulk_insert_waiting_on_the_disk_beside_scans_is_a_cause_of_its_own() -> None:
    # Six scanners wait on their reads; a bulk insert waits on the disk in one sample of two and works in
    # the other. Disk waits are the lead (the insert's among them), yet the scans spend most of them.
    scan = "SELECT count(*) FROM big"
    load = "INSERT INTO bulk SELECT g, md5(g::text) FROM generate_series(1, 150000) g"
    tally = ActivityTally()
    for step in range(SAMPLES):
        rows = [session(pid, scan, "IO:DataFileRead") for pid in range(1, 7)]
        tally.add([*rows, session(7, load, "IO:DataFileExtend" if step % 2 else "")])
    window = WindowEvidence(
        started_at=0.0,
        seconds=5.0,
        interval=0.5,
        time_slices=tally.time_slices(),
        statement_texts=tally.texts,
    )
    io = Candidate(code="io_contention", expert="io", strength=2.0)
    bulk = Candidate(
        code="workload_large_insert",
        expert="workload",
        strength=10.0,
        evidence={"bulk_statements": [{"query": load}]},
    )
    causes, _ = cross_review([bulk, io], Facts(window, None, []))
    assert [(c.code, c.time_share) for c in causes] == [
        ("io_contention", 0.929),
        ("workload_large_insert", 0.143),
    ]
    # Updaters of one row: their own work is the lock waits' statements seen from another side.
    waiting = [session(pid, HOT, "Lock:transactionid") for pid in range(1, 8)]
    queue = sampled([*waiting, session(8, HOT)])
    locks = Candidate(code="lock_contention", expert="locks", strength=2.0)
    updates = Candidate(code="workload_high_updates", expert="workload", strength=2.0)
    causes, _ = cross_review([updates, locks], Facts(queue, None, []))
    assert [c.code for c in causes] == ["lock_contention"]


def idle(pid: int) -> dict[str, object]:
    """A client between two transactions (idle a moment), as SESSIONS_SQL returns it."""
    return {**session(pid, "SELECT 1"), "state": "idle", "state_seconds": 0.05}


def test_committers_are_held_by_their_flushes_beside_a_paced_load_that_flushes_now_and_then() -> (
    None
):
    # Twenty committers flush in 40 samples of 42; twenty paced clients flush once in 51 and idle the rest.
    tally = ActivityTally()
    for step in range(51):
        rows = [
            session(pid, "COMMIT", "IO:WalSync") if step < 40 else idle(pid) for pid in range(20)
        ]
        rows = rows[:] if step < 42 else rows[:0]
        rows += [
            session(pid, "COMMIT", "IO:WalSync") if step == 0 else idle(pid)
            for pid in range(20, 40)
        ]
        tally.add(rows)
    flushes = sum(tally.flush_waits.values())
    held = flushes / (flushes + tally.flusher_idle_between())
    assert held > 0.8, held
    # A paced load alone: each client flushes in 5 samples of 50 and idles the rest: not held back.
    paced = ActivityTally()
    for step in range(50):
        paced.add(
            [session(pid, "COMMIT", "IO:WalSync") if step < 5 else idle(pid) for pid in range(10)]
        )
    flushes = sum(paced.flush_waits.values())
    assert flushes / (flushes + paced.flusher_idle_between()) < 0.2


def test_the_work_comes_before_its_resource_when_both_explain_the_same_time() -> None:
    # Every sample of the single-row inserts is their commit's flush: 100 % each, the inserts first.
    sessions = [session(pid, INSERT, "IO:WalSync") for pid in range(1, 13)]
    window = sampled(sessions, **FLUSHED)
    strong_sync = Candidate(code="sync_commit_pressure", expert="configuration", strength=8.0)
    inserts = Candidate(code="workload_many_inserts", expert="workload", strength=1.0)
    causes, _ = cross_review([strong_sync, inserts], Facts(window, None, []))
    assert [(c.code, c.time_share) for c in causes] == [
        ("workload_many_inserts", 1.0),
        ("sync_commit_pressure", 1.0),
    ]


def test_a_poor_join_beside_a_lock_queue_is_judged_by_the_work_it_does() -> None:
    # Twenty clients queue on a hot row (their waits fill the statement time), one runs a nested loop:
    # a twentieth of the statement time, all of the work but the lock holder's.
    join = "SELECT count(*) FROM o JOIN i ON i.order_id = o.id WHERE o.region = 3"
    sessions = [session(pid, HOT, "Lock:transactionid") for pid in range(1, 21)]
    sessions += [session(21, HOT), session(22, join.replace("3", "7"))]
    window = sampled(sessions, tables=[TableDelta(name="public.hot", n_tup_upd=1_000)])
    judged = StatementPlan(
        query=join.replace("3", "$1"),
        share=0.04,
        issues=[PlanIssue(code="query_poor_join", detail="nested loop over 170000 outer rows")],
    )
    found = EXPERTS["query"](Facts(window, None, [], plans=[judged]))
    assert [(c.code, c.evidence["share_of_work"]) for c in found] == [("query_poor_join", 0.5)]
    # Without the samples (a past interval), the statement time alone stands: too small a share.
    unsampled = WindowEvidence(started_at=0.0, seconds=5.0, interval=0.5)
    assert EXPERTS["query"](Facts(unsampled, None, [], plans=[judged])) == []


def test_a_purge_holding_a_third_of_the_time_is_a_cause_when_its_rate_left_the_baseline() -> None:
    purge = "DELETE FROM archive WHERE id IN (SELECT id FROM archive ORDER BY id LIMIT 3000)"
    sessions = [session(pid, purge) for pid in range(1, 5)]
    sessions += [session(pid, "SELECT * FROM orders WHERE id = 9") for pid in range(5, 11)]
    window = sampled(
        sessions,
        series={"db.tup_deleted": [600.0] * SAMPLES},
        tables=[TableDelta(name="public.archive", n_tup_del=3_000)],
    )
    found = EXPERTS["workload"](Facts(window, None, []))
    assert [(c.code, c.evidence.get("delete_time_share")) for c in found] == [
        ("workload_many_deletes", 0.4)
    ]
    # The same purge as the baseline ran it (its rate did not leave the baseline): no cause.
    assert EXPERTS["workload"](Facts(window, window, [])) == []


def test_committers_idling_between_transactions_are_commit_pressure_when_their_commits_left_the_baseline() -> (
    None
):
    # Ten clients starved of the CPU: each is seen waiting on its COMMIT's flush in 3 samples of 10 and
    # idle between transactions in the other 7 (the flush holds them back less than they idle), so the
    # flush-hold test alone does not name commit pressure; their database time is the flush.
    tally = ActivityTally()
    gauges = [
        tally.add(
            [
                session(pid, "COMMIT", "IO:WalSync") if (step + pid) % 10 < 3 else idle(pid)
                for pid in range(10)
            ]
        )
        for step in range(SAMPLES)
    ]
    window = WindowEvidence(
        started_at=0.0,
        seconds=5.0,
        interval=0.5,
        series={
            **{k: [g[k] for g in gauges] for k in gauges[0]},
            "db.xact_commit": [6_000.0] * SAMPLES,
        },
        waits=dict(tally.waits),
        session_samples=tally.samples,
        time_slices=tally.time_slices(),
        statement_texts=tally.texts,
        flusher_idle_between=tally.flusher_idle_between(),
        settings={"synchronous_commit": "on"},
    )
    flushes = sum(tally.flush_waits.values())
    assert flushes / (flushes + window.flusher_idle_between) < 0.5
    found = EXPERTS["configuration"](Facts(window, None, []))
    assert [(c.code, c.evidence["commit_flush_share_of_active_time"]) for c in found] == [
        ("sync_commit_pressure", 1.0)
    ]
    # The same commits as the baseline made them (the commit rate did not leave it): no cause.
    assert EXPERTS["configuration"](Facts(window, window, [])) == []


def rose(metric: str, before: float, during: float) -> AbnormalMetric:
    """`metric` out of the baseline, upwards."""
    return AbnormalMetric(
        name=metric, baseline_median=before, window_median=during, z=9.0, ks_p=0.0
    )


def test_two_workers_claiming_one_row_are_lock_contention_when_their_lock_waits_left_the_baseline() -> (
    None
):
    # One worker waits on the other's row lock four samples in ten; the holder idles in its transaction.
    window = sampled(
        [session(1, HOT, "Lock:transactionid")],
        series={"act.wait_lock": [1.0, 0.0, 1.0, 0.0, 0.0] * (SAMPLES // 5)},
    )
    assert window.mean(WAIT_LOCK) == 0.4
    quiet = sampled([session(2, "SELECT * FROM other WHERE id = 3")])
    locks = EXPERTS["locks"]
    found = locks(Facts(window, quiet, [rose("act.wait_lock", 0.0, 0.4)]))
    assert [(c.code, c.objects) for c in found] == [("lock_contention", ["hot"])]
    assert locks(Facts(window, window, [])) == [], "as many waits as the baseline had: no cause"


def test_a_session_on_every_core_with_the_host_all_but_full_is_cpu_contention_out_of_the_baseline() -> (
    None
):
    checksum = "SELECT sum(length(md5(note))) FROM ledger WHERE id BETWEEN 1 AND 4000"
    window = sampled(
        [session(1, checksum), session(2, checksum)],
        series={"host.cpu_busy": [99.0] * SAMPLES},
        cpu_count=2,
    )
    cpu = EXPERTS["cpu"]
    found = cpu(Facts(window, window, [rose("act.on_cpu", 0.1, 2.0)]))
    assert [c.code for c in found] == ["cpu_contention"]
    assert cpu(Facts(window, window, [])) == [], (
        "sessions on the CPU as in the baseline: no queue, no cause"
    )


def test_sessions_sorting_in_gigabytes_of_memory_are_memory_pressure_and_the_cpu_they_fill_its_symptom() -> (
    None
):
    # Two sessions sort in memory with a huge work_mem, each holding 3 GB of an 8 GB host, and keep both
    # cores busy; a reader waits on its reads beside them. The memory is theirs, so is the CPU time.
    sort = "SELECT count(*) FROM (SELECT g FROM generate_series(1, 25000000) g ORDER BY g DESC) s"
    sessions = [session(1, sort), session(2, sort)]
    sessions += [session(3, "SELECT * FROM other WHERE id = 3", "IO:DataFileRead")]
    tally = ActivityTally()
    tally.add(sessions)
    held = tally.memory_by_statement({1: 3 * 2**30, 2: 3 * 2**30, 3: 2**24, 99: 2**30})
    window = sampled(
        sessions,
        series={"host.cpu_busy": [99.0] * SAMPLES, "pg.private_mem_gb": [6.2] * SAMPLES},
        cpu_count=2,
        memory_total_bytes=8 * 2**30,
        memory_by_statement=held,
    )
    assert list(held.values()) == [6.0, 0.016], (
        "both sorters' memory is their statement's; a process never sampled running is no statement's"
    )
    saturated = Facts(window, None, [])
    assert [c.code for c in EXPERTS["cpu"](saturated)] == ["cpu_contention"], (
        "a session on the CPU a core, the host full: the CPU test alone holds"
    )
    found = diagnosed(window)
    assert [code for code, _ in found] == ["memory_pressure"], found
    assert (found[0][1] or 0.0) >= 0.6
    # Held by no few statements (a remote target's backends are not seen): not measured, and the CPU the
    # sessions fill stays a cause of its own beside it.
    unseen = window.model_copy(update={"memory_by_statement": {}})
    assert [code for code, _ in diagnosed(unseen)] == ["cpu_contention", "memory_pressure"]
