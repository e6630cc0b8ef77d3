"""The experts: each judges the window's facts from its own angle and proposes candidate causes.

An expert is a pure function of `Facts` (window, baseline, abnormal metrics, statement plans), so
it is testable on its own and cheap to run. Thresholds are absolute (what saturation looks like
on any server: sessions per core, waits per active session, rows per second); the baseline then
corroborates or weakens each candidate in the cross review.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from dbcrew.vocabulary import Cause, FindingCode, RootCauseCode
from operators.diagnose.anomaly import AbnormalMetric
from operators.diagnose.evidence import WindowEvidence
from operators.diagnose.plan_issues import StatementPlan
from operators.diagnose.sampler import WAL_FLUSH_WAITS


class Candidate(BaseModel):
    """A cause one expert proposes, with how far its evidence exceeds the threshold (strength >= 1)."""

    code: Cause
    expert: str
    strength: float
    evidence: dict[str, object] = Field(default_factory=dict)
    indicators: list[str] = Field(default_factory=list, description="metrics whose abnormality supports it")
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

    @property
    def abnormal_names(self) -> set[str]:
        return {m.name for m in self.abnormal}

    def per_commit(self, metric: str) -> float:
        commits = self.window.mean("db.xact_commit")
        return self.window.mean(metric) / commits if commits else 0.0


# -- thresholds (what "too much" means whatever the baseline) ----------------------------------
CPU_SESSIONS_PER_CORE = 1.5      # runnable sessions per core: demand beyond supply
CPU_HOST_BUSY = 80.0             # % of host CPU busy
IO_WAIT_SHARE = 0.35             # share of active-session samples waiting on data-file I/O
IO_TIME_MS_PER_S = 200.0         # I/O time (read + write + extend) per second of wall time
MEMORY_PRIVATE_SHARE = 0.05      # backends' private memory as a share of RAM
MEMORY_AVAILABLE_SHARE = 0.10    # available memory below this share of RAM
SWAP_MB_PER_S = 1.0
INSERT_ROWS_PER_S = 20_000
MANY_COMMITS_PER_S = 200
SMALL_COMMIT_ROWS = 1_000
LARGE_STATEMENT_ROWS = 10_000
# A high update rate is a root cause when it is heavy for the machine serving it: rows updated per
# second per host core. A rate alone does not scale with the machine, and the server's CPU share (the
# test before) swings with who else gets the CPU: for the same healthy pgbench it read 0.39 of 2 cores
# on one day and 0.53-0.62 on another, and an update flood whose clients share the host got less of it
# the more its clients took (CI: a flood of single-row commits fell below the quarter of the cores the
# rule asked for). Measured on 2 cores: healthy pgbench keeping 1000 tps updates 2,900-3,100 rows/s
# (1,450-1,550 a core); update floods updated 20,000-55,000 rows/s (10,000-27,000 a core), single-row
# commits the slowest. The threshold sits near the geometric mean of 1,550 and 10,000.
UPDATE_ROWS_PER_S_PER_CORE = 4_000
# A remote target's cores are unknown: its rate is judged against one core, and the server must be
# seen paying for it, the sessions sampled on the CPU averaging at least this many (update floods
# 0.27-0.56, healthy pgbench at 1000 tps 0.14-0.26).
REMOTE_UPDATE_SESSIONS_ON_CPU = 0.25
DELETE_ROWS_PER_S = 2_000
FETCH_ROWS_PER_S = 20_000
LOCK_WAIT_SHARE = 0.40
FLUSH_WAIT_SHARE = 0.40
# Sessions waiting on WAL flushes on average (flush rate x flush latency, by Little's law). Measured
# on a 2-core machine: healthy pgbench loads (40 to 1500 TPS, synchronous commit) stayed at or below
# 0.18 with a flush share at or below 0.28; six clients of single-row commits ranged 0.44 to 3.3 at
# a share of 0.71 to 0.90, the level swinging with how the clients' process got the CPU.
FLUSH_WAIT_SESSIONS = 0.3
# ... and the flush must hold the clients back: over the sessions that waited on a flush in the window,
# of their samples waiting on either side, on a flush or idle between two transactions (on the client:
# its think time, a rate limit, its own work), the flush waits are at least this share. A load the
# server keeps up with pauses between its transactions longer than its commits wait, however slow each
# flush is (a ratio of times, so the same on a fast or a slow disk); clients held back by the flush
# commit again as soon as a commit returns. Time on the CPU and inside transactions counts for neither
# side, and neither do sessions that never waited on a flush: a concurrent load's idle sessions (a
# batch job with asynchronous commits, readers) are not the committers' think time (counted over all
# sessions, one batch-delete client beside two committers pulled the share from 0.76 to 0.54).
# Measured on 2 cores at load averages 5-11 (fsyncs 0.3-1.9 ms): back-to-back committers (pgbench
# scripts, 2-6 clients) 0.71-0.93; pgbench keeping its rate at 40, 300 and 600 tps 0.01-0.27, at
# 1000 tps 0.44-0.60; OLTP mixes with think time 0.03-0.36 per flushing session (0.11-0.14 over all
# sessions), though 0.76-0.88 of their active samples waited on flushes. pgbench asked for 1000 tps
# and getting 860-930 (0.5-0.8 s latency) read 0.75-0.85: an overloaded server whose clients commit
# back to back is held back by its flushes.
FLUSH_COMMIT_BOUND = 0.5
VACUUM_PRESENCE = 0.5            # share of samples with a vacuum running
VACUUM_BLOCKS_PER_S = 2_000      # heap blocks scanned (or buffers accessed) per second by vacuums
QUERY_SHARE = 0.10               # a statement must take this share of the window's statement time
TOO_MANY_INDEXES = 8
INDEXED_WRITES_PER_S = 1_000


def cpu_expert(facts: Facts) -> list[Candidate]:
    w = facts.window
    if not w.cpu_count:
        return []  # host metrics exist only for a local target
    on_cpu = w.mean("act.on_cpu")
    busy = w.mean("host.cpu_busy")
    need = CPU_SESSIONS_PER_CORE * w.cpu_count
    if on_cpu >= need and busy >= CPU_HOST_BUSY:
        return [Candidate(code=RootCauseCode.CPU_CONTENTION, expert="cpu", strength=on_cpu / need,
                          evidence={"runnable_sessions": round(on_cpu, 2), "cpu_cores": w.cpu_count, "host_cpu_busy_pct": round(busy, 1),
                                    "postgres_cpu_cores_used": round(w.mean("pg.cpu_cores"), 2), "load1": round(w.mean("host.load1"), 2)},
                          indicators=["act.on_cpu", "host.cpu_busy", "host.load1", "pg.cpu_cores"])]
    return []


def memory_expert(facts: Facts) -> list[Candidate]:
    w = facts.window
    if not w.memory_total_bytes:
        return []
    total_gb = w.memory_total_bytes / 2**30
    private = w.peak("pg.private_mem_gb")
    available = min(w.series.get("host.mem_available_gb") or [total_gb])
    swap = w.peak("host.swap_io_mb")
    strength = max(private / (MEMORY_PRIVATE_SHARE * total_gb), (MEMORY_AVAILABLE_SHARE * total_gb) / max(available, 1e-3),
                   swap / SWAP_MB_PER_S)
    if strength < 1.0:
        return []
    return [Candidate(code=RootCauseCode.MEMORY_PRESSURE, expert="memory", strength=strength,
                      evidence={"backend_private_memory_gb": round(private, 2), "memory_total_gb": round(total_gb, 1),
                                "min_available_gb": round(available, 2), "swap_mb_per_s": round(swap, 2),
                                "work_mem": w.settings.get("work_mem", "")},
                      indicators=["pg.private_mem_gb", "host.mem_available_gb", "host.swap_io_mb"])]


def _data_io_share(w: WindowEvidence) -> float:
    total = sum(w.waits.values())
    io = sum(n for k, n in w.waits.items() if k.startswith("IO:") and k not in WAL_FLUSH_WAITS)
    return io / total if total else 0.0


def io_expert(facts: Facts) -> list[Candidate]:
    w = facts.window
    share = _data_io_share(w)
    io_time = sum(w.mean(f"io.{obj}.{kind}") for obj in ("relation", "temp_relation") for kind in ("read_time", "write_time")) \
        or w.mean("db.blk_read_time") + w.mean("db.blk_write_time")
    waiting = share * w.mean("act.active")
    iowait = w.mean("host.iowait")
    if share >= IO_WAIT_SHARE and waiting >= 1.0 and (io_time >= IO_TIME_MS_PER_S or iowait >= 10.0):
        return [Candidate(code=RootCauseCode.IO_CONTENTION, expert="io", strength=min(share / IO_WAIT_SHARE, max(io_time / IO_TIME_MS_PER_S, iowait / 10.0)),
                          evidence={"io_wait_share": round(share, 2), "sessions_waiting_on_io": round(waiting, 2),
                                    "io_time_ms_per_s": round(io_time, 1), "blocks_read_per_s": round(w.mean("db.blks_read"), 1),
                                    "host_iowait_pct": round(iowait, 1)},
                          indicators=["act.wait_io", "io.relation.read_time", "io.relation.reads", "db.blks_read", "db.blk_read_time", "host.iowait"])]
    return []


def update_capacity(w: WindowEvidence) -> float | None:
    """Rows updated per second the server's host carries before updates are a cause (see
    UPDATE_ROWS_PER_S_PER_CORE); None for a remote target whose sessions were not seen on the CPU."""
    if w.cpu_count:
        return UPDATE_ROWS_PER_S_PER_CORE * w.cpu_count
    return UPDATE_ROWS_PER_S_PER_CORE if w.mean("act.on_cpu") >= REMOTE_UPDATE_SESSIONS_ON_CPU else None


def _update_cost(w: WindowEvidence) -> dict[str, object]:
    """What the update rate was judged against: the host's cores (and the server's use of them), or, remote, the sessions on the CPU."""
    if w.cpu_count:
        return {"cpu_cores": w.cpu_count, "rows_updated_per_s_per_core": round(w.mean("db.tup_updated") / w.cpu_count),
                "postgres_cpu_cores_used": round(w.mean("pg.cpu_cores"), 2)}
    return {"sessions_on_cpu": round(w.mean("act.on_cpu"), 2)}


def _insert_statements(w: WindowEvidence) -> list[tuple[str, float]]:
    return [(s.query, s.rows_per_call) for s in w.statements if s.kind == "insert"]


def workload_expert(facts: Facts) -> list[Candidate]:
    w = facts.window
    out = []
    inserted, commits = w.mean("db.tup_inserted"), w.mean("db.xact_commit")
    per_commit = facts.per_commit("db.tup_inserted")
    bulk = [(q, r) for q, r in _insert_statements(w) if r >= LARGE_STATEMENT_ROWS]
    if inserted >= INSERT_ROWS_PER_S and commits >= MANY_COMMITS_PER_S and per_commit <= SMALL_COMMIT_ROWS:
        out.append(Candidate(code=RootCauseCode.WORKLOAD_MANY_INSERTS, expert="workload",
                             strength=min(inserted / INSERT_ROWS_PER_S, commits / MANY_COMMITS_PER_S),
                             evidence={"rows_inserted_per_s": round(inserted), "commits_per_s": round(commits), "rows_per_commit": round(per_commit, 1)},
                             indicators=["db.tup_inserted", "db.xact_commit", "wal.wal_bytes", "wal.wal_records"]))
    if inserted >= INSERT_ROWS_PER_S and (bulk or per_commit > SMALL_COMMIT_ROWS):
        out.append(Candidate(code=RootCauseCode.WORKLOAD_LARGE_INSERT, expert="workload", strength=inserted / INSERT_ROWS_PER_S,
                             evidence={"rows_inserted_per_s": round(inserted), "rows_per_commit": round(per_commit),
                                       "bulk_statements": [{"query": q[:200], "rows_per_call": round(r)} for q, r in bulk[:3]],
                                       "wal_mb_per_s": round(w.mean("wal.wal_bytes") / 2**20, 1)},
                             indicators=["db.tup_inserted", "wal.wal_bytes", "io.relation.extends", "io.relation.writes"]))
    updated, capacity = w.mean("db.tup_updated"), update_capacity(w)
    if capacity and updated >= capacity:
        out.append(Candidate(code=RootCauseCode.WORKLOAD_HIGH_UPDATES, expert="workload", strength=updated / capacity,
                             evidence={"rows_updated_per_s": round(updated), "commits_per_s": round(commits),
                                       **_update_cost(w), "lock_wait_share": round(w.wait_share("Lock:"), 2)},
                             indicators=["db.tup_updated", "db.xact_commit", "wal.wal_bytes", "pg.cpu_cores"],
                             objects=[t.name for t in sorted(w.tables, key=lambda t: -t.n_tup_upd)[:1] if t.n_tup_upd]))
    deleted = w.mean("db.tup_deleted")
    if deleted >= DELETE_ROWS_PER_S:
        tables = sorted(w.tables, key=lambda t: -t.n_tup_del)[:1]
        out.append(Candidate(code=RootCauseCode.WORKLOAD_MANY_DELETES, expert="workload", strength=deleted / DELETE_ROWS_PER_S,
                             evidence={"rows_deleted_per_s": round(deleted),
                                       "dead_tuples": {t.name: int(t.n_dead_tup) for t in tables}},
                             indicators=["db.tup_deleted", "wal.wal_bytes"], objects=[t.name for t in tables]))
    fetches = [s for s in w.statements if s.kind == "select" and s.rows_per_call >= LARGE_STATEMENT_ROWS]
    fetched = sum(s.rows for s in fetches) / max(w.seconds, 1e-9)
    if fetches and fetched >= FETCH_ROWS_PER_S:
        out.append(Candidate(code=RootCauseCode.WORKLOAD_LARGE_FETCH, expert="workload", strength=fetched / FETCH_ROWS_PER_S,
                             evidence={"rows_fetched_per_s": round(fetched),
                                       "statements": [{"query": s.query[:200], "rows_per_call": round(s.rows_per_call), "calls": s.calls} for s in fetches[:3]]},
                             indicators=["db.tup_returned", "db.tup_fetched", "db.blks_hit"]))
    return out


def _plan_candidates(facts: Facts, expert: str, codes: tuple[Cause, ...]) -> list[Candidate]:
    out: dict[Cause, Candidate] = {}
    for plan in facts.plans:
        if plan.share < QUERY_SHARE:
            continue
        for issue in (i for i in plan.issues if i.code in codes):
            found = out.get(issue.code)
            if found is None or found.strength < plan.share / QUERY_SHARE:
                out[issue.code] = Candidate(code=issue.code, expert=expert, strength=plan.share / QUERY_SHARE,
                                            evidence={"query": plan.query[:300], "share_of_statement_time": round(plan.share, 2),
                                                      "plan": issue.detail},
                                            indicators=["act.on_cpu", "act.active", "db.tup_returned", "db.blks_hit"],
                                            objects=issue.relations)
    return list(out.values())


def query_expert(facts: Facts) -> list[Candidate]:
    return _plan_candidates(facts, "query", (RootCauseCode.QUERY_CORRELATED_SUBQUERY, RootCauseCode.QUERY_POOR_JOIN))


def locks_expert(facts: Facts) -> list[Candidate]:
    w = facts.window
    share = w.wait_share("Lock:")
    waiting = w.mean("act.wait_lock")
    if share >= LOCK_WAIT_SHARE and waiting >= 1.0:
        blockers = sorted({(b.blocker_pid, b.blocker_state, round(b.blocker_xact_seconds, 1)) for b in w.blocked})[:5]
        return [Candidate(code=RootCauseCode.LOCK_CONTENTION, expert="locks", strength=share / LOCK_WAIT_SHARE,
                          evidence={"lock_wait_share": round(share, 2), "sessions_waiting_on_locks": round(waiting, 2),
                                    "lock_waits": {k: n for k, n in w.waits.items() if k.startswith("Lock:")},
                                    "blockers": [{"pid": p, "state": s, "xact_seconds": x} for p, s, x in blockers]},
                          indicators=["act.wait_lock", "db.deadlocks", "act.idle_in_xact"])]
    return []


def configuration_expert(facts: Facts) -> list[Candidate]:
    w = facts.window
    share = w.wait_share(*WAL_FLUSH_WAITS)
    waiting = w.mean("act.wait_wal_flush")
    sync = w.settings.get("synchronous_commit", "on")
    flushes = w.wait_samples(*WAL_FLUSH_WAITS)
    held = flushes / max(flushes + w.flusher_idle_between, 1)
    if sync != "off" and share >= FLUSH_WAIT_SHARE and waiting >= FLUSH_WAIT_SESSIONS and held >= FLUSH_COMMIT_BOUND:
        return [Candidate(code=RootCauseCode.SYNC_COMMIT_PRESSURE, expert="configuration", strength=share / FLUSH_WAIT_SHARE,
                          evidence={"wal_flush_wait_share": round(share, 2), "sessions_waiting_on_wal_flush": round(waiting, 2),
                                    "flush_waiters_share_vs_idle_between": round(held, 2),
                                    "commits_per_s": round(w.mean("db.xact_commit")), "wal_fsyncs_per_s": round(w.mean("io.wal.fsyncs"), 1),
                                    "synchronous_commit": sync, "commit_delay": w.settings.get("commit_delay", "")},
                          indicators=["act.wait_wal_flush", "io.wal.fsyncs", "db.xact_commit", "io.wal.fsync_time"])]
    return []


def vacuum_expert(facts: Facts) -> list[Candidate]:
    w = facts.window
    values = w.series.get("act.vacuum") or []
    presence = sum(1 for v in values if v > 0) / len(values) if values else 0.0
    scanned = max(w.mean("vacuum.heap_blks_scanned"), w.mean("vacuum.buffers"))
    if presence >= VACUUM_PRESENCE and scanned >= VACUUM_BLOCKS_PER_S:
        return [Candidate(code=RootCauseCode.VACUUM_INTERFERENCE, expert="vacuum", strength=min(presence / VACUUM_PRESENCE, scanned / VACUUM_BLOCKS_PER_S),
                          evidence={"vacuum_presence": round(presence, 2), "vacuum_heap_blocks_per_s": round(scanned),
                                    "running": [q[:120] for q in w.running if q.lstrip().lower().startswith("vacuum")][:3]},
                          indicators=["act.vacuum", "vacuum.heap_blks_scanned", "vacuum.buffers", "db.blks_read", "io.relation.reads"])]
    return []


def index_expert(facts: Facts) -> list[Candidate]:
    w = facts.window
    out = _plan_candidates(facts, "index", (FindingCode.INDEX_MISSING,))
    heavy = [t for t in w.tables if t.index_count >= TOO_MANY_INDEXES and t.writes / max(w.seconds, 1e-9) >= INDEXED_WRITES_PER_S]
    if not heavy:
        return out
    top = max(heavy, key=lambda t: t.writes)
    rate = top.writes / max(w.seconds, 1e-9)
    return [*out, Candidate(code=FindingCode.INDEXES_TOO_MANY, expert="index", strength=min(top.index_count / TOO_MANY_INDEXES, rate / INDEXED_WRITES_PER_S),
                      evidence={"table": top.name, "indexes": top.index_count, "writes_per_s": round(rate)},
                      indicators=["db.tup_updated", "db.tup_inserted", "wal.wal_bytes"], objects=[top.name])]


Expert = Callable[[Facts], list[Candidate]]

EXPERTS: dict[str, Expert] = {
    "cpu": cpu_expert, "memory": memory_expert, "io": io_expert, "workload": workload_expert, "query": query_expert,
    "locks": locks_expert, "index": index_expert, "configuration": configuration_expert, "vacuum": vacuum_expert,
}

# Which metrics (prefixes) and alert words call each expert in: D-Bot's role assignment, as data.
EXPERT_SIGNALS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "cpu": (("host.cpu_busy", "host.load1", "pg.cpu_cores", "act.on_cpu"), ("cpu", "load", "nodecpuhigh", "nodeloadhigh")),
    "memory": (("host.mem_available", "host.swap", "pg.private_mem", "db.temp_bytes"), ("memory", "mem", "oom", "swap", "nodeoutofmem")),
    "io": (("io.", "db.blks_read", "db.blk_read_time", "db.blk_write_time", "host.iowait", "act.wait_io"), ("io", "disk", "iowait", "nodediskslow")),
    "workload": (("db.tup_", "db.xact_commit", "wal.", "act.active"), ("insert", "update", "delete", "commit", "tps", "throughput", "write", "fetch")),
    "query": (("db.tup_returned", "db.tup_fetched", "db.blks_hit", "act.on_cpu", "act.active"), ("slow", "query", "latency", "join", "response")),
    "locks": (("act.wait_lock", "db.deadlocks", "act.idle_in_xact"), ("lock", "blocked", "deadlock", "wait")),
    "index": (("db.tup_updated", "db.tup_inserted", "db.tup_deleted", "db.blks_hit", "db.tup_returned", "act.on_cpu"), ("index", "slow", "query")),
    "configuration": (("act.wait_wal_flush", "io.wal.", "checkpoint.", "db.temp_bytes"), ("config", "commit", "wal", "checkpoint", "setting")),
    "vacuum": (("act.vacuum", "vacuum."), ("vacuum", "bloat", "dead")),
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
