"""The process's environment: every `DBCREW_*` variable, typed, in one class (`Environment`).

docs/configuration.md is generated from it (`python -m dbcrew.settings > docs/configuration.md`).
Nothing else reads a `DBCREW_*` variable from os.environ (tests/unit/test_settings.py holds every
other module to it).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from dbcrew.errors import UsageError
from dbcrew.settings.in_words import choices, takes
from dbcrew.settings.llm import LlmVariables

PREFIX = "DBCREW_"


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


class Environment(LlmVariables, Debugging):
    """Every `DBCREW_*` variable the product reads, typed, with its default and what it does (the LLM
    endpoint's are `LlmVariables`)."""

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
        " attribution rests on; longer when DBCREW_WATCH_SESSION_SAMPLES would be exceeded",
    )
    watch_session_samples: float = Field(
        50.0,
        gt=0,
        allow_inf_nan=False,
        description="session samples a second one watcher takes over all its targets, at most: each is"
        " a pg_stat_activity read on the target and a few tenths of a millisecond of the watcher's"
        " CPU, so beyond this many targets at DBCREW_WATCH_SESSION_STEP each target's step widens"
        " (500 targets: one sample every 10 s) instead of the sampling taking the host",
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
    return f"{variable(name)}={error['input']!r}: {'choose' if choices(field) else 'give'} {takes(field)}"
