"""Causes that name the work itself: many small inserts, a large insert, an update flood, mass
deletes, large fetches (the workload expert).

A rate threshold fits one machine and one shape (twenty clients committing a row each stay far below
a rows-per-second line that forty-row batches cross); where the window's sessions were sampled one by
one, a write workload is also a candidate when its statements take most of the active time and its
row rate left the baseline (`time_led`): the time the statements took does not depend on the shape.
"""

from __future__ import annotations

from dbcrew.operators.diagnose.attribution import CauseTime, statements_or, writes_of
from dbcrew.operators.diagnose.candidates import Facts, Proposal
from dbcrew.operators.diagnose.causes.declaration import Boundary, Expert, YieldsTo, cause
from dbcrew.operators.diagnose.causes.measures import (
    commit_bound,
    led_strength,
    lock_wait_share,
    same_tables,
    time_led,
    update_capacity,
    written_tables,
)
from dbcrew.operators.window.evidence import WindowEvidence
from dbcrew.operators.window.metrics import (
    ACTIVE,
    BLOCKS_HIT,
    COMMITS,
    ON_CPU,
    PG_CPU,
    RELATION_EXTENDS,
    RELATION_WRITES,
    ROW_RATES,
    ROWS_DELETED,
    ROWS_FETCHED,
    ROWS_INSERTED,
    ROWS_RETURNED,
    ROWS_UPDATED,
    WAL_BYTES,
    WAL_RECORDS,
    WAL_STATS,
)
from dbcrew.settings.diagnosis import DiagnosisThresholds
from dbcrew.vocabulary import FindingCode, RootCauseCode

WORKLOAD = Expert(
    "workload",
    "Workload expert: inserted/updated/deleted/fetched rows and commits per second -> workload_* causes.",
)


def _bulk_inserts(w: WindowEvidence, levels: DiagnosisThresholds) -> list[tuple[str, float]]:
    """The insert statements of large_statement_rows rows a call or more, with their rows per call."""
    inserts = [(s.query, s.rows_per_call) for s in w.statements if s.kind == "insert"]
    return [(q, r) for q, r in inserts if r >= levels.large_statement_rows]


@cause(
    RootCauseCode.WORKLOAD_MANY_INSERTS,
    WORKLOAD,
    indicators=(ROWS_INSERTED, COMMITS, WAL_BYTES, WAL_RECORDS),
    signals=(ROW_RATES, COMMITS, WAL_STATS, ACTIVE),
    words=("insert", "commit", "tps", "throughput", "write"),
    thresholds=(
        "insert_rows_per_s",
        "many_commits_per_s",
        "small_commit_rows",
        "large_statement_rows",
        "workload_time_share",
    ),
    knowledge="many small insert transactions",
    # The inserts' own work (on the CPU, their data I/O and buffer locks) and the flushes of their own
    # (autocommit) commits, sampled under their text; the lock waits they meet are the contention's. A
    # flush is thus both the writes' time and commit pressure's: the two are named together, the writes
    # first, where the commits are small (the flush is the price of committing often).
    time=CauseTime(writes_of("insert")),
    yields_to=(
        YieldsTo(
            RootCauseCode.SYNC_COMMIT_PRESSURE, commit_bound(ROWS_INSERTED), Boundary.SAME_COMMITS
        ),
        # Inserts into a table carrying too many indexes: the index maintenance makes them heavy.
        YieldsTo(FindingCode.INDEXES_TOO_MANY, same_tables, Boundary.SAME_STATEMENTS),
        # The same inserted rows: thousands of rows per commit are a large insert, not many small ones.
        YieldsTo(
            RootCauseCode.WORKLOAD_LARGE_INSERT,
            lambda _k, _c, facts: facts.per_commit(ROWS_INSERTED) > 1000,
            Boundary.SAME_STATEMENTS,
        ),
    ),
)
def many_inserts(facts: Facts) -> Proposal | None:
    """Inserts at a high rate in many small commits, or small inserts that took most of the active time."""
    w, levels = facts.window, facts.thresholds.diagnosis
    inserted, commits = w.mean(ROWS_INSERTED), w.mean(COMMITS)
    per_commit = facts.per_commit(ROWS_INSERTED)
    bulk = _bulk_inserts(w, levels)
    by_rate = inserted >= levels.insert_rows_per_s and commits >= levels.many_commits_per_s
    inserts_led = time_led(facts, ROWS_INSERTED, "insert")
    if not ((by_rate or (inserts_led and not bulk)) and per_commit <= levels.small_commit_rows):
        return None
    rate_strength = min(inserted / levels.insert_rows_per_s, commits / levels.many_commits_per_s)
    return Proposal(
        strength=max(rate_strength, led_strength(inserts_led, levels) if inserts_led else 0.0),
        evidence={
            "rows_inserted_per_s": round(inserted),
            "commits_per_s": round(commits),
            "rows_per_commit": round(per_commit, 1),
            **({"insert_time_share": round(inserts_led, 2)} if inserts_led is not None else {}),
        },
        objects=written_tables(w, lambda t: t.n_tup_ins),
    )


@cause(
    RootCauseCode.WORKLOAD_LARGE_INSERT,
    WORKLOAD,
    indicators=(ROWS_INSERTED, WAL_BYTES, RELATION_EXTENDS, RELATION_WRITES),
    signals=(ROW_RATES, WAL_STATS),
    words=("insert", "write"),
    thresholds=("insert_rows_per_s", "small_commit_rows", "large_statement_rows"),
    knowledge="bulk insertion of large data",
    # The own work of the bulk statements it quotes; of every insert and COPY when it quotes none.
    time=CauseTime(statements_or("insert", "copy")),
)
def large_insert(facts: Facts) -> Proposal | None:
    """Inserts at a high rate in statements of many rows, or commits of many rows."""
    w, levels = facts.window, facts.thresholds.diagnosis
    inserted = w.mean(ROWS_INSERTED)
    per_commit = facts.per_commit(ROWS_INSERTED)
    bulk = _bulk_inserts(w, levels)
    if not (
        inserted >= levels.insert_rows_per_s and (bulk or per_commit > levels.small_commit_rows)
    ):
        return None
    return Proposal(
        strength=inserted / levels.insert_rows_per_s,
        evidence={
            "rows_inserted_per_s": round(inserted),
            "rows_per_commit": round(per_commit),
            "bulk_statements": [{"query": q[:200], "rows_per_call": round(r)} for q, r in bulk[:3]],
            "wal_mb_per_s": round(w.mean(WAL_BYTES) / 2**20, 1),
        },
    )


def _update_cost(w: WindowEvidence) -> dict[str, object]:
    """What the update rate was judged against: the host's cores (and the server's use of them), or, remote, the sessions on the CPU."""
    if w.cpu_count:
        return {
            "cpu_cores": w.cpu_count,
            "rows_updated_per_s_per_core": round(w.mean(ROWS_UPDATED) / w.cpu_count),
            "postgres_cpu_cores_used": round(w.mean(PG_CPU), 2),
        }
    return {"sessions_on_cpu": round(w.mean(ON_CPU), 2)}


@cause(
    RootCauseCode.WORKLOAD_HIGH_UPDATES,
    WORKLOAD,
    indicators=(ROWS_UPDATED, COMMITS, WAL_BYTES, PG_CPU),
    signals=(ROW_RATES, COMMITS, WAL_STATS, ACTIVE),
    words=("update", "commit", "tps", "throughput", "write"),
    thresholds=(
        "update_rows_per_s_per_core",
        "remote_update_sessions_on_cpu",
        "workload_time_share",
    ),
    knowledge="highly concurrent updates",
    # The updates' (and merges') own work and their own commits' flushes.
    time=CauseTime(writes_of("update", "merge")),
    yields_to=(
        YieldsTo(
            RootCauseCode.SYNC_COMMIT_PRESSURE, commit_bound(ROWS_UPDATED), Boundary.SAME_COMMITS
        ),
        YieldsTo(
            RootCauseCode.LOCK_CONTENTION,
            lambda kept, challenged, _f: kept.strength >= 2 * challenged.strength,
            Boundary.TIME,
        ),
        # Updates of a table carrying too many indexes: the index maintenance makes them heavy.
        YieldsTo(FindingCode.INDEXES_TOO_MANY, same_tables, Boundary.SAME_STATEMENTS),
    ),
)
def high_updates(facts: Facts) -> Proposal | None:
    """More rows updated a second than the host's cores carry, or updates that took most of the active time."""
    w, levels = facts.window, facts.thresholds.diagnosis
    updated, capacity = w.mean(ROWS_UPDATED), update_capacity(w, levels)
    updates_led = time_led(facts, ROWS_UPDATED, "update", "merge")
    if not ((capacity and updated >= capacity) or updates_led):
        return None
    return Proposal(
        strength=max(
            updated / capacity if capacity else 0.0,
            led_strength(updates_led, levels) if updates_led else 0.0,
        ),
        evidence={
            "rows_updated_per_s": round(updated),
            "commits_per_s": round(w.mean(COMMITS)),
            **_update_cost(w),
            "lock_wait_share": round(lock_wait_share(w), 2),
            **({"update_time_share": round(updates_led, 2)} if updates_led is not None else {}),
        },
        objects=written_tables(w, lambda t: t.n_tup_upd),
    )


@cause(
    RootCauseCode.WORKLOAD_MANY_DELETES,
    WORKLOAD,
    indicators=(ROWS_DELETED, WAL_BYTES),
    signals=(ROW_RATES, WAL_STATS, ACTIVE),
    words=("delete", "write"),
    thresholds=("delete_rows_per_s", "workload_time_share"),
    knowledge="mass deletes",
    # The deletes' own work and their own commits' flushes.
    time=CauseTime(writes_of("delete")),
)
def many_deletes(facts: Facts) -> Proposal | None:
    """Rows deleted at a high rate, or deletes that took most of the active time."""
    w, levels = facts.window, facts.thresholds.diagnosis
    deleted = w.mean(ROWS_DELETED)
    deletes_led = time_led(facts, ROWS_DELETED, "delete")
    if not (deleted >= levels.delete_rows_per_s or deletes_led):
        return None
    tables = sorted(w.tables, key=lambda t: -t.n_tup_del)[:1]
    return Proposal(
        strength=max(
            deleted / levels.delete_rows_per_s,
            led_strength(deletes_led, levels) if deletes_led else 0.0,
        ),
        evidence={
            "rows_deleted_per_s": round(deleted),
            "dead_tuples": {t.name: int(t.n_dead_tup) for t in tables},
            **({"delete_time_share": round(deletes_led, 2)} if deletes_led is not None else {}),
        },
        objects=[t.name for t in tables],
    )


@cause(
    RootCauseCode.WORKLOAD_LARGE_FETCH,
    WORKLOAD,
    indicators=(ROWS_RETURNED, ROWS_FETCHED, BLOCKS_HIT),
    signals=(ROW_RATES,),
    words=("fetch", "throughput"),
    thresholds=("large_statement_rows", "fetch_rows_per_s"),
    knowledge="queries fetching large volumes of rows",
    # The own work of the fetching statements it quotes; of every select when it quotes none.
    time=CauseTime(statements_or("select")),
)
def large_fetch(facts: Facts) -> Proposal | None:
    """Selects of many rows a call, fetching more rows a second than fetch_rows_per_s."""
    w, levels = facts.window, facts.thresholds.diagnosis
    fetches = [
        s
        for s in w.statements
        if s.kind == "select" and s.rows_per_call >= levels.large_statement_rows
    ]
    fetched = sum(s.rows for s in fetches) / max(w.seconds, 1e-9)
    if not (fetches and fetched >= levels.fetch_rows_per_s):
        return None
    return Proposal(
        strength=fetched / levels.fetch_rows_per_s,
        evidence={
            "rows_fetched_per_s": round(fetched),
            "statements": [
                {
                    "query": s.query[:200],
                    "rows_per_call": round(s.rows_per_call),
                    "calls": s.calls,
                }
                for s in fetches[:3]
            ],
        },
    )
