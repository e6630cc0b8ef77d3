"""Causes in how statements are executed: a poor join, a correlated subquery, a missing index (judged
from the heaviest statements' plans, dbcrew/operators/diagnose/judgements.py), and too many indexes on
a table the window writes (the query and index experts)."""

from __future__ import annotations

from dbcrew.operators.diagnose.attribution import CauseTime, write_shares, writes_to_objects
from dbcrew.operators.diagnose.candidates import Facts, Proposal
from dbcrew.operators.diagnose.causes.declaration import (
    FROM_PLANS,
    Boundary,
    DeclaredCause,
    Expert,
    YieldsTo,
    cause,
    declare,
)
from dbcrew.operators.diagnose.causes.measures import led_strength, rate_left_baseline
from dbcrew.operators.window.metrics import (
    ACTIVE,
    BLOCKS_HIT,
    ON_CPU,
    ROWS_DELETED,
    ROWS_FETCHED,
    ROWS_INSERTED,
    ROWS_RETURNED,
    ROWS_UPDATED,
    WAL_BYTES,
)
from dbcrew.vocabulary import FindingCode, RootCauseCode

QUERY = Expert(
    "query",
    "Query expert: generic plans of the heaviest statements -> query_correlated_subquery, query_poor_join.",
)
INDEX = Expert(
    "index",
    "Index expert: selective sequential scans of the heaviest statements, write-heavy tables carrying many indexes -> index_missing, indexes_too_many.",
)

# What a plan cause's statement shows while it runs; its time is its own work (the statement it quotes).
PLAN_INDICATORS = (ON_CPU, ACTIVE, ROWS_RETURNED, BLOCKS_HIT)
QUERY_SIGNALS = (ROWS_RETURNED, ROWS_FETCHED, BLOCKS_HIT, ON_CPU, ACTIVE)
# A plan cause's candidates come before its expert's other causes' (one pass over the plans, first),
# whatever the order of declaration; the order of declaration orders the metrics that call the expert in.

declare(
    DeclaredCause(
        RootCauseCode.QUERY_POOR_JOIN,
        QUERY,
        FROM_PLANS,
        indicators=PLAN_INDICATORS,
        signals=QUERY_SIGNALS,
        words=("slow", "query", "latency", "join", "response"),
        thresholds=("query_share",),
        knowledge="poorly executed join",
    )
)
declare(
    DeclaredCause(
        RootCauseCode.QUERY_CORRELATED_SUBQUERY,
        QUERY,
        FROM_PLANS,
        indicators=PLAN_INDICATORS,
        signals=QUERY_SIGNALS,
        words=("slow", "query", "latency", "response"),
        thresholds=("query_share",),
        knowledge="correlated subquery executed per row",
    )
)


@cause(
    FindingCode.INDEXES_TOO_MANY,
    INDEX,
    indicators=(ROWS_UPDATED, ROWS_INSERTED, WAL_BYTES),
    signals=(ROWS_UPDATED, ROWS_INSERTED, ROWS_DELETED),
    words=("index",),
    thresholds=("indexes_too_many", "indexed_writes_per_s", "workload_time_share"),
    knowledge="too many indexes on a write-heavy table",
    # Writes to the table carrying too many indexes (own work and own flushes: every index entry is WAL
    # the commit flushes).
    time=CauseTime(writes_to_objects),
)
def indexes_too_many(facts: Facts) -> Proposal | None:
    """Writes at indexed_writes_per_s to a table carrying the health check's count of indexes, or writes
    to such a table that took most of the active time (each row's index entries are CPU, I/O and WAL
    its commit flushes): the index count is the cost, whatever the rate."""
    w, levels = facts.window, facts.thresholds.diagnosis
    many = facts.thresholds.indexes_too_many  # the health check's count: one meaning of "too many"
    heavy = [
        t
        for t in w.tables
        if t.index_count >= many and t.writes / max(w.seconds, 1e-9) >= levels.indexed_writes_per_s
    ]
    indexed = {t.name: t for t in w.tables if t.index_count >= many}
    led = [
        (indexed[name], share)
        for name, share in write_shares(w)
        if name in indexed and share >= levels.workload_time_share
    ]
    if led and not any(rate_left_baseline(facts, m) for m in (ROWS_INSERTED, ROWS_UPDATED)):
        led = []
    if not heavy and not led:
        return None
    top, share = led[0] if led else (max(heavy, key=lambda t: t.writes), None)
    rate = top.writes / max(w.seconds, 1e-9)
    return Proposal(
        strength=max(
            min(top.index_count / many, rate / levels.indexed_writes_per_s),
            led_strength(share, levels) if share else 0.0,
        ),
        evidence={
            "table": top.name,
            "indexes": top.index_count,
            "writes_per_s": round(rate),
            **({"write_time_share": round(share, 2)} if share is not None else {}),
        },
        objects=[top.name],
    )


declare(
    DeclaredCause(
        FindingCode.INDEX_MISSING,
        INDEX,
        FROM_PLANS,
        indicators=PLAN_INDICATORS,
        signals=(BLOCKS_HIT, ROWS_RETURNED, ON_CPU),
        words=("index", "slow", "query"),
        thresholds=("query_share",),
        knowledge="selective lookups without an index",
        # A correlated subquery that scans a table per outer row: the index is the subquery's fix, not
        # a cause.
        yields_to=(
            YieldsTo(
                RootCauseCode.QUERY_CORRELATED_SUBQUERY,
                lambda kept, challenged, _f: set(kept.objects) & set(challenged.objects) != set(),
                Boundary.SAME_STATEMENTS,
            ),
        ),
    )
)
