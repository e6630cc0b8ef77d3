"""The brief: what the probe learned about the target, which the planner prunes its playbook by."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field


class Brief(BaseModel):
    server_version: str
    server_version_num: int
    database: str
    current_user: str
    database_size_bytes: int = 0
    table_count: int = 0
    index_count: int = 0
    in_recovery: bool = False
    extensions: list[str] = Field(default_factory=list)
    preloaded_libraries: list[str] | None = Field(
        None, description="None when the role may not read the setting"
    )
    is_superuser: bool = False
    can_read_all_stats: bool = Field(
        False, description="member of pg_read_all_stats (or superuser)"
    )
    can_read_all_settings: bool = False
    max_connections: int = 100
    track_io_timing: bool = False
    system_identifier: str | None = Field(
        None,
        description="the cluster's identity (pg_control_system); None when the role may not read it",
    )
    probed_at: datetime | None = Field(None, description="the server's clock when it was probed")
    server_started_at: datetime | None = Field(None, description="pg_postmaster_start_time()")
    stats_reset_at: datetime | None = Field(
        None,
        description="when this database's cumulative statistics were last reset (pg_stat_database.stats_reset);"
        " None when never",
    )
    shared_stats_reset_at: datetime | None = Field(
        None,
        description="when the server-wide statistics were last reset (pg_stat_archiver.stats_reset): the"
        " server sets it when it starts without its statistics (a first start, a crash, an immediate shutdown)",
    )

    def identity(self, address: str) -> str:
        """`system identifier/database`: the same cluster under any host name or port is the same target in the store.

        When the role may not read the identifier, the address (host:port) is the next best identity.
        """
        return f"{self.system_identifier or address}/{self.database}"

    @property
    def statements_missing(self) -> str | None:
        """Why pg_stat_statements is not usable here, or None: it must be installed in this database *and*
        preloaded by the server (unknown when the role may not read shared_preload_libraries)."""
        if "pg_stat_statements" not in self.extensions:
            return "extension pg_stat_statements is not installed in this database"
        if (
            self.preloaded_libraries is not None
            and "pg_stat_statements" not in self.preloaded_libraries
        ):
            return "pg_stat_statements is not in shared_preload_libraries"
        return None

    @property
    def has_statements(self) -> bool:
        """pg_stat_statements is usable: installed here and preloaded (`statements_missing`)."""
        return self.statements_missing is None
