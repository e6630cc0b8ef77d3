"""The experts: each judges the window's facts from its own angle and proposes candidate causes.

An expert is a pure function of `Facts` (window, baseline, abnormal metrics, statement plans, the
run's thresholds), so it is testable on its own and cheap to run. Its thresholds are absolute (what
saturation looks like on any server: sessions per core, waits per active session, rows per second;
`dbcrew.settings.diagnosis.DiagnosisThresholds`); the baseline then corroborates or weakens each candidate in
the cross review. Where the window's sessions were sampled one by one, a write workload is also a
candidate when its statements take most of the active time and its row rate left the baseline: a
rate threshold fits one machine and one shape (twenty clients committing a row each stay far below
a rows-per-second line that forty-row batches cross), the time the statements took does not.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from dbcrew.operators.diagnose.attribution import (
    commit_flush_share,
    kinds_share,
    lock_relations,
    work_share,
    write_shares,
)
from dbcrew.operators.diagnose.judgements import StatementPlan
from dbcrew.operators.window.anomaly import AbnormalMetric
from dbcrew.operators.window.evidence import TableDelta, WindowEvidence
from dbcrew.operators.window.readers import EXTENSION_WAITS, WAL_FLUSH_WAITS
from dbcrew.settings.diagnosis import DiagnosisThresholds
from dbcrew.settings.thresholds import Thresholds
from dbcrew.vocabulary import Cause, FindingCode, RootCauseCode


class Candidate(BaseModel):
    """A cause one expert proposes, with how far its evidence exceeds the threshold (strength >= 1)."""

    code: Cause
    expert: str
    strength: float
    evidence: dict[str, object] = Field(default_factory=dict)
    indicators: list[str] = Field(
        default_factory=list, description="metrics whose abnormality supports it"
    )
    objects: list[str] = Field(default_factory=list)

    @property
    def base_confidence(self) -> float:
        return min(0.9, 0.6 + 0.15 * math.log2(max(self.strength, 1.0)))


@dataclass
class Facts:
    window: WindowEvidence
    baseline: WindowEvidence | None
    abnormal: list[AbnormalMetric]
    plans: list[StatementPlan] = field(default_factory=list)
    thresholds: Thresholds = field(default_factory=Thresholds)  # the run's: what "too much" means

    @property
    def abnormal_names(self) -> set[str]:
        return {m.name for m in self.abnormal}

    def per_commit(self, metric: str) -> float:
        commits = self.window.mean("db.xact_commit")
        return self.window.mean(metric) / commits if commits else 0.0


def cpu_expert(facts: Facts) -> list[Candidate]:
    w, levels = facts.window, facts.thresholds.diagnosis
    if not w.cpu_count:
        return []  # host metrics exist only for a local target
    on_cpu = w.mean("act.on_cpu")
    busy = w.mean("host.cpu_busy")
    need = levels.cpu_sessions_per_core * w.cpu_count
    queued = on_cpu >= need and busy >= levels.cpu_host_busy
    saturated = (
        on_cpu >= levels.cpu_saturated_sessions_per_core * w.cpu_count
        and busy >= levels.cpu_saturated_busy
        and rate_left_baseline(facts, "act.on_cpu")
    )
    if queued or saturated:
        return [
            Candidate(
                code=RootCauseCode.CPU_CONTENTION,
                expert="cpu",
                strength=on_cpu / need
                if queued
                else on_cpu / (levels.cpu_saturated_sessions_per_core * w.cpu_count),
                evidence={
                    "runnable_sessions": round(on_cpu, 2),
                    "cpu_cores": w.cpu_count,
                    "host_cpu_busy_pct": round(busy, 1),
                    "postgres_cpu_cores_used": round(w.mean("pg.cpu_cores"), 2),
                    "load1": round(w.mean("host.load1"), 2),
                },
                indicators=["act.on_cpu", "host.cpu_busy", "host.load1", "pg.cpu_cores"],
            )
        ]
    return []


def memory_expert(facts: Facts) -> list[Candidate]:
    w, levels = facts.window, facts.thresholds.diagnosis
    if not w.memory_total_bytes:
        return []
    total_gb = w.memory_total_bytes / 2**30
    private = w.peak("pg.private_mem_gb")
    available = min(w.series.get("host.mem_available_gb") or [total_gb])
    swap = w.peak("host.swap_io_mb")
    strength = max(
        private / (levels.memory_private_share * total_gb),
        (levels.memory_available_share * total_gb) / max(available, 1e-3),
        swap / levels.swap_mb_per_s,
    )
    if strength < 1.0:
        return []
    return [
        Candidate(
            code=RootCauseCode.MEMORY_PRESSURE,
            expert="memory",
            strength=strength,
            evidence={
                "backend_private_memory_gb": round(private, 2),
                "memory_total_gb": round(total_gb, 1),
                "min_available_gb": round(available, 2),
                "swap_mb_per_s": round(swap, 2),
                "work_mem": w.settings.get("work_mem", ""),
                **_memory_holders(w, private),
            },
            indicators=["pg.private_mem_gb", "host.mem_available_gb", "host.swap_io_mb"],
        )
    ]


MEMORY_HOLDERS = 3  # statements quoted as holding the memory, at most


def _memory_holders(w: WindowEvidence, private_gb: float) -> dict[str, object]:
    """The statements whose sessions held at least half of the server's private memory (at most
    MEMORY_HOLDERS of them), as {"statements": [...]}; nothing where no few statements hold it (hundreds of
    sessions of as many statements, a remote target): the memory's time is then not seen in the sessions."""
    held, quoted = 0.0, []
    for key, gb in list(w.memory_by_statement.items())[:MEMORY_HOLDERS]:
        held += gb
        quoted.append({"query": w.statement_texts.get(key, key), "private_memory_gb": gb})
        if private_gb and held >= private_gb / 2:
            return {"statements": quoted}
    return {}


def _data_io_share(w: WindowEvidence) -> float:
    total = sum(w.waits.values())
    io = sum(n for k, n in w.waits.items() if k.startswith("IO:") and k not in WAL_FLUSH_WAITS)
    return io / total if total else 0.0


def io_expert(facts: Facts) -> list[Candidate]:
    w, levels = facts.window, facts.thresholds.diagnosis
    share = _data_io_share(w)
    io_time = sum(
        w.mean(f"io.{obj}.{kind}")
        for obj in ("relation", "temp_relation")
        for kind in ("read_time", "write_time")
    ) or w.mean("db.blk_read_time") + w.mean("db.blk_write_time")
    waiting = share * w.mean("act.active")
    iowait = w.mean("host.iowait")
    if (
        share >= levels.io_wait_share
        and waiting >= 1.0
        and (io_time >= levels.io_time_ms_per_s or iowait >= 10.0)
    ):
        return [
            Candidate(
                code=RootCauseCode.IO_CONTENTION,
                expert="io",
                strength=min(
                    share / levels.io_wait_share,
                    max(io_time / levels.io_time_ms_per_s, iowait / 10.0),
                ),
                evidence={
                    "io_wait_share": round(share, 2),
                    "sessions_waiting_on_io": round(waiting, 2),
                    "io_time_ms_per_s": round(io_time, 1),
                    "blocks_read_per_s": round(w.mean("db.blks_read"), 1),
                    "host_iowait_pct": round(iowait, 1),
                },
                indicators=[
                    "act.wait_io",
                    "io.relation.read_time",
                    "io.relation.reads",
                    "db.blks_read",
                    "db.blk_read_time",
                    "host.iowait",
                ],
            )
        ]
    return []


def update_capacity(w: WindowEvidence, levels: DiagnosisThresholds) -> float | None:
    """Rows updated per second the server's host carries before updates are a cause (see
    update_rows_per_s_per_core); None for a remote target whose sessions were not seen on the CPU."""
    if w.cpu_count:
        return levels.update_rows_per_s_per_core * w.cpu_count
    return (
        levels.update_rows_per_s_per_core
        if w.mean("act.on_cpu") >= levels.remote_update_sessions_on_cpu
        else None
    )


def _update_cost(w: WindowEvidence) -> dict[str, object]:
    """What the update rate was judged against: the host's cores (and the server's use of them), or, remote, the sessions on the CPU."""
    if w.cpu_count:
        return {
            "cpu_cores": w.cpu_count,
            "rows_updated_per_s_per_core": round(w.mean("db.tup_updated") / w.cpu_count),
            "postgres_cpu_cores_used": round(w.mean("pg.cpu_cores"), 2),
        }
    return {"sessions_on_cpu": round(w.mean("act.on_cpu"), 2)}


def _insert_statements(w: WindowEvidence) -> list[tuple[str, float]]:
    return [(s.query, s.rows_per_call) for s in w.statements if s.kind == "insert"]


def rate_left_baseline(facts: Facts, metric: str) -> bool:
    """Whether `metric` rose out of the baseline's range; with no baseline, whether the window kept at
    least one session active (nothing to compare: the time share alone must carry the cause)."""
    if facts.baseline is None:
        return facts.window.mean("act.active") >= 1.0
    return any(m.name == metric and m.direction == "up" for m in facts.abnormal)


def time_led(facts: Facts, metric: str, *kinds: str) -> float | None:
    """The share of the active time taken by statements of `kinds` when it reaches workload_time_share
    (a cause beside another may hold a third of the time, not most of it) and their row rate `metric`
    left the baseline (a healthy load's writes hold as much time as they always did); None otherwise
    or unmeasured."""
    share = kinds_share(facts.window, *kinds)
    if share is None or share < facts.thresholds.diagnosis.workload_time_share:
        return None
    return share if rate_left_baseline(facts, metric) else None


def _led_strength(share: float, levels: DiagnosisThresholds) -> float:
    return share / levels.workload_time_share


def _written_tables(w: WindowEvidence, kind_rows: Callable[[TableDelta], float]) -> list[str]:
    """The table the window wrote most rows of one kind to (`kind_rows`), as a cause's object."""
    return [t.name for t in sorted(w.tables, key=lambda t: -kind_rows(t))[:1] if kind_rows(t)]


def workload_expert(facts: Facts) -> list[Candidate]:
    w, levels = facts.window, facts.thresholds.diagnosis
    out = []
    inserted, commits = w.mean("db.tup_inserted"), w.mean("db.xact_commit")
    per_commit = facts.per_commit("db.tup_inserted")
    bulk = [(q, r) for q, r in _insert_statements(w) if r >= levels.large_statement_rows]
    by_rate = inserted >= levels.insert_rows_per_s and commits >= levels.many_commits_per_s
    inserts_led = time_led(facts, "db.tup_inserted", "insert")
    if (by_rate or (inserts_led and not bulk)) and per_commit <= levels.small_commit_rows:
        rate_strength = min(
            inserted / levels.insert_rows_per_s, commits / levels.many_commits_per_s
        )
        out.append(
            Candidate(
                code=RootCauseCode.WORKLOAD_MANY_INSERTS,
                expert="workload",
                strength=max(
                    rate_strength, _led_strength(inserts_led, levels) if inserts_led else 0.0
                ),
                evidence={
                    "rows_inserted_per_s": round(inserted),
                    "commits_per_s": round(commits),
                    "rows_per_commit": round(per_commit, 1),
                    **(
                        {"insert_time_share": round(inserts_led, 2)}
                        if inserts_led is not None
                        else {}
                    ),
                },
                objects=_written_tables(w, lambda t: t.n_tup_ins),
                indicators=[
                    "db.tup_inserted",
                    "db.xact_commit",
                    "wal.wal_bytes",
                    "wal.wal_records",
                ],
            )
        )
    if inserted >= levels.insert_rows_per_s and (bulk or per_commit > levels.small_commit_rows):
        out.append(
            Candidate(
                code=RootCauseCode.WORKLOAD_LARGE_INSERT,
                expert="workload",
                strength=inserted / levels.insert_rows_per_s,
                evidence={
                    "rows_inserted_per_s": round(inserted),
                    "rows_per_commit": round(per_commit),
                    "bulk_statements": [
                        {"query": q[:200], "rows_per_call": round(r)} for q, r in bulk[:3]
                    ],
                    "wal_mb_per_s": round(w.mean("wal.wal_bytes") / 2**20, 1),
                },
                indicators=[
                    "db.tup_inserted",
                    "wal.wal_bytes",
                    "io.relation.extends",
                    "io.relation.writes",
                ],
            )
        )
    updated, capacity = w.mean("db.tup_updated"), update_capacity(w, levels)
    updates_led = time_led(facts, "db.tup_updated", "update", "merge")
    if (capacity and updated >= capacity) or updates_led:
        out.append(
            Candidate(
                code=RootCauseCode.WORKLOAD_HIGH_UPDATES,
                expert="workload",
                strength=max(
                    updated / capacity if capacity else 0.0,
                    _led_strength(updates_led, levels) if updates_led else 0.0,
                ),
                evidence={
                    "rows_updated_per_s": round(updated),
                    "commits_per_s": round(commits),
                    **_update_cost(w),
                    "lock_wait_share": round(lock_wait_share(w), 2),
                    **(
                        {"update_time_share": round(updates_led, 2)}
                        if updates_led is not None
                        else {}
                    ),
                },
                indicators=["db.tup_updated", "db.xact_commit", "wal.wal_bytes", "pg.cpu_cores"],
                objects=_written_tables(w, lambda t: t.n_tup_upd),
            )
        )
    deleted = w.mean("db.tup_deleted")
    deletes_led = time_led(facts, "db.tup_deleted", "delete")
    if deleted >= levels.delete_rows_per_s or deletes_led:
        tables = sorted(w.tables, key=lambda t: -t.n_tup_del)[:1]
        out.append(
            Candidate(
                code=RootCauseCode.WORKLOAD_MANY_DELETES,
                expert="workload",
                strength=max(
                    deleted / levels.delete_rows_per_s,
                    _led_strength(deletes_led, levels) if deletes_led else 0.0,
                ),
                evidence={
                    "rows_deleted_per_s": round(deleted),
                    "dead_tuples": {t.name: int(t.n_dead_tup) for t in tables},
                    **(
                        {"delete_time_share": round(deletes_led, 2)}
                        if deletes_led is not None
                        else {}
                    ),
                },
                indicators=["db.tup_deleted", "wal.wal_bytes"],
                objects=[t.name for t in tables],
            )
        )
    fetches = [
        s
        for s in w.statements
        if s.kind == "select" and s.rows_per_call >= levels.large_statement_rows
    ]
    fetched = sum(s.rows for s in fetches) / max(w.seconds, 1e-9)
    if fetches and fetched >= levels.fetch_rows_per_s:
        out.append(
            Candidate(
                code=RootCauseCode.WORKLOAD_LARGE_FETCH,
                expert="workload",
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
                indicators=["db.tup_returned", "db.tup_fetched", "db.blks_hit"],
            )
        )
    return out


def _plan_candidates(facts: Facts, expert: str, codes: tuple[Cause, ...]) -> list[Candidate]:
    """One candidate per code from the heaviest statement's plan judgements (dbcrew/operators/diagnose/heavy_statements.py),
    as strong as the statement's share of the window's statement time: the statement, its plan node,
    the numbers (per call and the plan's), and what the judgement rests on."""
    levels = facts.thresholds.diagnosis
    out: dict[Cause, Candidate] = {}
    for plan in facts.plans:
        # The larger of its share of the statement time and of the work done (sampled sessions on the
        # CPU or reading): a queue of lock waiters inflates the first, not the second.
        work = work_share(facts.window, plan.query)
        share = max(plan.share, work or 0.0)
        if share < levels.query_share:
            continue
        for issue in (i for i in plan.issues if i.code in codes):
            found = out.get(issue.code)
            if found is None or found.strength < share / levels.query_share:
                out[issue.code] = Candidate(
                    code=issue.code,
                    expert=expert,
                    strength=share / levels.query_share,
                    evidence={
                        "queryid": plan.queryid,
                        "query": plan.query[:300],
                        "share_of_statement_time": round(plan.share, 2),
                        **({"share_of_work": round(work, 2)} if work is not None else {}),
                        "plan": issue.detail,
                        "plan_node": issue.node,
                        "numbers": issue.numbers,
                        "remarks": plan.remarks,
                    },
                    indicators=["act.on_cpu", "act.active", "db.tup_returned", "db.blks_hit"],
                    objects=issue.relations,
                )
    return list(out.values())


def query_expert(facts: Facts) -> list[Candidate]:
    return _plan_candidates(
        facts, "query", (RootCauseCode.QUERY_CORRELATED_SUBQUERY, RootCauseCode.QUERY_POOR_JOIN)
    )


def lock_wait_share(w: WindowEvidence) -> float:
    """Share of the active-session samples waiting for a lock another session holds: the relation-extension
    lock's waits (EXTENSION_WAITS) are the writers' own work, not contention."""
    return w.wait_share("Lock:") - w.wait_share(*EXTENSION_WAITS)


def locks_expert(facts: Facts) -> list[Candidate]:
    w, levels = facts.window, facts.thresholds.diagnosis
    share = lock_wait_share(w)
    waiting = w.mean("act.wait_lock")
    if share >= levels.lock_wait_share and (
        waiting >= levels.lock_wait_sessions
        or (
            waiting >= levels.lock_wait_sessions_beside_baseline
            and rate_left_baseline(facts, "act.wait_lock")
        )
    ):
        blockers = sorted(
            {(b.blocker_pid, b.blocker_state, round(b.blocker_xact_seconds, 1)) for b in w.blocked}
        )[:5]
        # The relations most of the lock waits were on (a quarter of them at least): the contention's objects.
        on = lock_relations(w)
        waited = sum(n for _, n in on)
        return [
            Candidate(
                code=RootCauseCode.LOCK_CONTENTION,
                expert="locks",
                strength=share / levels.lock_wait_share,
                evidence={
                    "lock_wait_share": round(share, 2),
                    "sessions_waiting_on_locks": round(waiting, 2),
                    "lock_waits": {
                        k: n
                        for k, n in w.waits.items()
                        if k.startswith("Lock:") and k not in EXTENSION_WAITS
                    },
                    "blockers": [{"pid": p, "state": s, "xact_seconds": x} for p, s, x in blockers],
                    "lock_wait_samples_by_relation": {r: n for r, n in on[:5] if r},
                },
                indicators=["act.wait_lock", "db.deadlocks", "act.idle_in_xact"],
                objects=[r for r, n in on if r and n >= 0.25 * waited][:3],
            )
        ]
    return []


def configuration_expert(facts: Facts) -> list[Candidate]:
    w, levels = facts.window, facts.thresholds.diagnosis
    share = w.wait_share(*WAL_FLUSH_WAITS)
    waiting = w.mean("act.wait_wal_flush")
    sync = w.settings.get("synchronous_commit", "on")
    flushes = w.wait_samples(*WAL_FLUSH_WAITS)
    held = flushes / max(flushes + w.flusher_idle_between, 1)
    # Or the commits of explicit transactions took a third of the active time with the commit rate out of
    # the baseline: clients starved of the CPU (or slow to send the next statement) idle between
    # transactions as long as committers that think, yet their database time is the flush.
    committing = commit_flush_share(w)
    led = (
        committing is not None
        and committing >= levels.workload_time_share
        and rate_left_baseline(facts, "db.xact_commit")
    )
    # Measured against the baseline, a lighter load than flush_wait_sessions tells (half of it: two
    # committers back to back waited 0.29 sessions on flushes, healthy loads at 40-1500 TPS 0.18 at most
    # and not out of their baseline).
    if (
        sync != "off"
        and share >= levels.flush_wait_share
        and (
            (held >= levels.flush_commit_bound and waiting >= levels.flush_wait_sessions)
            or (led and waiting >= levels.flush_wait_sessions / 2)
        )
    ):
        return [
            Candidate(
                code=RootCauseCode.SYNC_COMMIT_PRESSURE,
                expert="configuration",
                strength=share / levels.flush_wait_share,
                evidence={
                    "wal_flush_wait_share": round(share, 2),
                    "sessions_waiting_on_wal_flush": round(waiting, 2),
                    "flush_waiters_share_vs_idle_between": round(held, 2),
                    **(
                        {"commit_flush_share_of_active_time": round(committing, 2)}
                        if committing is not None
                        else {}
                    ),
                    "commits_per_s": round(w.mean("db.xact_commit")),
                    "wal_fsyncs_per_s": round(w.mean("io.wal.fsyncs"), 1),
                    "synchronous_commit": sync,
                    "commit_delay": w.settings.get("commit_delay", ""),
                },
                indicators=[
                    "act.wait_wal_flush",
                    "io.wal.fsyncs",
                    "db.xact_commit",
                    "io.wal.fsync_time",
                ],
            )
        ]
    return []


def vacuum_expert(facts: Facts) -> list[Candidate]:
    """A client's VACUUM competing with the workload, or dead row versions a heavy statement's scans
    read (its plan judged: dbcrew/operators/diagnose/judgements.py)."""
    w, levels = facts.window, facts.thresholds.diagnosis
    dead = _plan_candidates(facts, "vacuum", (FindingCode.DEAD_TUPLES_HIGH,))
    values = w.series.get("act.vacuum") or []
    presence = sum(1 for v in values if v > 0) / len(values) if values else 0.0
    scanned = max(w.mean("vacuum.heap_blks_scanned"), w.mean("vacuum.buffers"))
    if presence >= levels.vacuum_presence and scanned >= levels.vacuum_blocks_per_s:
        return [
            *dead,
            Candidate(
                code=RootCauseCode.VACUUM_INTERFERENCE,
                expert="vacuum",
                strength=min(
                    presence / levels.vacuum_presence, scanned / levels.vacuum_blocks_per_s
                ),
                evidence={
                    "vacuum_presence": round(presence, 2),
                    "vacuum_heap_blocks_per_s": round(scanned),
                    "running": [
                        q[:120] for q in w.running if q.lstrip().lower().startswith("vacuum")
                    ][:3],
                },
                indicators=[
                    "act.vacuum",
                    "vacuum.heap_blks_scanned",
                    "vacuum.buffers",
                    "db.blks_read",
                    "io.relation.reads",
                ],
            ),
        ]
    return dead


def index_expert(facts: Facts) -> list[Candidate]:
    w, levels = facts.window, facts.thresholds.diagnosis
    out = _plan_candidates(facts, "index", (FindingCode.INDEX_MISSING,))
    many = (
        facts.thresholds.indexes_too_many
    )  # the health check's count: one meaning of "too many indexes"
    heavy = [
        t
        for t in w.tables
        if t.index_count >= many and t.writes / max(w.seconds, 1e-9) >= levels.indexed_writes_per_s
    ]
    # Writes to a table carrying many indexes that took most of the active time (each row's index
    # entries are CPU, I/O and WAL its commit flushes): the index count is the cost, whatever the rate.
    indexed = {t.name: t for t in w.tables if t.index_count >= many}
    led = [
        (indexed[name], share)
        for name, share in write_shares(w)
        if name in indexed and share >= levels.workload_time_share
    ]
    if led and not any(rate_left_baseline(facts, m) for m in ("db.tup_inserted", "db.tup_updated")):
        led = []
    if not heavy and not led:
        return out
    top, share = led[0] if led else (max(heavy, key=lambda t: t.writes), None)
    rate = top.writes / max(w.seconds, 1e-9)
    return [
        *out,
        Candidate(
            code=FindingCode.INDEXES_TOO_MANY,
            expert="index",
            strength=max(
                min(top.index_count / many, rate / levels.indexed_writes_per_s),
                _led_strength(share, levels) if share else 0.0,
            ),
            evidence={
                "table": top.name,
                "indexes": top.index_count,
                "writes_per_s": round(rate),
                **({"write_time_share": round(share, 2)} if share is not None else {}),
            },
            indicators=["db.tup_updated", "db.tup_inserted", "wal.wal_bytes"],
            objects=[top.name],
        ),
    ]


Expert = Callable[[Facts], list[Candidate]]

EXPERTS: dict[str, Expert] = {
    "cpu": cpu_expert,
    "memory": memory_expert,
    "io": io_expert,
    "workload": workload_expert,
    "query": query_expert,
    "locks": locks_expert,
    "index": index_expert,
    "configuration": configuration_expert,
    "vacuum": vacuum_expert,
}

# Which metrics (prefixes) and alert words call each expert in: D-Bot's role assignment, as data.
EXPERT_SIGNALS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "cpu": (
        ("host.cpu_busy", "host.load1", "pg.cpu_cores", "act.on_cpu"),
        ("cpu", "load", "nodecpuhigh", "nodeloadhigh"),
    ),
    "memory": (
        ("host.mem_available", "host.swap", "pg.private_mem", "db.temp_bytes"),
        ("memory", "mem", "oom", "swap", "nodeoutofmem"),
    ),
    "io": (
        (
            "io.",
            "db.blks_read",
            "db.blk_read_time",
            "db.blk_write_time",
            "host.iowait",
            "act.wait_io",
        ),
        ("io", "disk", "iowait", "nodediskslow"),
    ),
    "workload": (
        ("db.tup_", "db.xact_commit", "wal.", "act.active"),
        ("insert", "update", "delete", "commit", "tps", "throughput", "write", "fetch"),
    ),
    "query": (
        ("db.tup_returned", "db.tup_fetched", "db.blks_hit", "act.on_cpu", "act.active"),
        ("slow", "query", "latency", "join", "response"),
    ),
    "locks": (
        ("act.wait_lock", "db.deadlocks", "act.idle_in_xact"),
        ("lock", "blocked", "deadlock", "wait"),
    ),
    "index": (
        (
            "db.tup_updated",
            "db.tup_inserted",
            "db.tup_deleted",
            "db.blks_hit",
            "db.tup_returned",
            "act.on_cpu",
        ),
        ("index", "slow", "query"),
    ),
    "configuration": (
        ("act.wait_wal_flush", "io.wal.", "checkpoint.", "db.temp_bytes"),
        ("config", "commit", "wal", "checkpoint", "setting"),
    ),
    # A client's VACUUM, or a heavy statement's scans of dead row versions (seen as its reads).
    "vacuum": (
        ("act.vacuum", "vacuum.", "db.tup_returned", "db.blks_hit", "db.blks_read"),
        ("vacuum", "bloat", "dead", "slow", "query"),
    ),
}


def select_experts(alert: str, abnormal: list[AbnormalMetric], have_baseline: bool) -> list[str]:
    """The team for this anomaly: experts named by the alert's words or by an abnormal metric.

    Without a baseline nothing can be called abnormal, so every expert is engaged.
    """
    if not have_baseline:
        return list(EXPERTS)
    words = {w.strip(".,:;()[]\"'").lower() for w in alert.split()}
    chosen = []
    for name, (prefixes, keywords) in EXPERT_SIGNALS.items():
        if words & set(keywords) or any(m.name.startswith(prefixes) for m in abnormal):
            chosen.append(name)
    return chosen
