"""The run's DuckDB workspace: every extracted table, snapshot and observation of one review.

One DuckDB database file per run. DuckDB connections are not safe to share between threads, so
each call takes its own cursor from the one process-wide connection of that file.

Rows are read back as models: each workspace table has a row model (a dataclass) declared next to
the SQL that lands it (dbcrew/operators/collect/, dbcrew/operators/stat_views.py), and `Workspace.rows` builds
them as psycopg's `class_row` does from PostgreSQL, so one model serves both reads.
"""

from __future__ import annotations

import atexit
import dataclasses
import errno
import json
import math
import os
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import duckdb

from dbcrew.artifacts import Artifact
from dbcrew.errors import OutNotWritable
from dbcrew.redact import redact, redact_value

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Row = TypeVar("Row", bound="DataclassInstance")

# PostgreSQL type OIDs the collectors return, mapped to DuckDB column types. Collector SQL casts
# everything else to text, bigint, float8, bool or timestamptz, so this table stays small.
PG_TYPE_TO_DUCKDB: dict[int, str] = {
    16: "BOOLEAN",  # bool
    20: "BIGINT",  # int8
    21: "BIGINT",  # int2
    23: "BIGINT",  # int4
    26: "BIGINT",  # oid
    28: "BIGINT",  # xid
    700: "DOUBLE",  # float4
    701: "DOUBLE",  # float8
    1700: "DOUBLE",  # numeric
    1114: "TIMESTAMP",  # timestamp
    1184: "TIMESTAMPTZ",  # timestamptz
}

_OPEN: dict[Path, duckdb.DuckDBPyConnection] = {}
_OPEN_LOCK = threading.Lock()


def _connection(path: Path) -> duckdb.DuckDBPyConnection:
    with _OPEN_LOCK:
        conn = _OPEN.get(path)
        if conn is None:
            conn = duckdb.connect(str(path))
            _OPEN[path] = conn
        return conn


@atexit.register
def _close_all() -> None:
    """Close every workspace before the interpreter tears DuckDB's bindings down."""
    with _OPEN_LOCK:
        while _OPEN:
            _OPEN.popitem()[1].close()


def release(path: Path) -> None:
    """Close the process's connection to the workspace at `path`, if open (the next use opens it again).

    A worker process runs reviews for days: a run's connection (DuckDB's buffers, a file handle) must
    end with the run, not with the process."""
    with _OPEN_LOCK:
        conn = _OPEN.pop(Path(path).resolve(), None)
    if conn is not None:
        conn.close()


def discard(path: Path) -> None:
    """Close and delete the workspace at `path` with its write-ahead log: a run whose report is written
    and posted needs it no more where the report is not the record (a worker's reports folder)."""
    release(path)
    for file in (path, path.with_name(path.name + ".wal")):
        file.unlink(missing_ok=True)


def holder(path: Path) -> str | None:
    """Who holds the workspace file at `path`: None when no process does (its review ended, however it ended),
    else who does: "PID n" (DuckDB's word for the other process) or "this process".

    DuckDB's file lock is the workspace's ownership: a review takes it with its first write and keeps it
    until `release`, and the kernel drops it with the process, kill -9 included. A lock conflicts only
    between processes, so this process's own open workspaces are looked up, not probed."""
    path = Path(path).resolve()
    with _OPEN_LOCK:
        if path in _OPEN:
            return "this process"
    try:
        duckdb.connect(str(path), read_only=True).close()
    except duckdb.Error as exc:
        if "Could not set lock" not in str(exc):
            # DuckDB reads a file only once it holds its lock: a file it cannot read is nobody's.
            return None
        pid = re.search(r"\(PID (\d+)\)", str(exc))
        return f"PID {pid[1]}" if pid else "another process"
    return None


def disk_refusal(folder: Path) -> str | None:
    """Why the disk under `folder` refuses writes (read-only, or full to the last block), None when it does not.

    DuckDB's errors carry no errno: a write it could not make is told from its own errors by the disk."""
    disk = os.statvfs(folder)
    if disk.f_flag & os.ST_RDONLY:
        return os.strerror(errno.EROFS)
    if disk.f_bavail == 0:
        return os.strerror(errno.ENOSPC)
    return None


def _column(values: list[Any], duckdb_type: str) -> list[Any]:
    """One column's values as a DuckDB list parameter: texts redacted; a text column gets text (a list binds
    one Python type, and some, such as an inet address, not at all); a float NaN is NULL (no measurement)."""
    if duckdb_type == "VARCHAR":
        return [None if v is None else redact(v if isinstance(v, str) else str(v)) for v in values]
    return [None if isinstance(v, float) and math.isnan(v) else redact_value(v) for v in values]


class Workspace:
    """Tables by name; long observations behind snapshot keys (RCAgent) so prompts stay short."""

    def __init__(self, path: Path):
        self.path = Path(path).resolve()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._write_lock = threading.Lock()
        with self._writing(), self._cursor() as cur:
            cur.execute(
                "CREATE TABLE IF NOT EXISTS observations (key VARCHAR PRIMARY KEY, body VARCHAR)"
            )

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        return _connection(self.path).cursor()

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """A write the disk refused (full, read-only) is the run folder's fault: OutNotWritable (exit 2), not an
        internal error."""
        try:
            yield
        except duckdb.Error as exc:
            refused = disk_refusal(self.path.parent)
            if refused is None:
                raise
            raise OutNotWritable(self.path, "workspace", refused) from exc

    def close(self) -> None:
        release(self.path)

    # -- tables -----------------------------------------------------------------------------
    def write_table(
        self, name: str, columns: Sequence[tuple[str, str]], rows: Sequence[Sequence[Any]]
    ) -> int:
        """Replace table `name` with typed columns; returns the row count. Texts are redacted (no
        password read from the target, e.g. in a `CREATE ROLE ... PASSWORD` statement, is kept)."""
        # One list parameter per column, unnested side by side: one statement for all rows, no pandas
        # (a DataFrame cost ~0.25 CPU-s to import in every review process, and more per write). The table is
        # made by that statement too (CREATE ... AS SELECT, each column cast to its type): one commit a table,
        # not a CREATE and an INSERT each committed, 2.3 instead of 3.1 ms of CPU for 50 rows of three
        # columns, some 20 writes a review. An empty table is declared, as the cast of an empty list may not bind.
        if not rows:
            ddl = ", ".join(f'"{col}" {typ}' for col, typ in columns)
            statement, values = f'CREATE OR REPLACE TABLE "{name}" ({ddl})', []
        else:
            select = ", ".join(f'CAST(unnest(?) AS {typ}) AS "{col}"' for col, typ in columns)
            statement = f'CREATE OR REPLACE TABLE "{name}" AS SELECT {select}'
            values = [_column([row[i] for row in rows], typ) for i, (_, typ) in enumerate(columns)]
        with self._write_lock, self._writing(), self._cursor() as cur:
            cur.execute(statement, values)
        return len(rows)

    def has(self, table: Artifact) -> bool:
        """Whether the run landed the artifact `table` (a collector that was skipped or failed did not)."""
        with (
            self._cursor() as cur
        ):  # duckdb_tables(), not the information_schema view over it: 0.4 ms, not 1.0
            found = cur.execute(
                "SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [table]
            ).fetchone()
        return bool(found and found[0])

    def query(self, sql: str, params: Sequence[Any] | None = None) -> list[dict[str, Any]]:
        with self._cursor() as cur:
            result = cur.execute(sql, params or [])
            cols = [d[0] for d in result.description]
            return [dict(zip(cols, row)) for row in result.fetchall()]

    def rows(self, model: type[Row], sql: str, params: Sequence[Any] | None = None) -> list[Row]:
        """The rows of `sql`, each as `model(**columns)` (what psycopg's `class_row(model)` builds).

        A column the model does not declare is left out: a window table carries the `<counter>_delta`
        columns of its view (dbcrew/operators/stat_views.py) beside the view's own, which its model declares.
        A column the model declares and the result lacks fails, as a typo in either would.
        """
        declared = {field.name for field in dataclasses.fields(model)}
        with self._cursor() as cur:
            result = cur.execute(sql, params or [])
            kept = [(i, d[0]) for i, d in enumerate(result.description) if d[0] in declared]
            return [model(**{name: row[i] for i, name in kept}) for row in result.fetchall()]

    # -- snapshot keys ------------------------------------------------------------------------
    def observation(self, key: Artifact) -> str | None:
        """The body stored behind the artifact `key`; None when no task of the run stored it."""
        with self._cursor() as cur:
            found = cur.execute("SELECT body FROM observations WHERE key = ?", [key]).fetchone()
        return None if found is None else str(found[0])

    def put_observation(self, key: str, body: Any) -> str:
        text = redact(body if isinstance(body, str) else json.dumps(body, default=str))
        with self._write_lock, self._writing(), self._cursor() as cur:
            cur.execute("INSERT OR REPLACE INTO observations VALUES (?, ?)", [key, text])
        return key
