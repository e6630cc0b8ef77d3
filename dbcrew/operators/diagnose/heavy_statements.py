"""The window's heaviest statements, planned and judged against what they cost per call.

`plan_issues` reads a plan on its own. That misses the poor joins nobody can see in a plan made by
another session: a client that ran `SET enable_hashjoin = off` (pg_stat_activity does not show a
session's settings, and pg_settings shows only the diagnosis's own), or a nested loop the planner
chose for an outer input it estimated small. What pg_stat_statements measured per call (time,
buffers, rows) is what the plan that ran did, so each heavy statement's generic plan is held against
it:

- the plan's expected buffers, and its cost at the server's pace, bound what it can have done; a
  statement that read ten times more, or spent several times more on the CPU, did not run that plan.
  The pace is timed when the window is live (`measured_pace`: a fixed CPU-bound statement run on the
  server, its queue for the CPU included); a past window's is the slowest pace measured on a 2-core
  host, stretched by the window's CPU queue, and held to a wider factor;
- the planner's nested-loop plan (hash and merge joins disabled: what such a session gets) is then
  planned too; when it accounts for the measured cost, it is the plan judged (its nested loops, their
  join keys: unindexed, or of different types joined through a cast);
- the planner settings that are visible are said and used: the diagnosis session's own (server,
  database and its role's defaults, already in its plans) and the statement's role's defaults
  (pg_db_role_setting, planned with them); a session's own SET is not visible, and the evidence says so.

At most `TOP_STATEMENTS` statements, at most three plans each, every plan (and, once a call's time
is in question, the pace's three runs of a fixed statement, a few milliseconds each) under
PLAN_TIMEOUT_MS,
through the guard of `dbcrew.operators.explain` (one plain SELECT calling only pg_catalog's code, planned,
never executed).
"""

from __future__ import annotations

import enum
import statistics
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import psycopg
from pglast import ast, parse_sql
from pglast.parser import ParseError

from dbcrew.operators.diagnose.judgements import (
    NESTED_LOOP_PAIRS,
    NOT_EXPLAINED,
    SELECT,
    PlanIssue,
    StatementPlan,
    conjuncts,
    plan_issues,
)
from dbcrew.operators.explain import FOREIGN_CODE, Unplannable, generic_plan, refused_text
from dbcrew.operators.sql import fetch, scalar
from dbcrew.operators.window.evidence import (
    MONITORING,
    StatementDelta,
    WindowEvidence,
    running_by_statement,
    statement_identity,
)
from dbcrew.operators.window.metrics import ON_CPU
from dbcrew.operators.window.readers import EXPLAINED_QUERY_CHARS
from dbcrew.targets import PostgresTarget
from dbcrew.vocabulary import RootCauseCode

TOP_STATEMENTS = 5
MIN_SHARE = 0.05
PLAN_TIMEOUT_MS = 2_000  # one generic plan of one statement: planning, never running
# Measured 0.012-0.05 ms per unit of cost for scans, hash joins and nested loops on a 2-core host
# at load 6 (cached data): the slowest. Time waiting (locks, I/O) is taken out before comparing.
MS_PER_COST_UNIT = 0.05
# A statement that read this many times the buffers its plan expects, or spent this many times its
# time allowance on the CPU, did not run that plan.
UNEXPLAINED_FACTOR = 10.0
# The pace timed on the server: a count over generate_series, a cost the planner rates low for the
# CPU it takes. Measured on a quiet 2-core host: 0.0096-0.010 ms a unit; cached plans ran faster a
# unit (sequential and index scans, hash joins, aggregates, a correlated subquery: 0.0005-0.0043),
# a nested loop rescanning a materialized input as fast (0.0103, 58 times its hash join's time). A
# call over CALIBRATED_FACTOR times its plan's cost at that pace did not run that plan.
_PACE_SQL = (
    "EXPLAIN (ANALYZE, TIMING OFF, SUMMARY ON, FORMAT JSON)"
    " SELECT count(*) FROM generate_series(1, 100000)"
)
PACE_RUNS = 3  # the median: one run may lose the CPU for a scheduler's slice
CALIBRATED_FACTOR = 4.0
MIN_UNEXPLAINED_BLOCKS = 10_000  # fewer buffers per call: too little to judge a plan by
MIN_UNEXPLAINED_MS = 200.0  # a shorter call: too little to judge a plan by
LARGE_OUTER_ROWS = 10_000  # a nested loop running its inner side this often per call
ESTIMATE_FACTOR = 10.0  # rows per call this far from the plan's estimate, either way
MIN_ESTIMATED_ROWS = 1_000  # the larger side of an estimate comparison must reach this
INDEX_PAGES_PER_LOOP = 3  # an index descent: root, inner page, leaf
# Planner settings whose non-default values change which join a plan uses.
PLANNER_SETTINGS = (
    "enable_hashjoin",
    "enable_mergejoin",
    "enable_nestloop",
    "enable_indexscan",
    "enable_bitmapscan",
    "enable_seqscan",
    "enable_memoize",
    "enable_material",
    "join_collapse_limit",
    "from_collapse_limit",
    "random_page_cost",
    "seq_page_cost",
    "cpu_tuple_cost",
    "cpu_operator_cost",
    "work_mem",
)
NESTED_LOOPS_ONLY = {"enable_hashjoin": "off", "enable_mergejoin": "off"}
NOT_VISIBLE = (
    "a session's own SET is not visible (pg_stat_activity does not show it; pg_settings shows only"
    " the diagnosis's session)"
)

_OWN_SETTINGS_SQL = """
SELECT name, setting, source FROM pg_settings
 WHERE name = ANY(%(names)s) AND setting IS DISTINCT FROM boot_val AND source <> 'default'
 ORDER BY name
"""
# The statement's role's defaults (ALTER ROLE ... SET, also IN DATABASE this one): visible to all.
_ROLE_SETTINGS_SQL = """
SELECT split_part(c, '=', 1) AS name, substr(c, strpos(c, '=') + 1) AS setting,
       s.setrole::regrole::text AS role, s.setdatabase <> 0 AS in_database
  FROM pg_db_role_setting s, unnest(s.setconfig) AS c
 WHERE s.setrole = %(role)s AND s.setdatabase IN (0, (SELECT oid FROM pg_database WHERE datname = current_database()))
   AND split_part(c, '=', 1) = ANY(%(names)s)
 ORDER BY s.setdatabase
"""
_RELATIONS_SQL = """
SELECT DISTINCT ON (c.relname) c.relname::text AS name,
       quote_ident(n.nspname) || '.' || quote_ident(c.relname) AS qualified, c.relpages::float8 AS pages
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE c.relname = ANY(%(names)s) AND c.relkind IN ('r', 'p', 'm')
 ORDER BY c.relname, pg_table_is_visible(c.oid) DESC, n.nspname
"""
_COLUMNS_SQL = """
SELECT k.rel, k.col, format_type(a.atttypid, a.atttypmod) AS type,
       EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = a.attrelid AND i.indkey[0] = a.attnum) AS indexed
  FROM unnest(%(rels)s::text[], %(cols)s::text[]) AS k(rel, col)
  JOIN pg_attribute a ON a.attrelid = to_regclass(k.rel) AND a.attname = k.col AND NOT a.attisdropped
"""
_RUNNING_SQL = """
SELECT left(query, %(chars)s::int) AS query,
       max(extract(epoch FROM clock_timestamp() - query_start))::float8 AS seconds
  FROM pg_stat_activity
 WHERE state = 'active' AND pid <> pg_backend_pid() AND left(query, %(chars)s::int) = ANY(%(queries)s)
 GROUP BY 1
"""


def statement_candidates(window: WindowEvidence) -> list[tuple[str, float]]:
    """The heaviest statements: finished ones by share of statement time (a text's entries summed:
    one statement run with parameters of different types, or by different roles, has several),
    sampled ones by share of the samples of all their literal texts (a finished statement's own, when
    it is one)."""
    finished = [s for s in window.statements if not MONITORING.search(s.query)]
    total = sum(s.total_exec_time_ms for s in finished)
    shares: dict[str, float] = {}
    for s in finished:
        if total > 0:
            shares[s.query] = shares.get(s.query, 0.0) + s.total_exec_time_ms / total
    # A sampled text with its literals is the finished statement of the same fingerprint: one
    # candidate, planned once (the `$n` text, or the first literal text seen when none finished), its
    # samples summed over every literal seen (a window stored before its texts were summed, too).
    named = {statement_identity(q).key: q for q in shares}
    sampled = running_by_statement(
        {q: n for q, n in window.running.items() if not MONITORING.search(q)}, named
    )
    active = sum(sampled.values())
    for text, seen in sampled.items():
        shares[text] = max(shares.get(text, 0.0), seen / active)
    ranked = sorted(shares.items(), key=lambda kv: -kv[1])
    return [(q, share) for q, share in ranked[:TOP_STATEMENTS] if share >= MIN_SHARE]


@dataclass(frozen=True)
class Observed:
    """What the statement did per call in the window: pg_stat_statements' deltas (finished calls)
    summed over its entries of the same text, or, still running, how long it has run so far."""

    queryid: int | None = None
    calls: float = 0.0
    ms_per_call: float = 0.0
    rows_per_call: float | None = None
    blocks_per_call: float | None = None
    running_seconds: float = 0.0

    @property
    def ms(self) -> float:
        """Time of one call: the mean of the finished ones, at least what a running one has taken."""
        return max(self.ms_per_call, self.running_seconds * 1000.0)

    def numbers(self) -> dict[str, float]:
        out = {"ms_per_call": round(self.ms, 1)}
        if self.calls:
            out["calls"] = self.calls
        if self.rows_per_call is not None:
            out["rows_per_call"] = round(self.rows_per_call, 1)
        if self.blocks_per_call is not None:
            out["buffers_per_call"] = round(self.blocks_per_call)
        if self.running_seconds:
            out["running_for_s"] = round(self.running_seconds, 1)
        return out


def observed(window: WindowEvidence, query: str, running_seconds: Mapping[str, float]) -> Observed:
    entries = [s for s in window.statements if s.query == query]
    running = running_seconds.get(query, 0.0)
    if not entries:
        return Observed(running_seconds=running)
    calls = sum(s.calls for s in entries)
    heaviest: StatementDelta = max(entries, key=lambda s: s.total_exec_time_ms)
    blocks = sum(s.shared_blks_hit + s.shared_blks_read for s in entries)
    return Observed(
        queryid=heaviest.queryid,
        calls=calls,
        ms_per_call=sum(s.total_exec_time_ms for s in entries) / calls,
        rows_per_call=sum(s.rows for s in entries) / calls,
        blocks_per_call=blocks / calls,
        running_seconds=running,
    )


def _walk(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from _walk(child)


def _processes(node: dict[str, Any]) -> float:
    """Processes sharing the rows a Gather collects: its workers and the leader."""
    return 1.0 + float(node.get("Workers Planned", 0))


@dataclass(frozen=True)
class Sizes:
    """The plans' tables by name, as the buffers a plan reads are counted: pages (pg_class) and live
    rows (the window's table statistics; none where unknown)."""

    pages: Mapping[str, float]
    rows: Mapping[str, float] = field(default_factory=dict)

    def distinct_bound(self, node: dict[str, Any]) -> float | None:
        """At most how many different look-ups a Memoize's input can answer: the fewest rows of a
        table under it (each cached key is one look-up; a key that finds nothing is no costlier)."""
        known = [self.rows[r] for r in _relations_under(node) if self.rows.get(r)]
        return min(known) if known else None


def expected_blocks(
    node: dict[str, Any], sizes: Sizes, loops: float = 1.0, procs: float = 1.0
) -> float:
    """Buffers one run of the plan touches, by the planner's own estimates: each sequential scan reads
    its table, each index scan descends its index and visits a heap page per row, every time its
    loop runs (a nested loop's inner side once per outer row; a hash or a materialized input once; a
    memoized input once per key it caches, at most once per row of its table)."""
    pages = sizes.pages
    kind = node.get("Node Type", "")
    children = node.get("Plans", [])
    rows = float(node.get("Plan Rows", 0.0))
    if kind in ("Gather", "Gather Merge"):
        procs = _processes(node)
    if kind in ("Seq Scan", "Parallel Seq Scan"):
        return pages.get(node.get("Relation Name", ""), 0.0) * loops
    if kind in ("Index Scan", "Index Only Scan", "Bitmap Index Scan"):
        heap = rows if kind == "Index Scan" else rows / 100.0
        return (INDEX_PAGES_PER_LOOP + heap) * loops
    if kind == "Bitmap Heap Scan":
        own = min(pages.get(node.get("Relation Name", ""), 0.0), rows) * loops
        return own + sum(expected_blocks(c, sizes, loops, procs) for c in children)
    if kind == "Nested Loop" and len(children) == 2:
        outer, inner = children
        outer_rows = float(outer.get("Plan Rows", 0.0)) * procs
        return expected_blocks(outer, sizes, loops, procs) + expected_blocks(
            inner, sizes, loops * max(outer_rows, 1.0), procs
        )
    if kind == "Memoize" and children:
        keys = sizes.distinct_bound(node)
        return expected_blocks(children[0], sizes, min(loops, keys) if keys else loops, procs)
    total = 0.0
    for child in children:
        if child.get("Parent Relationship") == "SubPlan":
            total += expected_blocks(child, sizes, loops * max(rows * procs, 1.0), procs)
        elif kind in ("Materialize", "Hash"):
            total += expected_blocks(child, sizes, 1.0, procs)
        else:
            total += expected_blocks(child, sizes, loops, procs)
    return total


@dataclass(frozen=True)
class Pace:
    """How long a unit of plan cost takes on the server, and how many times that a call must take to
    show its plan is not the one that ran."""

    ms_per_unit: float
    factor: float
    measured: bool  # timed on the server now (its CPU queue included), or assumed

    def remark(self) -> str:
        how = "timed on the server now" if self.measured else "assumed (the slowest measured)"
        return f"plan cost paced at {self.ms_per_unit:.4f} ms a unit, {how}"


def assumed_pace(window: WindowEvidence) -> Pace:
    """A past window's pace: MS_PER_COST_UNIT stretched by the sessions queueing for each core (a
    remote target's cores are unknown: one is assumed)."""
    queue = max(1.0, window.mean(ON_CPU) / (window.cpu_count or 1))
    return Pace(MS_PER_COST_UNIT * queue, UNEXPLAINED_FACTOR, measured=False)


def measured_pace(conn: psycopg.Connection[Any], window: WindowEvidence) -> Pace:
    """The server's pace now: the median of PACE_RUNS timed runs of a fixed statement that reads no
    table (the sessions it queues behind for the CPU slow it as they slow the workload's calls). A
    server too busy to finish them within PLAN_TIMEOUT_MS is paced as a past window is."""
    paces = []
    try:
        for _ in range(PACE_RUNS):
            top = scalar(conn, _PACE_SQL)[0]
            paces.append(float(top["Execution Time"]) / max(float(top["Plan"]["Total Cost"]), 1.0))
    except psycopg.errors.QueryCanceled:
        return assumed_pace(window)
    return Pace(statistics.median(paces), CALIBRATED_FACTOR, measured=True)


@dataclass
class Pacer:
    """The pace, got when a call's time is first in question and kept for the window's other
    statements: a window whose calls are short, or whose buffers tell, asks the server nothing."""

    conn: psycopg.Connection[Any] | None  # None: a past window's, assumed
    window: WindowEvidence
    _pace: Pace | None = None

    def __call__(self) -> Pace:
        if self._pace is None:
            self._pace = (
                measured_pace(self.conn, self.window)
                if self.conn is not None
                else assumed_pace(self.window)
            )
        return self._pace


def time_allowance_ms(plan: dict[str, Any], pace: Pace) -> float:
    """How long a call of `plan` takes on this server: its cost at the pace."""
    return float(plan.get("Total Cost", 0.0)) * pace.ms_per_unit


def unexplained(
    plan: dict[str, Any], seen: Observed, sizes: Sizes, window: WindowEvidence, pacer: Pacer
) -> str:
    """Why `plan` cannot be the plan that did what the statement did ('' when it can)."""
    blocks = expected_blocks(plan, sizes)
    if (
        seen.blocks_per_call is not None
        and seen.blocks_per_call >= MIN_UNEXPLAINED_BLOCKS
        and seen.blocks_per_call >= UNEXPLAINED_FACTOR * max(blocks, 1.0)
    ):
        return (
            f"{seen.blocks_per_call:.0f} buffers per call where the plan expects about {blocks:.0f}"
        )
    # Only time on the CPU is bounded by the plan's cost: a window whose sessions wait on locks or
    # I/O takes that share out (the window's, not the statement's own: the samples do not say whose).
    working = seen.ms * (window.wait_share("CPU") if window.waits else 1.0)
    if working < MIN_UNEXPLAINED_MS:
        return ""
    pace = pacer()
    allowance = time_allowance_ms(plan, pace)
    if working >= pace.factor * allowance:
        what = (
            f"running for {seen.running_seconds:.1f} s"
            if seen.ms > seen.ms_per_call
            else f"{seen.ms:.0f} ms per call"
        )
        return (
            f"{what} ({working:.0f} ms of it on the CPU by the window's samples) where the plan"
            f" (cost {plan.get('Total Cost', 0):.0f}) allows about {allowance:.0f} ms"
            f" ({pace.remark()})"
        )
    return ""


def accounts_for(
    plan: dict[str, Any], seen: Observed, sizes: Sizes, window: WindowEvidence, pacer: Pacer
) -> bool:
    """Whether `plan` can have done what the statement did: its buffers and time within reach, its
    buffers not far above what a call read."""
    if unexplained(plan, seen, sizes, window, pacer):
        return False
    # No bound from below by time: a generic plan's estimate for a parameter is rough (`id <= $1` is
    # a third of the table: a loop over 400 customers was planned over 16,667, minutes of cost).
    if seen.blocks_per_call is not None and seen.blocks_per_call >= MIN_UNEXPLAINED_BLOCKS:
        return expected_blocks(plan, sizes) <= UNEXPLAINED_FACTOR * seen.blocks_per_call
    return True


def _shape(plan: dict[str, Any]) -> list[str]:
    return [n.get("Node Type", "") for n in _walk(plan)]


@dataclass
class Catalog:
    """The plans' tables as the catalogue holds them: qualified names, pages, join-key columns."""

    conn: psycopg.Connection[Any]

    def relations(self, plans: list[dict[str, Any]]) -> dict[str, tuple[str, float]]:
        names = sorted(
            {n["Relation Name"] for p in plans for n in _walk(p) if "Relation Name" in n}
        )
        rows = fetch(self.conn, _RELATIONS_SQL, {"names": names})[1]
        return {row[0]: (row[1], float(row[2])) for row in rows}

    def columns(self, keys: list[tuple[str, str]]) -> dict[tuple[str, str], tuple[str, bool]]:
        """(qualified table, column) -> (type, whether an index leads with it)."""
        if not keys:
            return {}
        rows = fetch(
            self.conn,
            _COLUMNS_SQL,
            {"rels": [k[0] for k in keys], "cols": [k[1] for k in keys]},
        )[1]
        return {(row[0], row[1]): (row[2], bool(row[3])) for row in rows}


@dataclass(frozen=True)
class JoinKey:
    alias: str
    column: str
    cast: str  # the type the plan casts the column to, '' when none


def join_keys(condition: str, own: str = "") -> list[tuple[JoinKey, JoinKey]]:
    """The column pairs a join condition compares with `=` (`(o.cust_id = c.id)`,
    `((c.id)::text = o.cust_ref)`), read by PostgreSQL's parser; none when it compares otherwise.
    `own`: the alias of a column named without one (an index condition's own column)."""
    try:
        parsed = parse_sql(f"SELECT 1 WHERE {condition}")
    except ParseError:
        return []
    where = getattr(parsed[0].stmt, "whereClause", None)
    pairs = []
    for expr in conjuncts(where):
        if not isinstance(expr, ast.A_Expr) or [n.sval for n in expr.name or ()] != ["="]:
            continue
        left, right = _column(expr.lexpr, own), _column(expr.rexpr, own)
        if left is not None and right is not None:
            pairs.append((left, right))
    return pairs


def _column(expr: Any, own: str) -> JoinKey | None:
    cast = ""
    if isinstance(expr, ast.TypeCast) and expr.typeName is not None:
        cast = " ".join(n.sval for n in expr.typeName.names or () if n.sval != "pg_catalog")
        expr = expr.arg
    if isinstance(expr, ast.ColumnRef):
        fields = [getattr(f, "sval", "") for f in expr.fields or ()]
        if len(fields) == 1 and own:
            fields = [own, *fields]
        if len(fields) == 2 and all(fields):
            return JoinKey(alias=fields[0], column=fields[1], cast=cast)
    return None


def _aliases(plan: dict[str, Any]) -> dict[str, str]:
    return {
        n.get("Alias", n["Relation Name"]): n["Relation Name"]
        for n in _walk(plan)
        if "Relation Name" in n
    }


def _scan_rows(node: dict[str, Any]) -> float:
    if node.get("Node Type") == "Materialize" and node.get("Plans"):
        return _scan_rows(node["Plans"][0])
    return float(node.get("Plan Rows", 0.0))


class Judged(enum.Enum):
    """Why a plan is the one judged, which decides which of its nested loops are poor joins:
    AS_PLANNED, it accounts for the measured cost (only joins large by its own estimates); FORCED,
    the nested-loop plan accounts for what the default plan cannot (large outer inputs);
    MISESTIMATED, its own nested loops ran over far more rows than it estimates."""

    AS_PLANNED = "as planned"
    FORCED = "forced"
    MISESTIMATED = "misestimated"


def nested_loop_issues(
    plan: dict[str, Any],
    catalog: Catalog,
    relations: Mapping[str, tuple[str, float]],
    judged: Judged,
    why: str,
) -> list[PlanIssue]:
    """The nested loops of `plan` that are poor joins, with their join keys: unindexed, or of
    different types (one side cast to meet the other). Outer rows are the estimate times the
    processes sharing them. As planned, a loop is poor when it scans (no index) outer x inner rows
    reaching NESTED_LOOP_PAIRS; forced, also when its outer input, or the input it scans per outer row,
    reaches LARGE_OUTER_ROWS; misestimated,
    every nested loop (its outer estimate is what the measured cost belies). `why`: the measurement
    that makes this plan the one judged."""
    issues = []
    aliases = _aliases(plan)
    for node, procs in _loops(plan, 1.0):
        children = node.get("Plans", [])
        if node.get("Node Type") != "Nested Loop" or len(children) != 2:
            continue
        outer, inner = children
        outer_rows = float(outer.get("Plan Rows", 0.0)) * procs
        inner_rows = _scan_rows(inner)
        inner_indexed = any("Index" in n.get("Node Type", "") for n in _walk(inner))
        scanned = not inner_indexed and outer_rows * inner_rows >= NESTED_LOOP_PAIRS
        # Forced, a loop is large by either side: many outer rows, or a large input scanned per outer
        # row (a generic plan's few outer rows are an estimate; the measured time is not).
        large = outer_rows >= LARGE_OUTER_ROWS or (
            not inner_indexed and inner_rows >= LARGE_OUTER_ROWS
        )
        if not (scanned or (judged is Judged.FORCED and large) or judged is Judged.MISESTIMATED):
            continue
        lookup = next((n for n in _walk(inner) if "Index Cond" in n), {})
        condition = node.get("Join Filter") or lookup.get("Index Cond", "")
        # An index condition names the inner scan's own column without its alias.
        own = "" if node.get("Join Filter") else lookup.get("Alias", "")
        notes, keys = _describe_keys(condition, own, aliases, relations, catalog)
        inner_kind = "an index lookup" if inner_indexed else f"{inner_rows:.0f} rows scanned"
        issues.append(
            PlanIssue(
                code=RootCauseCode.QUERY_POOR_JOIN,
                relations=sorted(
                    {relations.get(r, (r, 0.0))[0] for r in _relations_under(node)} | set(keys)
                ),
                node=f"Nested Loop ({condition or 'no join condition'})",
                numbers={
                    "outer_rows": round(outer_rows),
                    "inner_rows_per_loop": round(inner_rows),
                },
                detail=f"nested loop over about {outer_rows:.0f} outer rows, {inner_kind} per outer row"
                + (f"; join keys {'; '.join(notes)}" if notes else "")
                + (f"; {why}" if why else ""),
            )
        )
    return issues


def _describe_keys(
    condition: str,
    own: str,
    aliases: Mapping[str, str],
    relations: Mapping[str, tuple[str, float]],
    catalog: Catalog,
) -> tuple[list[str], list[str]]:
    """Each compared pair of join keys in words (type, indexed or not, a cast between types), and
    the keys as `schema.table(column)`."""
    pairs = join_keys(condition, own) if condition else []

    def table(key: JoinKey) -> str:
        return relations.get(aliases.get(key.alias, ""), ("", 0.0))[0]

    columns = catalog.columns([(table(k), k.column) for pair in pairs for k in pair if table(k)])
    notes, objects = [], []
    for pair in pairs:
        described = []
        for key in pair:
            kind, indexed = columns.get((table(key), key.column), ("", False))
            if table(key):
                objects.append(f"{table(key)}({key.column})")
            described.append(
                f"{key.alias}.{key.column}"
                + (f" ({kind}, {'indexed' if indexed else 'no index'})" if kind else "")
            )
        casts = [f"{k.alias}.{k.column} cast to {k.cast}" for k in pair if k.cast]
        notes.append(
            " = ".join(described)
            + (f": keys of different types, {', '.join(casts)}" if casts else "")
        )
    return notes, objects


def _loops(node: dict[str, Any], procs: float) -> Iterator[tuple[dict[str, Any], float]]:
    if node.get("Node Type") in ("Gather", "Gather Merge"):
        procs = _processes(node)
    yield node, procs
    for child in node.get("Plans", []):
        yield from _loops(child, procs)


def _relations_under(node: dict[str, Any]) -> set[str]:
    return {n["Relation Name"] for n in _walk(node) if "Relation Name" in n}


def estimate_remark(plan: dict[str, Any], seen: Observed) -> str:
    """The plan's row estimate against the rows pg_stat_statements reports per call, when far apart
    ('' when close, unknown, or a plain aggregate's single row)."""
    if seen.rows_per_call is None or (
        plan.get("Node Type") == "Aggregate" and "Group Key" not in plan
    ):
        return ""
    estimate = float(plan.get("Plan Rows", 0.0))
    actual = seen.rows_per_call
    high, low = max(estimate, actual), max(min(estimate, actual), 1.0)
    if high < MIN_ESTIMATED_ROWS or high < ESTIMATE_FACTOR * low:
        return ""
    return f"the plan estimates {estimate:.0f} rows, the statement returned {actual:.0f} per call"


@contextmanager
def _settings(conn: psycopg.Connection[Any], settings: Mapping[str, str]) -> Iterator[None]:
    """One transaction with `settings` set locally (names from PLANNER_SETTINGS only)."""
    with conn.transaction():
        for name, value in settings.items():
            if name in PLANNER_SETTINGS:
                conn.execute("SELECT set_config(%s, %s, true)", (name, value))
        yield


def plan_under(
    conn: psycopg.Connection[Any], query: str, version: int, settings: Mapping[str, str]
) -> dict[str, Any]:
    with _settings(conn, settings):
        return generic_plan(conn, query, version, SELECT)


def own_settings(conn: psycopg.Connection[Any]) -> list[str]:
    """The diagnosis session's planner settings away from their built-in defaults, with where each
    comes from (a server, database or role default): they shape every plan it makes, and the
    workload's sessions inherit the same unless they change them."""
    rows = fetch(conn, _OWN_SETTINGS_SQL, {"names": list(PLANNER_SETTINGS)})[1]
    return [f"{row[0]}={row[1]} ({row[2]})" for row in rows]


def role_settings(conn: psycopg.Connection[Any], userid: int) -> dict[str, str]:
    """The planner settings `ALTER ROLE` gave the statement's role (here or everywhere)."""
    rows = fetch(conn, _ROLE_SETTINGS_SQL, {"role": userid, "names": list(PLANNER_SETTINGS)})[1]
    return {row[0]: row[1] for row in rows}


def running_seconds(
    conn: psycopg.Connection[Any], queries: list[str], chars: int
) -> dict[str, float]:
    """How long each of `queries` (texts as the samples cut them) has been running, the longest
    session's: a call that has not finished is known only from here."""
    rows = fetch(conn, _RUNNING_SQL, {"queries": queries, "chars": chars})[1]
    return {row[0]: float(row[1] or 0.0) for row in rows}


def judge(
    conn: psycopg.Connection[Any],
    query: str,
    share: float,
    seen: Observed,
    userid: int | None,
    window: WindowEvidence,
    table_rows: Mapping[str, float],
    visible: list[str],
    pacer: Pacer,
    dead_rows: Mapping[str, float] | None = None,
) -> StatementPlan:
    """Plan one statement, find the plan that accounts for what it did, and judge that plan."""
    refused = refused_text(query, SELECT)
    if refused:  # an insert, an update: nothing to plan, nothing to ask the server
        raise Unplannable(refused)
    version = window.server_version_num
    remarks = [f"planner settings visible here: {', '.join(visible)}"] if visible else []
    role = role_settings(conn, userid) if userid else {}
    if role:
        source = (
            f"the statement's role's settings ({', '.join(f'{k}={v}' for k, v in role.items())})"
        )
        remarks.append(f"planned with {source}")
        plan = plan_under(conn, query, version, role)
    else:
        source = "the generic plan"
        plan = generic_plan(conn, query, version, SELECT)
    catalog = Catalog(conn)
    relations = catalog.relations([plan])
    sizes = Sizes({name: p for name, (_q, p) in relations.items()}, table_rows)
    judged, why = Judged.AS_PLANNED, unexplained(plan, seen, sizes, window, pacer)
    if why:
        remarks.append(f"{source} does not account for the statement: {why}")
        loops = plan_under(conn, query, version, {**role, **NESTED_LOOPS_ONLY})
        if _shape(loops) != _shape(plan) and accounts_for(loops, seen, sizes, window, pacer):
            plan, judged = loops, Judged.FORCED
            forced = (
                "the nested-loop plan (hash and merge joins disabled) accounts for it, so a"
                f" session's planner settings or a misestimate made the statement run it; {NOT_VISIBLE}"
            )
            remarks.append(forced)
            why = f"{why}; {forced}"
        elif "Nested Loop" in _shape(plan):
            judged = Judged.MISESTIMATED
            why = f"{why}: its nested loops ran over far more rows than the plan estimates"
        else:
            remarks.append(NOT_VISIBLE)
    estimate = estimate_remark(plan, seen)
    if estimate:  # said, not judged: a generic plan's estimate for `x < $1` is a third of the table
        remarks.append(estimate)
    issues = [
        issue.model_copy(update={"relations": [_qualified(r, relations) for r in issue.relations]})
        for issue in plan_issues(plan, dict(table_rows), dead_rows)
    ]
    joins = nested_loop_issues(plan, catalog, relations, judged, why)
    if joins:  # the same loops, told with their keys and what made them run
        issues = [i for i in issues if i.code != RootCauseCode.QUERY_POOR_JOIN] + joins
    numbers = seen.numbers()
    numbers["plan_cost"] = round(float(plan.get("Total Cost", 0.0)))
    numbers["expected_buffers"] = round(expected_blocks(plan, sizes))
    for issue in issues:
        issue.numbers = {**numbers, **issue.numbers}
    return StatementPlan(
        query=query,
        share=share,
        queryid=seen.queryid,
        issues=issues,
        remarks=remarks,
        numbers=numbers,
    )


def _qualified(name: str, relations: Mapping[str, tuple[str, float]]) -> str:
    """`table` or `table(column, ...)` as the catalogue names it (`schema.table(column, ...)`)."""
    table, bracket, rest = name.partition("(")
    return relations[table][0] + bracket + rest if table in relations else name


def judge_statements(
    target: PostgresTarget,
    window: WindowEvidence,
    table_rows: Mapping[str, float] | None = None,
    query_chars: int = EXPLAINED_QUERY_CHARS,
    *,
    live: bool = True,
    dead_rows: Mapping[str, float] | None = None,
) -> list[StatementPlan]:
    """The heaviest statements of `window` (at most TOP_STATEMENTS by share of its time), each planned
    under PLAN_TIMEOUT_MS and judged against what it did per call (see the module's docstring). A
    `live` window's running statements are timed now; a past window's are not (what runs now is not
    what ran then)."""
    candidates = statement_candidates(window)
    if not candidates:
        return []
    results = []
    with target.session(statement_timeout_ms=PLAN_TIMEOUT_MS) as conn:
        visible = own_settings(conn)
        pacer = Pacer(conn if live else None, window)
        running = (
            running_seconds(conn, [q for q, _ in candidates if q in window.running], query_chars)
            if live
            else {}
        )
        for query, share in candidates:
            seen = observed(window, query, running)
            userid = next((s.userid for s in window.statements if s.query == query), None)
            try:
                results.append(
                    judge(
                        conn,
                        query,
                        share,
                        seen,
                        userid,
                        window,
                        table_rows or {},
                        visible,
                        pacer,
                        dead_rows,
                    )
                )
            except Unplannable as exc:
                if str(exc).startswith(
                    FOREIGN_CODE
                ):  # a heavy statement the diagnosis could not look into
                    results.append(
                        StatementPlan(
                            query=query,
                            share=share,
                            queryid=seen.queryid,
                            error=f"{NOT_EXPLAINED}: {exc}",
                        )
                    )
            except psycopg.Error as exc:
                results.append(
                    StatementPlan(
                        query=query,
                        share=share,
                        queryid=seen.queryid,
                        error=str(exc).splitlines()[0],
                    )
                )
    return results
