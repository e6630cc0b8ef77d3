"""Causes of the table's upkeep: a client's VACUUM competing with the workload, and dead row versions a
heavy statement's scans read (the vacuum expert)."""

from __future__ import annotations

from dbcrew.operators.diagnose.attribution import CauseTime, client_vacuum
from dbcrew.operators.diagnose.candidates import Facts, Proposal
from dbcrew.operators.diagnose.causes.declaration import (
    FROM_PLANS,
    DeclaredCause,
    Expert,
    cause,
    declare,
)
from dbcrew.operators.window.metrics import (
    ACTIVE,
    BLOCKS_HIT,
    BLOCKS_READ,
    ON_CPU,
    RELATION_READS,
    ROWS_RETURNED,
    VACUUM_BUFFERS,
    VACUUM_SCANNED,
    VACUUM_SESSIONS,
    VACUUM_WORK,
)
from dbcrew.vocabulary import FindingCode, RootCauseCode

VACUUM = Expert(
    "vacuum",
    "Vacuum expert: vacuums running and the heap blocks they scan -> vacuum_interference; heavy statements scanning tables of more dead row versions than live ones -> dead_tuples_high.",
)


@cause(
    RootCauseCode.VACUUM_INTERFERENCE,
    VACUUM,
    indicators=(
        VACUUM_SESSIONS,
        VACUUM_SCANNED,
        VACUUM_BUFFERS,
        BLOCKS_READ,
        RELATION_READS,
    ),
    signals=(VACUUM_SESSIONS, VACUUM_WORK),
    words=("vacuum", "bloat"),
    thresholds=("vacuum_presence", "vacuum_blocks_per_s"),
    knowledge="vacuum competing with the workload",
    # VACUUM run by a client; autovacuum's time is not sampled as the workload's, and a client VACUUM
    # never seen running is not measured.
    time=CauseTime(client_vacuum, unseen_unmeasured=True),
)
def vacuum_interference(facts: Facts) -> Proposal | None:
    """A VACUUM present in vacuum_presence of the samples, scanning vacuum_blocks_per_s heap blocks."""
    w, levels = facts.window, facts.thresholds.diagnosis
    values = w.series.get(VACUUM_SESSIONS.name) or []
    presence = sum(1 for v in values if v > 0) / len(values) if values else 0.0
    scanned = max(w.mean(VACUUM_SCANNED), w.mean(VACUUM_BUFFERS))
    if not (presence >= levels.vacuum_presence and scanned >= levels.vacuum_blocks_per_s):
        return None
    return Proposal(
        strength=min(presence / levels.vacuum_presence, scanned / levels.vacuum_blocks_per_s),
        evidence={
            "vacuum_presence": round(presence, 2),
            "vacuum_heap_blocks_per_s": round(scanned),
            "running": [q[:120] for q in w.running if q.lstrip().lower().startswith("vacuum")][:3],
        },
    )


declare(
    DeclaredCause(
        FindingCode.DEAD_TUPLES_HIGH,
        VACUUM,
        FROM_PLANS,
        indicators=(ON_CPU, ACTIVE, ROWS_RETURNED, BLOCKS_HIT),
        # A heavy statement's scans of dead row versions, seen as its reads.
        signals=(ROWS_RETURNED, BLOCKS_HIT, BLOCKS_READ),
        words=("dead", "bloat", "slow", "query"),
        thresholds=("query_share",),
        knowledge="scans reading more dead row versions than live ones",
    )
)
