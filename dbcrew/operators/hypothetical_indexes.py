"""Missing-index advice proven with hypothetical indexes (hypopg), in Dexter's manner.

A heuristic can only guess that an index would help; the planner can say so. For each statement we
take the generic plan's cost, create hypothetical btree indexes on the statement's filter columns
(backend-private memory: no catalog write, nothing other sessions see, allowed in the review's
read-only session), ask for the plan again, and suggest an index only when the cost drops by at
least `min_saving` (Dexter: 50 %). Pass 1 tries one column at a time; pass 2 tries ordered column
pairs on the same table when the best single column still leaves an expensive plan. Plans only:
nothing is ever executed (no EXPLAIN ANALYZE), and hypopg is reset before we return.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import psycopg
from pglast import ast
from psycopg import errors
from psycopg.rows import tuple_row

from dbcrew.errors import DbcrewError
from dbcrew.operators.explain import Unplannable, generic_plan, unplannable, unreadable_relations
from dbcrew.operators.predicates import filter_columns
from dbcrew.operators.sql import execute, qualified, quote_ident, scalar
from dbcrew.targets.postgres import first_line

MIN_COST = 100.0  # Dexter's --min-cost: a cheaper plan is not worth an index, nor a second column
MAX_COLUMNS_PER_TABLE = 8  # bounds pass 2 at 56 ordered pairs per table
PLANNABLE = (ast.SelectStmt, ast.InsertStmt, ast.UpdateStmt, ast.DeleteStmt, ast.MergeStmt)

# Errors that mean "this statement cannot be planned here" (syntax, unknown objects, privileges,
# parameter types, unsupported features, our statement_timeout, a table another session holds
# locked past our lock_timeout), as opposed to a broken session.
UNPLANNABLE = (
    psycopg.ProgrammingError,
    psycopg.DataError,
    psycopg.NotSupportedError,
    errors.QueryCanceled,
    errors.LockNotAvailable,
)


class HypopgMissing(DbcrewError, LookupError):
    """The target database has no hypopg extension: the caller falls back to the heuristic."""


class Statement(NamedTuple):
    """One pg_stat_statements entry (normalized text, $1 ... for constants)."""

    query: str
    calls: int
    total_ms: float


@dataclass(frozen=True)
class PlanCost:
    """The generic plan's total cost, or why there is none (the caller reports the reason); when the
    role was refused, `unreadable` names the tables (schema, name) it may not SELECT."""

    total: float | None
    reason: str | None = None
    unreadable: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Hypopg:
    version: str
    schema: str
    can_hide: bool  # hypopg_hide_index arrived in 1.4

    def fn(self, name: str) -> str:
        """The function's name qualified with the extension's schema (it need not be on the search_path)."""
        return qualified(self.schema, name)


@dataclass(frozen=True)
class Proof:
    """One statement's plan cost without and with the suggested (hypothetical) index."""

    query: str
    calls: int
    total_ms: float
    cost_before: float
    cost_after: float

    @property
    def saving(self) -> float:
        return 1.0 - self.cost_after / self.cost_before


@dataclass(frozen=True)
class Suggestion:
    """An index the planner would use, with the statements that prove it (heaviest first)."""

    schema: str
    table: str
    columns: tuple[str, ...]
    estimated_bytes: int
    proofs: tuple[Proof, ...]
    partitioned: bool = False

    @property
    def ddl(self) -> str:
        """CONCURRENTLY, except on a partitioned table, where PostgreSQL does not support it."""
        how = "CREATE INDEX" if self.partitioned else "CREATE INDEX CONCURRENTLY"
        return f"{how} ON {qualified(self.schema, self.table)} ({', '.join(quote_ident(c) for c in self.columns)});"

    @property
    def cost_before(self) -> float:
        return self.proofs[0].cost_before

    @property
    def cost_after(self) -> float:
        return self.proofs[0].cost_after

    @property
    def saving(self) -> float:
        return self.proofs[0].saving


@dataclass
class IndexAdvice:
    """The indexes hypopg proved worth creating, and the statements it could not help."""

    suggestions: list[Suggestion] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(
        default_factory=list
    )  # (query, why no index was suggested)
    plans: int = 0  # plans asked of the server, hypothetical or not: what the advice cost
    # Tables (schema, name) the role may not SELECT -> statements not planned for it.
    unreadable: dict[tuple[str, str], int] = field(default_factory=dict)


@dataclass(frozen=True)
class HideEffect:
    """What hiding a real index does to each query's plan cost; `reason` says why it was not measured."""

    available: bool
    reason: str | None
    costs: tuple[tuple[str, PlanCost, PlanCost], ...] = ()  # (query, visible, hidden)


def hypopg_status(conn: psycopg.Connection[Any]) -> Hypopg | None:
    """The installed hypopg (version, schema, whether it can hide indexes), or None."""
    with conn.cursor(row_factory=tuple_row) as cur:
        row = cur.execute(
            "SELECT e.extversion, n.nspname,"
            " EXISTS (SELECT 1 FROM pg_proc p WHERE p.pronamespace = e.extnamespace AND p.proname = 'hypopg_hide_index')"
            " FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'hypopg'"
        ).fetchone()
    return Hypopg(version=row[0], schema=row[1], can_hide=row[2]) if row else None


def generic_plan_cost(
    conn: psycopg.Connection[Any], query: str, server_version_num: int
) -> PlanCost:
    """Total cost of the statement's generic plan (operators.explain), or why there is none."""
    try:
        plan = generic_plan(conn, query, server_version_num, PLANNABLE)
    except Unplannable as exc:
        return PlanCost(None, str(exc))
    except errors.InsufficientPrivilege as exc:
        return PlanCost(
            None,
            f"cannot be planned: {type(exc).__name__}: {first_line(exc)}",
            tuple(unreadable_relations(conn, query, PLANNABLE)),
        )
    except UNPLANNABLE as exc:
        return PlanCost(None, f"cannot be planned: {type(exc).__name__}: {first_line(exc)}")
    return PlanCost(float(plan["Total Cost"]))


def advise(
    conn: psycopg.Connection[Any],
    statements: Iterable[Statement | tuple[str, int, float]],
    server_version_num: int,
    min_saving: float = 0.5,
    indexed: Mapping[tuple[str, str], Sequence[Sequence[str]]] | None = None,
) -> IndexAdvice:
    """Indexes that cut the generic-plan cost of the statements by at least `min_saving` (0.5 = 50 %).

    `statements`: (normalized query, calls, total_ms), e.g. the top of pg_stat_statements.
    `indexed`: for each (schema, table), the key columns of its valid, non-partial, plain-column
    btree indexes (as the workspace's index_stats has them); a candidate whose columns already lead
    one is not tried. Tables it does not name are read from the catalog.
    Returns one Suggestion per index (its proofs: every statement it serves, heaviest first) and
    the statements skipped with the reason. Raises HypopgMissing when the database has no hypopg.
    """
    hypo = hypopg_status(conn)
    if hypo is None:
        raise HypopgMissing("the hypopg extension is not installed in this database")
    advisor = _Advisor(conn, hypo, server_version_num, min_saving, dict(indexed or {}))
    try:
        advisor.reset()
        for stmt in statements:
            advisor.consider(Statement(*stmt))
        advisor.fold_into_wider()
    finally:
        advisor.reset()
    return advisor.advice()


def hide_index_effect(
    conn: psycopg.Connection[Any], index_oid: int, queries: Iterable[str], server_version_num: int
) -> HideEffect:
    """Each query's plan cost with the real index visible and hidden (hypopg 1.4+ hypopg_hide_index).

    This is what dropping the index (say, a duplicate) would do to those plans, without dropping it.
    """
    hypo = hypopg_status(conn)
    if hypo is None:
        return HideEffect(False, "unavailable: hypopg is not installed")
    if not hypo.can_hide:
        return HideEffect(False, f"unavailable: hypopg {hypo.version} < 1.4 (no hypopg_hide_index)")
    costs = []
    for query in queries:
        visible = generic_plan_cost(conn, query, server_version_num)
        execute(conn, f"SELECT {hypo.fn('hypopg_hide_index')}(%s)", [index_oid])
        try:
            hidden = generic_plan_cost(conn, query, server_version_num)
        finally:
            execute(conn, f"SELECT {hypo.fn('hypopg_unhide_index')}(%s)", [index_oid])
        costs.append((query, visible, hidden))
    return HideEffect(True, None, tuple(costs))


@dataclass(frozen=True)
class _Table:
    schema: str
    name: str
    columns: frozenset[str]
    partitioned: bool = False


Index = tuple[
    _Table, tuple[str, ...]
]  # a table and the key columns of a (hypothetical) btree on it


@dataclass
class _Advisor:
    """One advise() run: caches of the tables and indexes it looked up, and the proofs it gathered."""

    conn: psycopg.Connection[Any]
    hypo: Hypopg
    version: int
    min_saving: float
    indexed: dict[
        tuple[str, str], Sequence[Sequence[str]]
    ]  # read from the catalog for tables not given
    tables: dict[str, _Table | None] = field(default_factory=dict)
    found: dict[Index, tuple[int, list[Proof]]] = field(default_factory=dict)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    plans: int = 0
    refused: dict[Index, str] = field(
        default_factory=dict
    )  # hypothetical indexes hypopg would not create, and why
    unreadable: dict[tuple[str, str], int] = field(default_factory=dict)

    def reset(self) -> None:
        execute(self.conn, f"SELECT {self.hypo.fn('hypopg_reset')}()")

    def consider(self, stmt: Statement) -> None:
        """Pass 1 (one column at a time), then pass 2 (ordered pairs) when the plan is still expensive."""
        why = unplannable(self.conn, stmt.query, PLANNABLE)
        if why is not None:
            return self._skip(stmt, why)
        candidates = self._candidates(stmt.query)
        singles = [
            (t, (c,)) for t, cols in candidates.items() for c in cols if not self._served(t, (c,))
        ]
        if not candidates:
            return self._skip(stmt, "no filter columns on a known table")
        if not singles:
            return self._skip(stmt, "every filter column already leads a btree index")
        before = self._plan(stmt.query)
        for table in before.unreadable:
            self.unreadable[table] = self.unreadable.get(table, 0) + 1
        if before.total is None:
            return self._skip(stmt, before.reason or "no plan")
        if before.total < MIN_COST:
            return self._skip(
                stmt, f"plan cost {before.total:.1f} < {MIN_COST:.0f}: not worth an index"
            )
        best = self._cheapest(stmt.query, singles)
        if best is not None and best[2] > MIN_COST:
            pairs = [
                (t, pair)
                for t, cols in candidates.items()
                for pair in itertools.permutations(cols, 2)
                if not self._served(t, pair)
            ]
            best_pair = self._cheapest(stmt.query, pairs)
            if best_pair is not None and best_pair[2] <= best[2] * (1.0 - self.min_saving):
                best = best_pair
        if best is None:
            why = "; ".join(
                sorted({self.refused[(t, c)] for t, c in singles if (t, c) in self.refused})
            )
            return self._skip(
                stmt,
                f"no hypothetical index could be planned: {why or 'the statement no longer plans'}",
            )
        index, size, cost = best
        if cost > before.total * (1.0 - self.min_saving):
            return self._skip(
                stmt,
                f"best hypothetical index {index[1]} saves only {1.0 - cost / before.total:.0%}",
            )
        self.found.setdefault(index, (size, []))[1].append(
            Proof(stmt.query, stmt.calls, stmt.total_ms, before.total, cost)
        )

    def fold_into_wider(self) -> None:
        """A suggested single column that leads a suggested pair is served by the pair: merge them when
        the pair, measured on those statements, still saves enough (Dexter drops the narrower one)."""
        for key in [k for k in self.found if len(k[1]) == 1]:
            wider = next(
                (
                    k
                    for k in self.found
                    if k[0] == key[0] and len(k[1]) > 1 and k[1][0] == key[1][0]
                ),
                None,
            )
            if wider is None:
                continue
            remeasured = []
            for proof in self.found[key][1]:
                result = self._measure(proof.query, *wider)
                if result is None or result[2] > proof.cost_before * (1.0 - self.min_saving):
                    break
                remeasured.append(
                    Proof(proof.query, proof.calls, proof.total_ms, proof.cost_before, result[2])
                )
            else:
                self.found[wider][1].extend(remeasured)
                del self.found[key]

    def advice(self) -> IndexAdvice:
        suggestions = []
        for (table, columns), (size, proofs) in self.found.items():
            proofs.sort(key=lambda p: p.total_ms, reverse=True)
            suggestions.append(
                Suggestion(
                    table.schema, table.name, columns, size, tuple(proofs), table.partitioned
                )
            )
        suggestions.sort(key=lambda s: sum(p.total_ms for p in s.proofs), reverse=True)
        return IndexAdvice(suggestions, list(self.skipped), self.plans, dict(self.unreadable))

    def _plan(self, query: str) -> PlanCost:
        self.plans += 1
        return generic_plan_cost(self.conn, query, self.version)

    def _skip(self, stmt: Statement, reason: str) -> None:
        self.skipped.append((stmt.query, reason))

    def _candidates(self, query: str) -> dict[_Table, list[str]]:
        """Filter columns per table, at most MAX_COLUMNS_PER_TABLE each (bounds pass 2)."""
        candidates: dict[_Table, list[str]] = {}
        for col in filter_columns(query):
            name = qualified(col.schema, col.table) if col.schema else quote_ident(col.table)
            if name not in self.tables:
                self.tables[name] = _resolve_table(self.conn, name)
            table = self.tables[name]
            if table is None or col.column not in table.columns:
                continue
            columns = candidates.setdefault(table, [])
            if col.column not in columns and len(columns) < MAX_COLUMNS_PER_TABLE:
                columns.append(col.column)
        return candidates

    def _served(self, table: _Table, columns: tuple[str, ...]) -> bool:
        """Whether an existing btree already leads with these columns (a hypothetical one proves nothing new)."""
        key = (table.schema, table.name)
        if key not in self.indexed:
            self.indexed[key] = _btree_columns(self.conn, table)
        return any(tuple(index[: len(columns)]) == columns for index in self.indexed[key])

    def _cheapest(
        self, query: str, trials: Sequence[tuple[_Table, tuple[str, ...]]]
    ) -> tuple[Index, int, float] | None:
        results = [
            r for r in (self._measure(query, t, cols) for t, cols in trials) if r is not None
        ]
        return min(results, key=lambda r: r[2], default=None)

    def _measure(
        self, query: str, table: _Table, columns: tuple[str, ...]
    ) -> tuple[Index, int, float] | None:
        """The statement's cost with one hypothetical btree on table(columns), and its estimated size."""
        ddl = f"CREATE INDEX ON {qualified(table.schema, table.name)} ({', '.join(quote_ident(c) for c in columns)})"
        try:
            oid = scalar(
                self.conn,
                f"SELECT indexrelid FROM {self.hypo.fn('hypopg_create_index')}(%s)",
                [ddl],
            )
        except (
            psycopg.ProgrammingError
        ) as exc:  # e.g. a json column: no default btree operator class
            self.refused[(table, columns)] = first_line(exc)
            return None
        try:
            size = int(
                scalar(self.conn, f"SELECT {self.hypo.fn('hypopg_relation_size')}(%s)", [oid])
            )
            cost = self._plan(query)
        finally:
            self.reset()
        return ((table, columns), size, cost.total) if cost.total is not None else None


def _btree_columns(conn: psycopg.Connection[Any], table: _Table) -> list[list[str]]:
    """Key columns of the table's valid, non-partial btree indexes on plain columns (attnum 0 = expression)."""
    with conn.cursor(row_factory=tuple_row) as cur:
        rows = cur.execute(
            "SELECT array_agg(a.attname ORDER BY k.ord) FROM pg_index i"
            " JOIN pg_class ic ON ic.oid = i.indexrelid JOIN pg_am am ON am.oid = ic.relam"
            " CROSS JOIN LATERAL unnest(i.indkey[0:i.indnkeyatts - 1]) WITH ORDINALITY AS k(attnum, ord)"
            " LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum"
            " WHERE i.indrelid = %s::regclass AND i.indisvalid AND i.indpred IS NULL AND am.amname = 'btree'"
            " GROUP BY i.indexrelid HAVING bool_and(k.attnum <> 0)",
            [qualified(table.schema, table.name)],
        ).fetchall()
    return [list(r[0]) for r in rows]


def _resolve_table(conn: psycopg.Connection[Any], name: str) -> _Table | None:
    """The table a statement names, through the session's search_path; None if it is not a table here."""
    with conn.cursor(row_factory=tuple_row) as cur:
        row = cur.execute(
            "SELECT n.nspname, c.relname, c.relkind = 'p', array(SELECT attname FROM pg_attribute"
            "  WHERE attrelid = c.oid AND attnum > 0 AND NOT attisdropped)"
            " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE c.oid = to_regclass(%s) AND c.relkind IN ('r', 'p', 'm')",
            [name],
        ).fetchone()
    return _Table(row[0], row[1], frozenset(row[3]), row[2]) if row else None
