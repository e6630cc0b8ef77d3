"""What a diagnosis observes: metric series over a window, session samples, statements and tables.

The same shape holds the anomaly window and the baseline, so a baseline recorded on a quiet day is
just a saved `WindowEvidence` (JSON) and the detector compares like with like.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

import pglast
from pglast import ast
from pglast.parser import fingerprint
from pydantic import BaseModel, Field

from dbcrew.models.report import SkipCause
from dbcrew.operators.window.metrics import Metric

# Statements that read the server's own statistics are monitoring (ours or another tool's), not workload.
MONITORING = re.compile(
    r"\bpg_(stat|settings|class|index|database|locks|catalog)\w*", re.IGNORECASE
)


class StatementDelta(BaseModel):
    """One pg_stat_statements entry's change over the window."""

    queryid: int
    userid: int = Field(
        0, description="the role that ran it: each role's runs of a statement are their own entry"
    )
    query: str
    calls: float
    total_exec_time_ms: float
    rows: float
    shared_blks_hit: float = 0.0
    shared_blks_read: float = 0.0
    temp_blks_written: float = 0.0

    @property
    def rows_per_call(self) -> float:
        return self.rows / self.calls if self.calls else 0.0

    @property
    def kind(self) -> str:
        """What the statement does: select, insert, update, delete, copy, ... (see `statement_kind`)."""
        return statement_kind(self.query)


@lru_cache(maxsize=1024)
def statement_kind(query: str) -> str:
    """The parsed statement's type, not its leading keyword: `WITH src AS (...) INSERT ...` is an
    insert (measured: a CTE-fed bulk load of 80k rows a statement read as a 'with' and was taken
    for a large fetch), `TABLE t` and `(SELECT ...)` are selects. Text pglast cannot parse falls
    back to the leading keyword."""
    try:
        statements = pglast.parse_sql(query)
    except pglast.parser.ParseError:
        head = query.lstrip("( \n\t").split(None, 1)
        return head[0].lower() if head else ""
    if len(statements) != 1:
        return "multiple"
    return type(statements[0].stmt).__name__.removesuffix("Stmt").lower()


class StatementIdentity(BaseModel):
    """What a statement's text says about it, whatever its literals: the same statement run with other
    values (a sampled session's text) or with $n parameters (pg_stat_statements' text) has one `key`."""

    key: str = Field(description="pglast's fingerprint of the parse tree (constants left out)")
    kind: str = Field(description="see `statement_kind`")
    relation: str = Field(
        "",
        description="the table it writes (INSERT, UPDATE, DELETE, MERGE, COPY) or first reads (a"
        " SELECT's first FROM item), as written in the text: 'schema.table' or 'table'; '' for none",
    )


def _first_range_var(node: object) -> ast.RangeVar | None:
    """The first table a FROM item names, through joins (left first) and subqueries."""
    if isinstance(node, ast.RangeVar):
        return node
    if isinstance(node, ast.JoinExpr):
        return _first_range_var(node.larg) or _first_range_var(node.rarg)
    if isinstance(node, ast.RangeSubselect):
        return _first_range_var(node.subquery)
    if isinstance(node, ast.SelectStmt):
        if node.larg is not None:  # UNION / INTERSECT / EXCEPT
            return _first_range_var(node.larg)
        for item in node.fromClause or ():
            found = _first_range_var(item)
            if found is not None:
                return found
    return None


@lru_cache(maxsize=4096)
def statement_identity(query: str) -> StatementIdentity:
    """The statement `query` is, cached by text (a window sees the same texts again and again).

    Text pglast cannot parse (cut at EXPLAINED_QUERY_CHARS, or not SQL) is its own key: its first
    200 characters."""
    try:
        statements = pglast.parse_sql(query)
        key = fingerprint(query)
    except pglast.parser.ParseError:
        return StatementIdentity(key=query[:200], kind=statement_kind(query))
    target: ast.RangeVar | None = None
    if len(statements) == 1:
        stmt = statements[0].stmt
        relation = getattr(stmt, "relation", None)
        target = relation if isinstance(relation, ast.RangeVar) else _first_range_var(stmt)
    name = (
        ".".join(p for p in (target.schemaname, target.relname) if p) if target is not None else ""
    )
    return StatementIdentity(key=key, kind=statement_kind(query), relation=name)


def running_by_statement(texts: Mapping[str, int], shown: dict[str, str]) -> Counter[str]:
    """Sampled texts' counts summed by statement (pglast's fingerprint), each statement under the text
    `shown` holds for it (set here to the first text seen when it holds none). A client that sends its
    values as literals (pgbench's default) runs one statement as many texts: counted per text, twenty
    parameters of one join behind a queue of lock waiters are twenty shares of half a per cent each,
    and a top-N of texts drops the statement's other literals."""
    by_statement = Counter[str]()
    for text, n in texts.items():
        by_statement[shown.setdefault(statement_identity(text).key, text)] += n
    return by_statement


class TimeSlice(BaseModel):
    """Active-session samples that share a wait, a statement and a relation: ASH's unit, summed over the
    window (one sample of one active session is one sampling step of database time)."""

    wait: str = Field(description="'Type:Event' as pg_stat_activity shows it, or 'CPU' for none")
    statement: str = Field("", description="the statement's `StatementIdentity.key`; '' unknown")
    kind: str = Field("", description="the statement's kind (insert, update, select, ...)")
    relation: str = Field(
        "",
        description="what the time went to: for a lock wait the relation of the lock waited for"
        " (pg_locks) when it names one, else the table of the statement (`StatementIdentity`)",
    )
    samples: int


class TableDelta(BaseModel):
    """One user table's counters over the window, with its size and index count at the end."""

    name: str
    seq_scan: float = 0.0
    seq_tup_read: float = 0.0
    idx_scan: float = 0.0
    n_tup_ins: float = 0.0
    n_tup_upd: float = 0.0
    n_tup_del: float = 0.0
    n_live_tup: float = 0.0
    n_dead_tup: float = 0.0
    index_count: int = 0
    total_bytes: int = 0

    @property
    def writes(self) -> float:
        return self.n_tup_ins + self.n_tup_upd + self.n_tup_del


class BlockedSession(BaseModel):
    pid: int
    blocker_pid: int
    blocker_state: str
    blocker_xact_seconds: float


class WindowEvidence(BaseModel):
    """Everything sampled over one window. Series are per-second rates (counters) or gauges."""

    started_at: float
    seconds: float
    interval: float
    series: dict[str, list[float]] = Field(default_factory=dict)
    waits: dict[str, int] = Field(
        default_factory=dict, description="'Type:Event' (or 'CPU') -> active-session samples"
    )
    session_samples: int = Field(0, description="how many times pg_stat_activity was sampled")
    flusher_idle_between: int = Field(
        0,
        description="samples in which a client session that waited on a WAL flush in the window"
        " was idle between two transactions (for under IDLE_BETWEEN_SECONDS)",
    )
    blocked: list[BlockedSession] = Field(default_factory=list)
    time_slices: list[TimeSlice] = Field(
        default_factory=list,
        description="the active-session samples by wait, statement and relation (the time attribution's input);"
        " a past interval's from the watcher's stored passes (dbcrew/operators/window/session_time.py); empty where"
        " sessions were not sampled one by one (Prometheus's history)",
    )
    statement_texts: dict[str, str] = Field(
        default_factory=dict, description="statement key -> a text of it as first sampled"
    )
    planned_samples: int = Field(
        0,
        description="session samples the window's length called for; more than `session_samples`:"
        " the sampler fell behind (an overloaded server answered slowly)",
    )
    statements: list[StatementDelta] = Field(default_factory=list)
    statements_unread: SkipCause | None = Field(
        None,
        description="why the live window could not read pg_stat_statements (its statements are unknown, not"
        " none); a past interval's say it per pass (dbcrew/operators/window/passes.py StatementsUnread)",
    )
    running: dict[str, int] = Field(
        default_factory=dict, description="query text of active sessions -> samples seen"
    )
    tables: list[TableDelta] = Field(default_factory=list)
    settings: dict[str, str] = Field(default_factory=dict)
    cpu_count: int | None = Field(
        None, description="host CPUs when the target is local, else unknown"
    )
    memory_total_bytes: int | None = None
    memory_by_statement: dict[str, float] = Field(
        default_factory=dict,
        description="statement key -> the peak private memory (GB) of the backends sampled running it, each"
        " backend under the statement it was sampled in most; a local target's only",
    )
    server_version_num: int = 0
    left_out: str = Field(
        "",
        description="tables not sampled because another session held them (dbcrew/operators/held.py)",
    )
    reconnects: int = Field(
        0, description="times the server ended the sampling session and it was resumed on a new one"
    )
    restarts: int = Field(
        0, description="times the server restarted during the window (no rate spans a restart)"
    )
    resets: int = Field(
        0,
        description="times counters were set back without a restart (pg_stat_reset*): no rate spans those either",
    )

    def mean(self, metric: Metric) -> float:
        values = self.series.get(metric.name) or []
        return sum(values) / len(values) if values else 0.0

    def peak(self, metric: Metric) -> float:
        values = self.series.get(metric.name) or []
        return max(values) if values else 0.0

    def wait_samples(self, *prefixes: str) -> int:
        """Active-session samples whose wait event starts with one of `prefixes`."""
        return sum(n for key, n in self.waits.items() if key.startswith(prefixes))

    def wait_share(self, *prefixes: str) -> float:
        """Share of active-session samples whose wait event starts with one of `prefixes`."""
        total = sum(self.waits.values())
        return self.wait_samples(*prefixes) / total if total else 0.0

    def save(self, path: Path) -> None:
        path.write_text(self.model_dump_json())

    @classmethod
    def load(cls, path: Path) -> WindowEvidence:
        return cls.model_validate_json(path.read_text())


class WindowBaseline(BaseModel):
    """A quiet window to compare against, and where it came from (said in the report)."""

    window: WindowEvidence
    source: str = Field(
        description="e.g. 'the baseline file quiet.json' or 'the quiet window of health review <run>'"
    )
