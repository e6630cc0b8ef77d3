"""The diagnosis experts' levels (`DiagnosisThresholds`), nested in a run's `Thresholds` as `diagnosis`.

Why each default is where it is, with what was measured: docs/diagnose.md, "Why these levels".
"""

from __future__ import annotations

from pydantic import Field

from dbcrew.settings.bounds import Bounds


class DiagnosisThresholds(Bounds):
    """What "too much" means to the diagnosis experts whatever the baseline (dbcrew/operators/diagnose/experts.py):
    absolute levels of saturation on any server (sessions per core, waits per active session, rows per
    second); the baseline then corroborates or weakens each candidate cause in the cross review."""

    cpu_sessions_per_core: float = Field(
        1.5, description="runnable sessions per host core: demand beyond supply (cpu_contention)"
    )
    cpu_host_busy: float = Field(
        80.0, description="% of the host's CPU busy, with the sessions above (cpu_contention)"
    )
    # Saturation without a queue: a session on every core, the host all but fully busy (docs/diagnose.md, why these levels).
    cpu_saturated_sessions_per_core: float = Field(
        0.9,
        description="sessions on the CPU per host core that, with the host cpu_saturated_busy and the"
        " sessions on the CPU out of the baseline, saturate it (cpu_contention)",
    )
    cpu_saturated_busy: float = Field(
        95.0, description="% of the host's CPU busy for saturation without a queue (cpu_contention)"
    )
    io_wait_share: float = Field(
        0.35, description="share of active-session samples waiting on data-file I/O (io_contention)"
    )
    io_time_ms_per_s: float = Field(
        200.0,
        description="I/O time (read + write + extend) per second of wall time (io_contention)",
    )
    memory_private_share: float = Field(
        0.05, description="backends' private memory as a share of RAM (memory_pressure)"
    )
    memory_available_share: float = Field(
        0.10, description="available memory below this share of RAM (memory_pressure)"
    )
    swap_mb_per_s: float = Field(
        1.0, description="MB swapped in or out per second (memory_pressure)"
    )
    insert_rows_per_s: int = Field(
        20_000,
        description="rows inserted per second (workload_many_inserts, workload_large_insert)",
    )
    many_commits_per_s: int = Field(
        200, description="commits per second of many small inserts (workload_many_inserts)"
    )
    small_commit_rows: int = Field(
        1_000, description="rows per commit of a small transaction; more: a large insert"
    )
    workload_time_share: float = Field(
        0.3,
        description="share of the active session time a write workload's statements take to be a"
        " cause when their row rate left the baseline, whatever the rate (workload_many_inserts,"
        " workload_high_updates, workload_many_deletes, indexes_too_many)",
    )
    batch_commit_rows: int = Field(
        20,
        description="rows per commit from which a write workload's WAL flushes are its WAL volume,"
        " not the price of committing often (sync_commit_pressure then not named beside it)",
    )
    large_statement_rows: int = Field(
        10_000, description="rows per call of one bulk statement (a large insert or fetch)"
    )
    # An update rate is a cause when it is heavy for the machine serving it: per host core (docs/diagnose.md, why these levels).
    update_rows_per_s_per_core: int = Field(
        4_000, description="rows updated per second per host core (workload_high_updates)"
    )
    # A remote target's cores are unknown: one core, and the server seen paying for it (docs/diagnose.md, why these levels).
    remote_update_sessions_on_cpu: float = Field(
        0.25,
        description="a remote target's updates are judged against one core"
        " when its sessions on the CPU average at least this many",
    )
    delete_rows_per_s: int = Field(
        2_000, description="rows deleted per second (workload_many_deletes)"
    )
    fetch_rows_per_s: int = Field(
        20_000, description="rows fetched per second by bulk selects (workload_large_fetch)"
    )
    lock_wait_share: float = Field(
        0.40, description="share of active-session samples waiting on locks (lock_contention)"
    )
    lock_wait_sessions: float = Field(
        1.0,
        description="sessions waiting on locks on average, whatever the baseline (lock_contention)",
    )
    # Contention a baseline without lock waits tells, under one session waiting (docs/diagnose.md, why these levels).
    lock_wait_sessions_beside_baseline: float = Field(
        0.25,
        description="sessions waiting on locks on average when the lock waits left the baseline"
        " (lock_contention)",
    )
    flush_wait_share: float = Field(
        0.40,
        description="share of active-session samples waiting on WAL flushes (sync_commit_pressure)",
    )
    # Flush rate x flush latency, by Little's law (docs/diagnose.md, why these levels).
    flush_wait_sessions: float = Field(
        0.3, description="sessions waiting on WAL flushes on average (sync_commit_pressure)"
    )
    # ... and the flush must hold the clients back: its waits against their idle time between
    # transactions, a ratio of times, the same on a fast or a slow disk (docs/diagnose.md, why these levels).
    flush_commit_bound: float = Field(
        0.5,
        description="share of the flushing sessions' waits on a flush rather than idle"
        " between transactions: the flush holds the clients back (sync_commit_pressure)",
    )
    # The cross review ranks the causes by the share of the window's active session time each explains
    # (dbcrew/operators/diagnose/attribution.py) and drops a cause that explains little of it beside one that
    # explains most: a rate over its threshold is no cause when the sessions spent their time elsewhere.
    major_time_share: float = Field(
        0.5,
        description="share of the active session time a cause explaining most of it explains:"
        " beside it, causes under minor_time_share are dropped",
    )
    minor_time_share: float = Field(
        0.15,
        description="share of the active session time under which a cause is dropped beside one"
        " explaining major_time_share",
    )
    vacuum_presence: float = Field(
        0.5, description="share of samples with a vacuum running (vacuum_interference)"
    )
    vacuum_blocks_per_s: int = Field(
        2_000,
        description="heap blocks scanned (or buffers accessed) per second by vacuums"
        " (vacuum_interference)",
    )
    query_share: float = Field(
        0.10,
        description="share of the window's statement time a statement must take for its"
        " plan to be a cause (query_*, index_missing)",
    )
    indexed_writes_per_s: int = Field(
        1_000,
        description="row writes per second of a table carrying too many indexes"
        " (indexes_too_many, with the health check's indexes_too_many)",
    )
