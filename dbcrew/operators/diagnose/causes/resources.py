"""Causes that name a saturated resource of the host: the CPU, memory, the disks.

Their thresholds are absolute (what saturation looks like on any server: sessions per core, waits per
active session); the baseline then corroborates or weakens each candidate in the cross review. Host
metrics exist only for a local target, so the CPU and memory experts stand down on a remote one.
"""

from __future__ import annotations

from dbcrew.operators.diagnose.attribution import CauseTime, data_file_io
from dbcrew.operators.diagnose.candidates import Facts, Proposal
from dbcrew.operators.diagnose.causes.declaration import Expert, cause
from dbcrew.operators.diagnose.causes.measures import rate_left_baseline
from dbcrew.operators.window.evidence import WindowEvidence
from dbcrew.operators.window.metrics import (
    ACTIVE,
    BLOCK_READ_TIME,
    BLOCK_WRITE_TIME,
    BLOCKS_READ,
    HOST_CPU_BUSY,
    HOST_IOWAIT,
    HOST_LOAD1,
    HOST_MEMORY_AVAILABLE,
    HOST_SWAP_IO,
    IO_RATES,
    IO_STATS,
    MEMORY_AVAILABLE,
    ON_CPU,
    PG_CPU,
    PG_PRIVATE_MEMORY,
    PRIVATE_MEMORY,
    RELATION_READ_TIME,
    RELATION_READS,
    SWAP,
    TEMP_BYTES,
    WAIT_IO,
)
from dbcrew.operators.window.readers import WAL_FLUSH_WAITS
from dbcrew.vocabulary import RootCauseCode

CPU = Expert(
    "cpu",
    "CPU expert: runnable sessions per core, host CPU busy, postgres CPU use -> cpu_contention.",
)
MEMORY = Expert(
    "memory",
    "Memory expert: backends' private memory, available memory, swap -> memory_pressure.",
)
IO = Expert(
    "io", "I/O expert: data-file I/O waits and I/O time (pg_stat_io), iowait -> io_contention."
)


@cause(
    RootCauseCode.CPU_CONTENTION,
    CPU,
    indicators=(ON_CPU, HOST_CPU_BUSY, HOST_LOAD1, PG_CPU),
    signals=(HOST_CPU_BUSY, HOST_LOAD1, PG_CPU, ON_CPU),
    words=("cpu", "load", "nodecpuhigh", "nodeloadhigh"),
    thresholds=(
        "cpu_sessions_per_core",
        "cpu_host_busy",
        "cpu_saturated_sessions_per_core",
        "cpu_saturated_busy",
    ),
    knowledge="CPU saturation",
    # The CPU samples no other candidate explains: CPU time spent by statements another cause claims
    # is that cause's symptom (two sessions sorting in gigabytes of memory fill two cores).
    time=CauseTime(cpu_remainder=True),
    resource=True,
)
def cpu_contention(facts: Facts) -> Proposal | None:
    """More runnable sessions than the cores carry with the host busy, or the CPU saturated with the
    sessions on it out of the baseline."""
    w, levels = facts.window, facts.thresholds.diagnosis
    if not w.cpu_count:
        return None  # host metrics exist only for a local target
    on_cpu = w.mean(ON_CPU)
    busy = w.mean(HOST_CPU_BUSY)
    need = levels.cpu_sessions_per_core * w.cpu_count
    queued = on_cpu >= need and busy >= levels.cpu_host_busy
    saturated = (
        on_cpu >= levels.cpu_saturated_sessions_per_core * w.cpu_count
        and busy >= levels.cpu_saturated_busy
        and rate_left_baseline(facts, ON_CPU)
    )
    if not (queued or saturated):
        return None
    return Proposal(
        strength=on_cpu / need
        if queued
        else on_cpu / (levels.cpu_saturated_sessions_per_core * w.cpu_count),
        evidence={
            "runnable_sessions": round(on_cpu, 2),
            "cpu_cores": w.cpu_count,
            "host_cpu_busy_pct": round(busy, 1),
            "postgres_cpu_cores_used": round(w.mean(PG_CPU), 2),
            "load1": round(w.mean(HOST_LOAD1), 2),
        },
    )


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


@cause(
    RootCauseCode.MEMORY_PRESSURE,
    MEMORY,
    indicators=(PG_PRIVATE_MEMORY, HOST_MEMORY_AVAILABLE, HOST_SWAP_IO),
    signals=(MEMORY_AVAILABLE, SWAP, PRIVATE_MEMORY, TEMP_BYTES),
    words=("memory", "mem", "oom", "swap", "nodeoutofmem"),
    thresholds=("memory_private_share", "memory_available_share", "swap_mb_per_s"),
    knowledge="memory exhausted by backends",
    # The own work of the statements whose sessions held the memory (not measured where it quotes none).
    resource=True,
)
def memory_pressure(facts: Facts) -> Proposal | None:
    """Backends' private memory, the host's available memory or swapping past their levels."""
    w, levels = facts.window, facts.thresholds.diagnosis
    if not w.memory_total_bytes:
        return None
    total_gb = w.memory_total_bytes / 2**30
    private = w.peak(PG_PRIVATE_MEMORY)
    available = min(w.series.get(HOST_MEMORY_AVAILABLE.name) or [total_gb])
    swap = w.peak(HOST_SWAP_IO)
    strength = max(
        private / (levels.memory_private_share * total_gb),
        (levels.memory_available_share * total_gb) / max(available, 1e-3),
        swap / levels.swap_mb_per_s,
    )
    if strength < 1.0:
        return None
    return Proposal(
        strength=strength,
        evidence={
            "backend_private_memory_gb": round(private, 2),
            "memory_total_gb": round(total_gb, 1),
            "min_available_gb": round(available, 2),
            "swap_mb_per_s": round(swap, 2),
            "work_mem": w.settings.get("work_mem", ""),
            **_memory_holders(w, private),
        },
    )


def _data_io_share(w: WindowEvidence) -> float:
    total = sum(w.waits.values())
    io = sum(n for k, n in w.waits.items() if k.startswith("IO:") and k not in WAL_FLUSH_WAITS)
    return io / total if total else 0.0


@cause(
    RootCauseCode.IO_CONTENTION,
    IO,
    indicators=(
        WAIT_IO,
        RELATION_READ_TIME,
        RELATION_READS,
        BLOCKS_READ,
        BLOCK_READ_TIME,
        HOST_IOWAIT,
    ),
    signals=(
        IO_STATS,
        BLOCKS_READ,
        BLOCK_READ_TIME,
        BLOCK_WRITE_TIME,
        HOST_IOWAIT,
        WAIT_IO,
    ),
    words=("io", "disk", "iowait", "nodediskslow"),
    thresholds=("io_wait_share", "io_time_ms_per_s"),
    knowledge="I/O saturation",
    # Waiting for data-file I/O (IO:* but the WAL flush).
    time=CauseTime(data_file_io),
    resource=True,
)
def io_contention(facts: Facts) -> Proposal | None:
    """Data-file I/O waits holding a share of the active sessions, with the I/O time or the host's
    iowait high."""
    w, levels = facts.window, facts.thresholds.diagnosis
    share = _data_io_share(w)
    io_time = sum(
        w.mean(IO_RATES[obj, kind])
        for obj in ("relation", "temp_relation")
        for kind in ("read_time", "write_time")
    ) or w.mean(BLOCK_READ_TIME) + w.mean(BLOCK_WRITE_TIME)
    waiting = share * w.mean(ACTIVE)
    iowait = w.mean(HOST_IOWAIT)
    if not (
        share >= levels.io_wait_share
        and waiting >= 1.0
        and (io_time >= levels.io_time_ms_per_s or iowait >= 10.0)
    ):
        return None
    return Proposal(
        strength=min(
            share / levels.io_wait_share,
            max(io_time / levels.io_time_ms_per_s, iowait / 10.0),
        ),
        evidence={
            "io_wait_share": round(share, 2),
            "sessions_waiting_on_io": round(waiting, 2),
            "io_time_ms_per_s": round(io_time, 1),
            "blocks_read_per_s": round(w.mean(BLOCKS_READ), 1),
            "host_iowait_pct": round(iowait, 1),
        },
    )
