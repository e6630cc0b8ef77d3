"""Settings: the process's environment (`Environment`), a run's settings (`Settings`) and thresholds.

`Environment` owns every `DBCREW_*` variable: its type, default and meaning, in one class that
docs/configuration.md is generated from (`python -m dbcrew.settings > docs/configuration.md`).
Nothing else reads a `DBCREW_*` variable from os.environ. `Settings` is what one run may do, a flow
parameter. Threshold defaults follow the anchors in shared/research/health_checks.md (PgHero,
check_postgres, pg_gather); every threshold can be overridden per run.
"""

from __future__ import annotations

import functools
import math
import operator
import os
import re
from decimal import Decimal
from enum import StrEnum
from pathlib import Path
from typing import Any, get_args

from annotated_types import Ge, Gt, Le
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, SettingsConfigDict

from dbcrew.errors import UsageError

PREFIX = "DBCREW_"


class Capability(StrEnum):
    """How an endpoint can be made to answer in structure: native tool calls (OpenAI, vLLM with a
    tool parser, recent Ollama), a JSON schema as response_format (OpenAI, vLLM, llama.cpp server),
    or only JSON asked for in the prompt (anything else)."""

    TOOLS = "tools"
    JSON_SCHEMA = "json_schema"
    PROMPTED = "prompted"


class InvalidEnvironment(UsageError, ValueError):
    """A `DBCREW_*` variable holds a value its setting cannot take; the message is one line naming it.

    A UsageError, so the CLI exits 2 with that line; a ValueError too, as callers of the former
    per-variable readers (the reports' retention) expect."""


class Debugging(BaseSettings):
    """DBCREW_DEBUG alone. The last line of defence of the CLI and the MCP server asks it while reporting
    an internal error: read apart from the other variables, a bad DBCREW_LLM_TIMEOUT cannot turn that
    report into a second error. `Environment` owns it with the rest (it derives from this class)."""

    model_config = SettingsConfigDict(
        env_prefix=PREFIX, env_ignore_empty=True, frozen=True, allow_inf_nan=False
    )

    debug: bool = Field(
        False,
        description="an internal error shows its traceback (the CLI, the MCP server's tools);"
        " any value but 0, false, no or off",
    )

    @field_validator("debug", mode="before")
    @classmethod
    def _any_value_is_on(cls, value: object) -> object:
        """Any value switches it on, as it always did, except the usual spellings of off: never an error."""
        return (
            value.strip().lower() not in ("", "0", "false", "no", "off")
            if isinstance(value, str)
            else value
        )


class Environment(Debugging):
    """Every `DBCREW_*` variable the product reads, typed, with its default and what it does."""

    reports_dir: Path = Field(
        Path("reports"),
        description="where a run writes its report when no directory is given"
        " (a run directory per review under it)",
    )
    reports_retention_days: float = Field(
        14.0,
        ge=0,
        description="days a report stays under the reports directory of a"
        " worker's disk; the Prefect artifacts and the history store are the record",
    )
    reports_max_mb: float = Field(
        1024.0,
        ge=0,
        description="MiB the reports directory of a worker's disk may hold: past it the oldest"
        " run directories go first (the newest always stays)",
    )
    cache_dir: Path | None = Field(
        None,
        description="where built indexes live between runs (the manual's search index,"
        " the question router); unset: $XDG_CACHE_HOME/dbcrew, else ~/.cache/dbcrew",
    )
    store_url: str | None = Field(
        None,
        description="the shared store of history, memory and baselines:"
        " `postgresql://...` for a database several workers share (its password in"
        " PGPASSWORD or ~/.pgpass), or a DuckDB file (`duckdb:///path` or a plain path);"
        " unset: DBCREW_MEMORY_PATH, else $XDG_DATA_HOME/dbcrew/store.duckdb",
    )
    watch_sessions: int = Field(
        500,
        ge=1,
        description="targets one worker watches at most, over all its watching intervals (one session"
        " each): its share of an interval's targets is ceil(targets / live watchers), within this cap;"
        " targets beyond every watcher's cap are said in its log, never silently unwatched",
    )
    watch_session_step: float = Field(
        1.0,
        gt=0,
        allow_inf_nan=False,
        description="seconds between two session samples of a watched target between its passes"
        " (pg_ash's 1 s; at least 5 a pass at a shorter interval): what a past interval's time"
        " attribution rests on. Each is a pg_stat_activity read on the target and about 0.3 ms of"
        " the watcher's CPU, so a fleet of a thousand targets at 1 s costs a core: raise it there",
    )
    receiver_token: SecretStr | None = Field(
        None,
        description="`dbcrew server`'s Alertmanager receiver requires `Authorization: Bearer"
        " <token>` with this token (Alertmanager's http_config.authorization); unset: no token,"
        " and the receiver listens on 127.0.0.1 only either way",
    )
    mcp_token: SecretStr | None = Field(
        None,
        description="`dbcrew mcp --transport http` requires `Authorization: Bearer <token>` with"
        " this token; unset: the server makes a random one at start and prints it once (stdio"
        " needs none: the client starts the server itself)",
    )
    memory_path: str | None = Field(
        None,
        description="the older name of a DuckDB store file, read when DBCREW_STORE_URL is unset",
    )
    llm_base_url: str | None = Field(
        None,
        description="an OpenAI-compatible endpoint (vLLM, Ollama, llama.cpp);"
        " set (or OPENAI_API_KEY set), the LLM brain is the default",
    )
    llm_model: str = Field("gpt-4o-mini", description="the model the LLM brain asks")
    llm_timeout: float = Field(
        60.0,
        gt=0,
        description="seconds one request may take; with the retries it bounds what"
        " a dead or slow endpoint adds to a review: timeout x (1 + retries)",
    )
    llm_max_retries: int = Field(2, ge=0, le=10, description="retries of a failed request")
    llm_budget: float = Field(
        60.0,
        gt=0,
        description="seconds all of one run's LLM requests may take together (retries and"
        " repairs included); once spent, the rules answer the rest of the run and the report says so",
    )
    llm_context: int = Field(
        4096,
        ge=512,
        description="tokens of the model's context window: prompts are cut to fit it (the answer"
        " gets at most half), the cut said in the prompt (Ollama's default is 2,048-4,096)",
    )
    llm_capability: Capability | None = Field(
        None,
        description="how the endpoint answers in structure:"
        " native tool calls, a JSON schema as response_format, or JSON asked for in"
        " the prompt; unset: probed once per endpoint and model (dbcrew/llm/capability.py)",
    )
    llm_cache_dir: Path | None = Field(
        None,
        description="where answers are kept by request, one file each, so a later"
        " run asking the same is answered without a call; unset: in memory, for the"
        " process only",
    )
    llm_diag_calls: int = Field(30, ge=1, description="calls one LLM diagnosis may make")
    llm_diag_tokens: int = Field(
        60_000, ge=1, description="tokens (prompt and completion) one LLM diagnosis may spend"
    )
    llm_diag_seconds: float = Field(180.0, ge=1, description="seconds one LLM diagnosis may take")
    llm_diag_steps: int = Field(
        8, ge=1, description="turns of one expert's search in an LLM diagnosis"
    )
    llm_diag_samples: int = Field(
        1, ge=1, description="self-consistency: answers per expert, codes kept by majority vote"
    )
    llm_diag_experts: int = Field(
        3, ge=1, description="the largest team of experts one LLM diagnosis engages"
    )
    llm_observation_chars: int = Field(
        1_200,
        ge=0,
        description="an observation longer than this is shown as its head"
        " and a snapshot key the model can expand (0: shown whole)",
    )


def variable(field: str) -> str:
    """The environment variable of an `Environment` field (KeyError for a field it does not have)."""
    if field not in Environment.model_fields:
        raise KeyError(field)
    return PREFIX + field.upper()


def environment() -> Environment:
    """The process's `DBCREW_*` variables, validated; InvalidEnvironment (one line) names each bad one.

    Validating costs ~0.6 ms, so the result is kept and handed out again while the `DBCREW_*`
    items of os.environ (the cache's key, tens of microseconds to read) stay the same; a variable
    set or removed at run time (a test, a worker's start) is seen by the next call.
    """
    return _environment(
        tuple(item for item in os.environ.items() if item[0].upper().startswith(PREFIX))
    )


@functools.lru_cache(maxsize=4)
def _environment(variables: tuple[tuple[str, str], ...]) -> Environment:
    """`Environment()` for the `variables` it will read (the cache's key; pydantic-settings reads os.environ)."""
    try:
        return Environment()
    except ValidationError as exc:
        raise InvalidEnvironment("; ".join(_problem(error) for error in exc.errors())) from None


def debugging() -> bool:
    """DBCREW_DEBUG, whatever the other variables hold (see `Debugging`)."""
    return Debugging().debug


def _problem(error: Any) -> str:
    """One bad variable as `NAME='value': what it takes`. Only numbers and choices can be bad, so the value
    shown is never a URL or path (which may carry a password)."""
    name = str(error["loc"][0])
    field = Environment.model_fields[name]
    return f"{variable(name)}={error['input']!r}: {'choose' if _choices(field) else 'give'} {_takes(field)}"


def _choices(field: FieldInfo) -> list[str]:
    """The values of a field that is a choice (or unset: `Capability | None`); none for any other."""
    kind = next((a for a in get_args(field.annotation) if a is not type(None)), field.annotation)
    return (
        [member.value for member in kind]
        if isinstance(kind, type) and issubclass(kind, StrEnum)
        else []
    )


def _takes(field: FieldInfo) -> str:
    """What a field takes, in words, from its type and bounds: `a whole number from 0 to 10`."""
    if _choices(field):
        return f"one of {', '.join(_choices(field))}"
    kind = next(
        arg for arg in (get_args(field.annotation) or (field.annotation,)) if arg is not type(None)
    )
    words = {
        bool: "a flag",
        str: "text",
        SecretStr: "a secret (never printed)",
        Path: "a path",
        int: "a whole number",
        float: "a number",
    }[kind]
    ge, gt, le = (
        next((getattr(m, name) for m in field.metadata if isinstance(m, bound)), None)
        for name, bound in (("ge", Ge), ("gt", Gt), ("le", Le))
    )
    if ge is not None and le is not None:
        return f"{words} from {ge} to {le}"
    if gt is not None:
        return f"{words} above {gt}"
    return f"{words} of at least {ge}" if ge is not None else words


def configuration_markdown() -> str:
    """docs/configuration.md: every `Environment` variable with its type, default and meaning."""
    rows = [
        f"| `{variable(name)}` | {_takes(field)} | {_shown_default(field.default)} | {field.description} |"
        for name, field in Environment.model_fields.items()
    ]
    return "\n".join(
        [
            "# Configuration",
            "",
            "dbcrew reads these environment variables; each is a field of `dbcrew.settings.Environment`,"
            " the one place that reads them, and this page is generated from it"
            " (`python -m dbcrew.settings > docs/configuration.md`; a unit test checks the two agree)."
            " An empty variable counts as unset. A value its setting cannot take stops the command with"
            " one line naming the variable and what it takes (exit 2). Secrets are not among them: the LLM"
            " endpoint's key is OPENAI_API_KEY and a target's password PGPASSWORD (or ~/.pgpass), which the"
            " CLI keeps out of the processes it starts. What one review may do (its window, thresholds,"
            " recovery switches) is given per run, not here: `dbcrew review --help`.",
            "",
            "| variable | type | default | description |",
            "| --- | --- | --- | --- |",
            *rows,
            "",
        ]
    )


def _shown_default(value: object) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "on" if value else "off"
    shown = (
        f"{value:g}"
        if isinstance(value, float)
        else value.value
        if isinstance(value, StrEnum)
        else value
    )
    return f"`{shown}`"


RETENTION_ENV = variable("reports_retention_days")


def reports_root() -> Path:
    """Where a run writes its report when no directory is given: $DBCREW_REPORTS_DIR, else ./reports."""
    return environment().reports_dir.expanduser()


def cache_root() -> Path:
    """Where built indexes live between runs (the manual's search index, the question router):
    $DBCREW_CACHE_DIR, else $XDG_CACHE_HOME/dbcrew, else ~/.cache/dbcrew."""
    explicit = environment().cache_dir
    if explicit:
        return explicit.expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache").expanduser() / "dbcrew"


def reports_max_bytes() -> int:
    """How much the run directories under reports_root() may hold together ($DBCREW_REPORTS_MAX_MB, 1024 MiB)."""
    return int(environment().reports_max_mb * 2**20)


def reports_retention_days() -> float:
    """How long reports stay under reports_root() on a worker's disk ($DBCREW_REPORTS_RETENTION_DAYS, 14).

    A worker's disk is not the record: the Prefect artifacts and the history store are.
    """
    return environment().reports_retention_days


class Ablations(BaseModel):
    """Recovery features that can be switched off, to measure what each is worth (ROMAS's ablations)."""

    monitor: bool = Field(
        True, description="classify alerts; off: a failed task just fails and its dependents skip"
    )
    reflection: bool = Field(
        True,
        description="plan self-reflection and worker self-correction (retries, reconnect-and-resume)",
    )
    gap_narrow: bool = Field(
        True,
        description="minimal plan edits; off: a re-plan takes the whole new plan and reruns all",
    )
    memory: bool = Field(True, description="long-term lessons across runs on the same target")
    composition: bool = Field(
        True,
        description="the rules' team composed from the alert; off: the scenario's fixed playbook, whatever the alert",
    )
    knowledge: bool = Field(
        True,
        description="knowledge chunks retrieved for the diagnosis's experts and causes; off: none (ablation)",
    )

    def off(self) -> list[str]:
        return [f"no-{name.replace('_', '-')}" for name, on in self.model_dump().items() if not on]


class _Bounds(BaseModel):
    """Thresholds of any kind: finite, and none negative."""

    model_config = ConfigDict(allow_inf_nan=False)  # a NaN threshold would silently never fire

    @field_validator("*")
    @classmethod
    def _not_negative(cls, value: Any) -> Any:
        """Every threshold is a count, a ratio, a size or a duration: none is negative."""
        if isinstance(value, int | float) and value < 0:
            raise ValueError("must not be negative")
        return value


class DiagnosisThresholds(_Bounds):
    """What "too much" means to the diagnosis experts whatever the baseline (dbcrew/operators/diagnose/experts.py):
    absolute levels of saturation on any server (sessions per core, waits per active session, rows per
    second); the baseline then corroborates or weakens each candidate cause in the cross review."""

    cpu_sessions_per_core: float = Field(
        1.5, description="runnable sessions per host core: demand beyond supply (cpu_contention)"
    )
    cpu_host_busy: float = Field(
        80.0, description="% of the host's CPU busy, with the sessions above (cpu_contention)"
    )
    # Saturation without a queue: a session on every core and the host all but fully busy, the sessions
    # on the CPU out of their baseline. Measured on 2 cores: two clients of a CPU-bound statement held
    # 1.9 sessions on the CPU with the host 99% busy (the clients and the sampler took the rest); the
    # healthy backgrounds of the outside suite, at any level, under 0.3 sessions.
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
    # A high update rate is a root cause when it is heavy for the machine serving it: rows updated per
    # second per host core. A rate alone does not scale with the machine, and the server's CPU share (the
    # test before) swings with who else gets the CPU: for the same healthy pgbench it read 0.39 of 2 cores
    # on one day and 0.53-0.62 on another, and an update flood whose clients share the host got less of it
    # the more its clients took (CI: a flood of single-row commits fell below the quarter of the cores the
    # rule asked for). Measured on 2 cores: healthy pgbench keeping 1000 tps updates 2,900-3,100 rows/s
    # (1,450-1,550 a core); update floods updated 20,000-55,000 rows/s (10,000-27,000 a core), single-row
    # commits the slowest. The threshold sits near the geometric mean of 1,550 and 10,000.
    update_rows_per_s_per_core: int = Field(
        4_000, description="rows updated per second per host core (workload_high_updates)"
    )
    # A remote target's cores are unknown: its rate is judged against one core, and the server must be
    # seen paying for it (update floods 0.27-0.56, healthy pgbench at 1000 tps 0.14-0.26).
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
    # Two workers claiming the same few queue rows: one waited on the other's row lock 0.4 of the time
    # (every active sample a lock wait, the holder idle in its transaction): contention a baseline
    # without lock waits tells, under one session waiting.
    lock_wait_sessions_beside_baseline: float = Field(
        0.25,
        description="sessions waiting on locks on average when the lock waits left the baseline"
        " (lock_contention)",
    )
    flush_wait_share: float = Field(
        0.40,
        description="share of active-session samples waiting on WAL flushes (sync_commit_pressure)",
    )
    # Sessions waiting on WAL flushes on average (flush rate x flush latency, by Little's law). Measured
    # on a 2-core machine: healthy pgbench loads (40 to 1500 TPS, synchronous commit) stayed at or below
    # 0.18 with a flush share at or below 0.28; six clients of single-row commits ranged 0.44 to 3.3 at
    # a share of 0.71 to 0.90, the level swinging with how the clients' process got the CPU.
    flush_wait_sessions: float = Field(
        0.3, description="sessions waiting on WAL flushes on average (sync_commit_pressure)"
    )
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


class Thresholds(_Bounds):
    """A run's levels: the health checks' (one field each) and the diagnosis experts' (`diagnosis`)."""

    # cache_hit_ratio_low
    cache_hit_ratio_warning: float = 0.99
    cache_hit_ratio_critical: float = 0.90
    cache_min_block_accesses: int = Field(
        10_000, description="fewer accesses in the window: no verdict"
    )
    # every check that judges by cumulative counters (dbcrew/operators/statistics_age.py)
    counters_min_age_seconds: float = Field(
        3600.0,
        ge=0,
        description="counters younger than this (reset, discarded, restarted during the run):"
        " the checks judging by them are partial and their earlier findings are not resolved",
    )
    # cache_hit_ratio_low, and the cache as a symptom for setting_suboptimal (dbcrew/operators/statistics_age.py)
    server_warm_up_seconds: float = Field(
        300.0,
        ge=0,
        description="a server started this recently before the review (or during it) has a cold"
        " cache: the checks judged on what a start empties are partial, never a finding",
    )
    # index_unused
    unused_index_min_stats_age_days: float = Field(7.0, description="younger statistics: info only")
    unused_index_min_bytes: int = 1 * 1024 * 1024
    # dead_tuples_high, statistics_stale
    dead_tuples_min: int = 10_000
    dead_tuples_ratio: float = 0.20
    stale_mod_ratio: float = 0.20
    stale_min_rows: int = 1_000
    # Changes counted within this long after an analyze may predate it: PostgreSQL 15+ flushes a
    # backend's table counts when it goes idle, at most once a second, else by its idle timer 10 s
    # later (PGSTAT_IDLE_INTERVAL), so counts committed before an ANALYZE can land up to ~10 s after
    # it. Growth past what such a late flush can count is judged at once (dbcrew/operators/checks/tables.py).
    stale_flush_grace_seconds: float = Field(
        15.0, ge=0, description="younger analyzes: changes since are judged only by growth"
    )
    # sessions: idle_in_transaction, long_running_query, connections_saturation
    idle_in_transaction_seconds: float = 30.0
    idle_in_transaction_critical_seconds: float = 600.0
    long_running_query_seconds: float = 60.0
    connections_warning_ratio: float = 0.80
    connections_critical_ratio: float = 0.95
    # sequence_exhaustion
    sequence_warning_ratio: float = 0.75
    sequence_critical_ratio: float = 0.90
    # xid_wraparound_risk, and who holds the xmin horizon back: a warning from xid_warning_age, or from
    # this share of the freeze limit (autovacuum_freeze_max_age, its multixact twin for
    # mxid_wraparound_risk) where autovacuum is off and only the server's forced vacuums will freeze
    xid_warning_age: int = 1_000_000_000
    xid_critical_age: int = 1_500_000_000
    freeze_max_age_near_ratio: float = Field(
        0.9,
        ge=0,
        le=1,
        description="share of autovacuum_freeze_max_age (or its multixact twin) from which an age"
        " with autovacuum off for it is xid_wraparound_risk (mxid_): a warning",
    )
    horizon_holder_min_age: int = Field(
        1_000_000,
        description="an xmin this many transactions old is named as holding"
        " back vacuum and freezing",
    )
    horizon_holder_min_seconds: float = Field(
        300.0, description="so is a transaction held open this long, whatever its age"
    )
    # index_missing
    missing_index_min_rows: int = 10_000
    missing_index_min_rows_per_scan: float = 1_000.0
    missing_index_min_seq_scans: int = 20
    hypo_min_cost_saving: float = Field(
        0.5, description="plan-cost drop a hypothetical index must bring (dexter: 50 %)"
    )
    # slow_query, checkpoints_too_frequent, temp_files_spill
    slow_query_mean_ms: float = 500.0
    slow_query_min_calls: int = 10
    slow_query_min_share: float = Field(
        0.02,
        ge=0,
        le=1,
        description="share of the workload's statement time a statement must take to be reported",
    )
    slow_query_min_total_ms: float = Field(
        1_000.0, ge=0, description="and this much time in all (an idle database's shares are large)"
    )
    checkpoints_min_total: int = 10
    checkpoints_requested_ratio: float = 0.5
    temp_spill_warning_bytes: int = Field(
        100 * 2**20, description="less spilled in the window: info"
    )
    # mxid_wraparound_risk
    mxid_warning_age: int = 400_000_000
    mxid_critical_age: int = 1_000_000_000
    # replication_lag
    replication_lag_warning_bytes: int = 16 * 2**20
    replication_lag_critical_bytes: int = 2**30
    replication_lag_warning_seconds: float = 60.0
    replication_lag_critical_seconds: float = 600.0
    slot_retained_critical_bytes: int = Field(
        2**30, description="an inactive slot retaining more WAL: critical"
    )
    slot_inactive_grace_seconds: float = Field(
        300.0,
        ge=0,
        description="a slot inactive for less (PostgreSQL 17+): its replica is"
        " restarting or failing over; named in the coverage, not a finding yet",
    )
    bloat_warning_ratio: float = Field(
        0.40, description="estimated wasted share of a relation (postgres-checkup)"
    )
    bloat_critical_ratio: float = 0.80
    bloat_min_wasted_bytes: int = Field(8 * 2**20, description="less waste is not worth a rebuild")
    indexes_too_many: int = Field(
        10,
        description="indexes on one table (PMM's advisor flags more than 10), for the"
        " health check and the diagnosis's index expert alike",
    )
    indexes_too_many_write_share: float = Field(
        0.5, description="share of row writes among reads and writes"
    )

    diagnosis: DiagnosisThresholds = Field(
        default_factory=DiagnosisThresholds,
        description="the diagnosis experts' levels (`diagnosis.NAME` in overrides)",
    )

    @model_validator(mode="before")
    @classmethod
    def _dotted_names(cls, data: Any) -> Any:
        """`diagnosis.NAME` keys into the nested model: overrides travel as one flat dict of numbers
        (--threshold, a flow's `thresholds` parameter), the diagnosis's among them."""
        if not isinstance(data, dict) or not any("." in str(key) for key in data):
            return data
        nested = {key: value for key, value in data.items() if "." not in str(key)}
        for key, value in data.items():
            group, dot, name = str(key).partition(".")
            if dot:
                base = nested.get(group) or {}
                nested[group] = {
                    **(base.model_dump() if isinstance(base, BaseModel) else base),
                    name: value,
                }
        return nested


OVERRIDABLE: dict[str, FieldInfo] = {
    **{name: field for name, field in Thresholds.model_fields.items() if name != "diagnosis"},
    **{f"diagnosis.{name}": field for name, field in DiagnosisThresholds.model_fields.items()},
}  # what --threshold NAME=VALUE may name


PLAIN_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def parse_overrides(pairs: list[str]) -> dict[str, float]:
    """`name=value` pairs (the CLI's --threshold) checked against Thresholds; ValueError in one line.

    A value is a plain decimal (`300`, `0.5`, `1e6`): not `nan` or `inf`, which compare false
    with everything and would silently switch a check off, nor `1_000` or non-ASCII digits,
    which Python's float() accepts. Counts and sizes take whole numbers, kept exact as int.
    """
    known = OVERRIDABLE
    overrides: dict[str, float] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        name, raw = name.strip(), raw.strip()
        if not sep or name not in known:
            raise ValueError(
                f"--threshold {pair!r}: expected NAME=VALUE with NAME one of {', '.join(sorted(known))}"
            )
        if not PLAIN_NUMBER.fullmatch(raw):
            raise ValueError(
                f"--threshold {pair!r}: {raw!r} is not a number (write e.g. 300, 0.5 or 1e6)"
            )
        overrides[name] = _number(pair, raw, whole=known[name].annotation is int)
    try:
        checked = Thresholds(**overrides)
    except ValidationError as exc:
        error = exc.errors()[0]
        raise ValueError(
            f"--threshold: {'.'.join(map(str, error['loc']))} {error['msg'].lower()}"
        ) from None
    return {name: operator.attrgetter(name)(checked) for name in overrides}


def _number(pair: str, raw: str, *, whole: bool) -> float:
    """The exact value of a plain decimal: an int for a count or size, a finite float otherwise."""
    value = Decimal(raw)
    if whole:
        if value.adjusted() >= 18:  # checked before any conversion: 1e999999999 would take minutes
            raise ValueError(f"--threshold {pair!r}: {raw!r} is out of range")
        if value != value.to_integral_value():
            raise ValueError(f"--threshold {pair!r}: takes a whole number")
        return int(value)
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"--threshold {pair!r}: {raw!r} is out of range")
    return number


class Machine(BaseModel):
    """The target's machine, when the user declares it (otherwise measured for a local target)."""

    memory_bytes: int | None = Field(None, gt=0)
    cpus: int | None = Field(None, gt=0)


class Settings(BaseModel):
    """What a run may do to its target and how hard it may try."""

    model_config = ConfigDict(allow_inf_nan=False)

    window_seconds: float = Field(10.0, ge=0, description="seconds to sample activity and counters")
    deadline_after_window_seconds: float = Field(
        60.0,
        ge=0,
        description="a run's deadline is its window plus this, from its start (dbcrew/deadline.py):"
        " the work that can wait (charts, a model's experts) stands down before it",
    )
    deadline_reserve_seconds: float = Field(
        15.0,
        ge=0,
        description="the time before the deadline kept for writing the causes found: work that can"
        " wait does not start once less is left",
    )
    activity_samples: int = 5
    statement_timeout_ms: int = 30_000
    lock_timeout_ms: int = 1_000
    max_workers: int = 8
    worker_retries: int = Field(2, ge=0, le=2, description="self-corrections before an alert")
    max_reflection_rounds: int = 2
    max_replans: int = Field(3, ge=0, le=3)
    max_regenerations: int = Field(
        2, ge=0, le=5, description="times a re-plan proposal with refused edits is asked again"
    )
    target_wait_seconds: float = Field(
        30.0,
        ge=0,
        le=600,
        description="how long a task waits, probing with growing pauses,"
        " for a target that stopped answering; then the run says it is incomplete",
    )
    outage_wait_seconds: float = Field(
        60.0,
        ge=0,
        le=600,
        description="how long, in all, one run's retries wait for a target"
        " that failed the same way before in the run (the monitor's memory); then they probe once",
    )
    ablations: Ablations = Field(default_factory=Ablations)
    store_url: str | None = Field(
        None,
        description="the shared store of history, memory and baselines (dbcrew.store);"
        " None: DBCREW_STORE_URL of the process that runs the review. A flow parameter:"
        " never a password here",
    )
    thresholds: Thresholds = Field(default_factory=Thresholds)
    machine: Machine = Field(default_factory=Machine)
    alert: str = Field(
        "", description="diagnosis: the alert text that started it (data, never instructions)"
    )
    baseline_path: str | None = Field(
        None, description="diagnosis: a saved quiet-period window to compare against"
    )


if __name__ == "__main__":
    print(configuration_markdown(), end="")
