"""The root causes' declarations (dbcrew/operators/diagnose/causes/) and what the diagnosis derives from them.

Each cause is declared once; these tests hold the declarations to what they say: every code of the
vocabulary is declared, a knowledge chunk it names explains it, a criterion reads only the thresholds its
declaration names (read on random synthetic windows), each expert operator offers the planner its causes'
signals, and the conflicts are between declared causes in the order the cross review applies them.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

import dbcrew.operators  # noqa: F401  (registers every operator)
from dbcrew.operators.diagnose.candidates import Facts
from dbcrew.operators.diagnose.causes.declaration import (
    DeclaredCause,
    FromPlans,
    declare,
    plan_candidates,
)
from dbcrew.operators.diagnose.experts import (
    CAUSE_TIME,
    CAUSES,
    CONFLICTS,
    EXPERT_SIGNALS,
    EXPERTS,
    TEAM,
    experts_by_code,
)
from dbcrew.operators.diagnose.judgements import PlanIssue, StatementPlan
from dbcrew.operators.knowledge import knowledge_base
from dbcrew.operators.registry import REGISTRY
from dbcrew.operators.window.anomaly import abnormal_metrics
from dbcrew.operators.window.evidence import (
    BlockedSession,
    StatementDelta,
    TableDelta,
    WindowEvidence,
)
from dbcrew.operators.window.readers import ActivityTally
from dbcrew.settings.diagnosis import DiagnosisThresholds
from dbcrew.settings.thresholds import Thresholds
from dbcrew.vocabulary import RootCauseCode

READ: set[str] = set()  # the thresholds read since it was last cleared


class RecordingDiagnosis(DiagnosisThresholds):
    def __getattribute__(self, name: str) -> Any:
        if name in DiagnosisThresholds.model_fields:
            READ.add(name)
        return super().__getattribute__(name)


class RecordingThresholds(Thresholds):
    def __getattribute__(self, name: str) -> Any:
        if name in Thresholds.model_fields and name != "diagnosis":
            READ.add(name)
        return super().__getattribute__(name)


def test_every_root_cause_code_is_declared_once_with_its_knowledge_chunk() -> None:
    codes = [c.code for c in CAUSES]
    assert len(codes) == len(set(codes))
    assert set(RootCauseCode) <= set(codes)
    chunks = {c.name: c for c in knowledge_base().chunks}
    for declared in CAUSES:
        if declared.knowledge is not None:
            assert declared.knowledge in chunks, declared.code
            chunk = chunks[declared.knowledge]
            assert (chunk.code, chunk.expert) == (declared.code, declared.expert.name)
    # no chunk explains a cause nobody diagnoses
    assert {c.code for c in chunks.values()} <= set(codes)
    assert experts_by_code() == {str(c.code): c.expert.name for c in CAUSES}
    assert set(CAUSE_TIME) == set(codes)


def test_a_cause_cannot_be_declared_twice_nor_read_a_threshold_that_does_not_exist() -> None:
    lock = next(c for c in CAUSES if c.code == RootCauseCode.LOCK_CONTENTION)
    with pytest.raises(ValueError, match="declared twice"):
        declare(lock)
    with pytest.raises(ValueError, match="lock_wait_shares"):
        declare(
            DeclaredCause(
                **{
                    **lock.__dict__,
                    "code": RootCauseCode.CPU_CONTENTION.value + "_x",
                    "thresholds": ("lock_wait_shares",),
                }
            )
        )
    assert [c.code for c in CAUSES].count(RootCauseCode.LOCK_CONTENTION) == 1


METRICS = {
    "act.on_cpu": 8,
    "host.cpu_busy": 100,
    "host.load1": 8,
    "pg.cpu_cores": 4,
    "act.active": 8,
    "host.mem_available_gb": 16,
    "pg.private_mem_gb": 16,
    "host.swap_io_mb": 50,
    "db.blk_read_time": 3000,
    "io.relation.read_time": 3000,
    "host.iowait": 40,
    "db.tup_inserted": 60000,
    "db.xact_commit": 8000,
    "db.tup_updated": 60000,
    "db.tup_deleted": 30000,
    "act.wait_lock": 8,
    "act.wait_wal_flush": 8,
    "act.vacuum": 1,
    "vacuum.heap_blks_scanned": 20000,
    "db.blks_read": 5000,
}
QUERIES = [
    "INSERT INTO t1 VALUES (1)",
    "UPDATE t1 SET a = a + 1 WHERE id = 1",
    "DELETE FROM t2 WHERE id < 5",
    "SELECT * FROM t1 JOIN t2 ON t1.a >= t2.b",
    "COMMIT",
    "VACUUM t1",
    "COPY t2 FROM STDIN",
]
WAITS = ["", "Lock:transactionid", "Lock:extend", "IO:WALSync", "IO:DataFileRead"]


def session(pid: int, query: str, wait: str) -> dict[str, object]:
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
        "lock_relation": "public.t1" if wait.startswith("Lock") else None,
    }


def random_window(rng: random.Random, level: float) -> WindowEvidence:
    """A window of random rates, sampled sessions, tables and statements: the criteria's branches
    reached by chance, not by design."""
    series = {
        m: [scale * level * rng.random()] * 10 for m, scale in METRICS.items() if rng.random() < 0.7
    }
    tally = ActivityTally()
    sessions = [
        session(pid, rng.choice(QUERIES), rng.choice(WAITS)) for pid in range(rng.randrange(1, 9))
    ]
    for _ in range(20):
        tally.add(sessions)
    return WindowEvidence(
        started_at=0.0,
        seconds=5.0,
        interval=0.5,
        series=series,
        waits=dict(tally.waits),
        session_samples=tally.samples,
        time_slices=tally.time_slices() if rng.random() < 0.7 else [],
        statement_texts=tally.texts,
        running=dict(tally.running),
        cpu_count=rng.choice([None, 2, 16]),
        memory_total_bytes=rng.choice([None, 16 * 2**30]),
        flusher_idle_between=rng.randrange(0, 40),
        tables=[
            TableDelta(
                name=f"public.t{i}",
                n_tup_ins=rng.random() * 1e5 * level,
                n_tup_upd=rng.random() * 1e5 * level,
                index_count=rng.randrange(0, 14),
            )
            for i in (1, 2)
        ],
        statements=[
            StatementDelta(
                queryid=i, query=q, calls=rng.randrange(1, 50), total_exec_time_ms=1e3, rows=1e6
            )
            for i, q in enumerate(rng.sample(QUERIES, 3))
        ],
        blocked=[
            BlockedSession(pid=2, blocker_pid=3, blocker_state="idle", blocker_xact_seconds=1)
        ],
    )


def test_each_criterion_reads_only_the_thresholds_its_declaration_names() -> None:
    rng = random.Random(7)
    read: dict[str, set[str]] = {str(c.code): set() for c in CAUSES}
    for _ in range(150):
        now, base = random_window(rng, rng.choice([1.0, 3.0])), random_window(rng, 0.2)
        plans = [
            StatementPlan(
                query=q,
                share=rng.random(),
                issues=[PlanIssue(code=c.code, detail="d") for c in CAUSES],
            )
            for q in rng.sample(QUERIES, 2)
        ]
        for declared in CAUSES:
            facts = Facts(
                now,
                base if rng.random() < 0.5 else None,
                abnormal_metrics(now, base),
                plans=plans,
                thresholds=RecordingThresholds(diagnosis=RecordingDiagnosis()),
            )
            READ.clear()
            if isinstance(declared.criterion, FromPlans):
                plan_candidates(facts, [declared])
            else:
                declared.criterion(facts)
            read[str(declared.code)] |= READ
    for declared in CAUSES:
        code = str(declared.code)
        assert read[code], f"{code}: no threshold read on 150 windows"
        assert read[code] <= set(declared.thresholds), (code, read[code] - set(declared.thresholds))


def test_each_expert_operator_offers_its_causes_signals_and_knowledge() -> None:
    assert list(EXPERTS) == [e.name for e in TEAM]
    for expert in TEAM:
        entry = REGISTRY[f"expert_{expert.name}"]
        assert entry.signals == EXPERT_SIGNALS[expert.name][0]
        assert entry.knowledge == expert.name
        declared = [c for c in CAUSES if c.expert == expert]
        assert set(EXPERT_SIGNALS[expert.name][1]) == {w for c in declared for w in c.words}


def test_conflicts_are_between_declared_causes_in_the_order_of_their_boundaries() -> None:
    codes = {c.code for c in CAUSES}
    assert CONFLICTS and all({c.kept, c.challenged} <= codes for c in CONFLICTS)
    assert [c.boundary for c in CONFLICTS] == sorted(c.boundary for c in CONFLICTS)
    # a cause never yields to itself, and never both ways across the same boundary
    pairs = {(c.kept, c.challenged, c.boundary) for c in CONFLICTS}
    assert all(k != c and (c, k, b) not in pairs for k, c, b in pairs)
