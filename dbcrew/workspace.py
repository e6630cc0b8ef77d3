"""The run's DuckDB workspace: every extracted table, snapshot and observation of one review.

One DuckDB database file per run. DuckDB connections are not safe to share between threads, so
each call takes its own cursor from the one process-wide connection of that file.
"""

from __future__ import annotations

import atexit
import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from dbcrew.redact import redact, redact_value

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


class Workspace:
    """Tables by name; long observations behind snapshot keys (RCAgent) so prompts stay short."""

    def __init__(self, path: Path):
        self.path = Path(path).resolve()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._write_lock = threading.Lock()
        with self._cursor() as cur:
            cur.execute("CREATE TABLE IF NOT EXISTS observations (key VARCHAR PRIMARY KEY, body VARCHAR)")

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        return _connection(self.path).cursor()

    def close(self) -> None:
        release(self.path)

    # -- tables -----------------------------------------------------------------------------
    def write_table(self, name: str, columns: Sequence[tuple[str, str]], rows: Sequence[Sequence[Any]]) -> int:
        """Replace table `name` with typed columns; returns the row count. Texts are redacted (no
        password read from the target, e.g. in a `CREATE ROLE ... PASSWORD` statement, is kept)."""
        ddl = ", ".join(f'"{col}" {typ}' for col, typ in columns)
        names = [col for col, _ in columns]
        frame = pd.DataFrame([[redact_value(v) for v in r] for r in rows], columns=names, dtype=object)
        select = ", ".join(f'CAST(frame."{col}" AS {typ}) AS "{col}"' for col, typ in columns)
        with self._write_lock, self._cursor() as cur:
            cur.execute(f'CREATE OR REPLACE TABLE "{name}" ({ddl})')
            if rows:
                cur.register("frame", frame)
                cur.execute(f'INSERT INTO "{name}" SELECT {select} FROM frame')
                cur.unregister("frame")
        return len(rows)

    def has(self, name: str) -> bool:
        with self._cursor() as cur:
            found = cur.execute(
                "SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [name]
            ).fetchone()
        return bool(found and found[0])

    def query(self, sql: str, params: Sequence[Any] | None = None) -> list[dict[str, Any]]:
        with self._cursor() as cur:
            result = cur.execute(sql, params or [])
            cols = [d[0] for d in result.description]
            return [dict(zip(cols, row)) for row in result.fetchall()]


    # -- snapshot keys ------------------------------------------------------------------------
    def put_observation(self, key: str, body: Any) -> str:
        text = redact(body if isinstance(body, str) else json.dumps(body, default=str))
        with self._write_lock, self._cursor() as cur:
            cur.execute("INSERT OR REPLACE INTO observations VALUES (?, ?)", [key, text])
        return key
