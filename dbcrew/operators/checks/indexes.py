"""Index checks: unused, duplicate, invalid, foreign keys without an index, missing indexes."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from dbcrew.artifacts import declare
from dbcrew.models import Finding, Severity
from dbcrew.operators.checks.base import Coverage, Judgement, check, rounded
from dbcrew.operators.collect.catalog import FOREIGN_KEYS, ForeignKeyRow
from dbcrew.operators.predicates import filter_columns
from dbcrew.operators.registry import OperatorContext
from dbcrew.operators.sql import name_list, qualified, quote_ident
from dbcrew.operators.stat_views import (
    DATABASE_STATS,
    INDEX_STATS,
    STATEMENTS,
    TABLE_STATS,
    DatabaseStatsRow,
    IndexStatsRow,
    StatementRow,
    TableStatsRow,
)
from dbcrew.vocabulary import FindingCode

DAY = 86_400.0


# The tables dbcrew/operators/advise.py lands (ADVICE_COLUMNS, HIDE_COLUMNS, UNREADABLE_COLUMNS): their keys and models live
# here, beside their only reader, because advise imports this module (find_duplicates).
INDEX_ADVICE = declare("index_advice")  # IndexAdviceRow
INDEX_HIDE_EFFECTS = declare("index_hide_effects")  # HideEffectRow
INDEX_ADVICE_UNREADABLE = declare("index_advice_unreadable")  # UnreadableTableRow


@dataclass(frozen=True, slots=True)
class IndexAdviceRow:
    """A row of `index_advice`: an index hypopg proved the planner would use; `columns` a JSON array."""

    schemaname: str
    relname: str
    columns: str
    ddl: str
    query: str
    calls: int
    total_ms: float
    cost_before: float
    cost_after: float
    saving: float
    statements: int
    estimated_bytes: int


@dataclass(frozen=True, slots=True)
class UnreadableTableRow:
    """A row of `index_advice_unreadable`: a table whose statements the role could not plan (EXPLAIN
    needs SELECT on it), how many, and the GRANT that lets it."""

    schemaname: str
    relname: str
    statements: int
    grant_sql: str


@dataclass(frozen=True, slots=True)
class HideEffectRow:
    """A row of `index_hide_effects`: what hiding a duplicate index did to the plans of its table's statements."""

    indexrelid: int
    available: bool
    summary: str


@dataclass(frozen=True, slots=True)
class IndexCount:
    """A row of INDEX_COUNT_SQL: a table's indexes, their scans, their names least used first."""

    relid: int
    indexes: int
    scans: int
    names: list[str]


INDEX_COUNT_SQL = (
    "SELECT relid, count(*) AS indexes, sum(idx_scan) AS scans, list(indexrelname ORDER BY idx_scan) AS names"
    " FROM index_stats GROUP BY relid HAVING count(*) >= ?"
)


@dataclass
class Usage:
    """What the statements filtering on one column cost, summed (the heuristic's evidence)."""

    query: str
    calls: int = 0
    total_ms: float = 0.0


def _key_columns(row: IndexStatsRow) -> list[str]:
    return name_list(row.column_names)


def _stats_age_seconds(ctx: OperatorContext) -> float:
    rows = ctx.workspace.rows(DatabaseStatsRow, "SELECT * FROM database_stats")
    return rows[0].stats_age_seconds if rows else 0.0


@check(
    needs=(INDEX_STATS.table, DATABASE_STATS.table),
    codes=(FindingCode.INDEX_UNUSED,),
    counted=(FindingCode.INDEX_UNUSED,),
)
def check_unused_indexes(ctx: OperatorContext) -> Judgement:
    """Indexes never scanned since the statistics began, excluding those backing constraints.

    The verdict depends on how old the statistics are: younger than the threshold, it is info only.
    """
    t = ctx.settings.thresholds
    age = _stats_age_seconds(ctx)
    mature = age >= t.unused_index_min_stats_age_days * DAY
    rows = ctx.workspace.rows(
        IndexStatsRow,
        "SELECT * FROM index_stats WHERE idx_scan = 0 AND NOT indisunique AND NOT indisprimary"
        " AND NOT backs_constraint AND indisvalid AND index_bytes >= ?",
        [t.unused_index_min_bytes],
    )
    for row in rows:
        yield Finding(
            code=FindingCode.INDEX_UNUSED,
            severity=Severity.WARNING if mature else Severity.INFO,
            object=qualified(row.schemaname, row.indexrelname),
            title=f"Index {row.indexrelname} on {row.relname} has not been scanned in {age / DAY:.1f} days of statistics",
            evidence={
                "idx_scan": row.idx_scan,
                "index_bytes": row.index_bytes,
                "stats_age_days": round(age / DAY, 2),
            },
            recommendation="Check replicas too (their scans are counted separately) before dropping it."
            + ("" if mature else " Statistics are too young for a verdict."),
            fix_sql=f"DROP INDEX CONCURRENTLY {qualified(row.schemaname, row.indexrelname)};"
            if mature
            else None,
            confidence=0.8 if mature else 0.3,
        )
    return Coverage(f"{len(rows)} never-scanned indexes")


def _same_shape(a: IndexStatsRow, b: IndexStatsRow) -> bool:
    return (a.method, a.expressions, a.predicate) == (b.method, b.expressions, b.predicate)


def _is_prefix(short: list[str], long: list[str]) -> bool:
    return len(short) <= len(long) and long[: len(short)] == short


def find_duplicates(rows: list[IndexStatsRow]) -> list[tuple[IndexStatsRow, IndexStatsRow]]:
    """(redundant, keeper) pairs among valid indexes: equal, or a leading prefix, with the same
    method, opclasses, expressions and predicate. Constraint-backing indexes are never redundant."""
    by_table: dict[int, list[IndexStatsRow]] = defaultdict(list)
    for row in rows:
        by_table[row.relid].append(row)
    pairs = []
    for indexes in by_table.values():
        for redundant in indexes:
            if redundant.indisprimary or redundant.backs_constraint:
                continue
            cols = _key_columns(redundant)
            classes = redundant.indclass.split()
            for keeper in indexes:
                if keeper is redundant or not _same_shape(redundant, keeper):
                    continue
                kcols, kclasses = _key_columns(keeper), keeper.indclass.split()
                if not (_is_prefix(cols, kcols) and _is_prefix(classes, kclasses)):
                    continue
                if cols == kcols:
                    # Exact twins: keep the unique or constraint-backing one, else report the greater name.
                    if redundant.indisunique and not keeper.indisunique:
                        continue
                    keeper_protected = (
                        keeper.indisprimary
                        or keeper.backs_constraint
                        or (keeper.indisunique and not redundant.indisunique)
                    )
                    if not keeper_protected and redundant.indexrelname < keeper.indexrelname:
                        continue
                elif redundant.indisunique:
                    continue  # unique on fewer columns enforces something the wider index does not
                pairs.append((redundant, keeper))
                break
    return pairs


@check(needs=(INDEX_STATS.table,), uses=(INDEX_HIDE_EFFECTS,), codes=(FindingCode.INDEX_DUPLICATE,))
def check_duplicate_indexes(ctx: OperatorContext) -> Judgement:
    """Indexes equal to, or a leading prefix of, another index with the same method, opclasses and predicate.

    When hypopg could hide the index, the evidence says what that did to the plans of the
    statements on its table (the what-if of dropping it).
    """
    rows = ctx.workspace.rows(IndexStatsRow, "SELECT * FROM index_stats WHERE indisvalid")
    effects: dict[int, HideEffectRow] = {}
    if ctx.workspace.has(INDEX_HIDE_EFFECTS):
        effects = {
            r.indexrelid: r
            for r in ctx.workspace.rows(HideEffectRow, "SELECT * FROM index_hide_effects")
        }
    for redundant, keeper in find_duplicates(rows):
        cols, kcols = _key_columns(redundant), _key_columns(keeper)
        name = qualified(redundant.schemaname, redundant.indexrelname)
        evidence: dict[str, Any] = {
            "index": redundant.indexdef,
            "covered_by": keeper.indexdef,
            "index_bytes": redundant.index_bytes,
        }
        effect = effects.get(redundant.indexrelid)
        if effect is not None:
            evidence = {**evidence, "if_dropped": effect.summary}
        yield Finding(
            code=FindingCode.INDEX_DUPLICATE,
            severity=Severity.WARNING,
            object=name,
            title=f"Index {redundant.indexrelname} ({', '.join(cols)}) is covered by {keeper.indexrelname} ({', '.join(kcols)})",
            evidence=evidence,
            recommendation=f"Drop it; {keeper.indexrelname} serves the same lookups.",
            fix_sql=f"DROP INDEX CONCURRENTLY {name};",
        )
    return Coverage(f"{len(rows)} valid indexes")


@check(
    needs=(INDEX_STATS.table,), codes=(FindingCode.INDEX_INVALID,), looked_at="index validity flags"
)
def check_invalid_indexes(ctx: OperatorContext) -> Judgement:
    """Indexes left invalid by a failed CREATE INDEX CONCURRENTLY: they cost writes and serve no reads."""
    for row in ctx.workspace.rows(IndexStatsRow, "SELECT * FROM index_stats WHERE NOT indisvalid"):
        yield Finding(
            code=FindingCode.INDEX_INVALID,
            severity=Severity.WARNING,
            object=qualified(row.schemaname, row.indexrelname),
            title=f"Index {row.indexrelname} on {row.relname} is invalid",
            evidence={"index": row.indexdef},
            recommendation="Drop it and build it again (REINDEX INDEX CONCURRENTLY also works).",
            fix_sql=f"DROP INDEX CONCURRENTLY {qualified(row.schemaname, row.indexrelname)};",
        )
    return None


@check(needs=(FOREIGN_KEYS, INDEX_STATS.table), codes=(FindingCode.FK_WITHOUT_INDEX,))
def check_fk_without_index(ctx: OperatorContext) -> Judgement:
    """Foreign keys whose referencing columns are not the leading columns of any valid index."""
    leading: dict[int, list[list[str]]] = defaultdict(list)
    for row in ctx.workspace.rows(
        IndexStatsRow, "SELECT * FROM index_stats WHERE indisvalid AND predicate = ''"
    ):
        leading[row.relid].append(_key_columns(row))
    held = INDEX_STATS.held
    # A table whose indexes could not be read (held by another session's lock) is not judged.
    fks = ctx.workspace.rows(
        ForeignKeyRow,
        f"SELECT * FROM foreign_keys WHERE relid NOT IN (SELECT relid FROM {held})"
        if held is not None and ctx.workspace.has(held)
        else "SELECT * FROM foreign_keys",
    )
    for fk in fks:
        cols = name_list(fk.column_names)
        if any(sorted(index[: len(cols)]) == sorted(cols) for index in leading[fk.relid]):
            continue
        table = qualified(fk.schemaname, fk.relname)
        obj = table + f"({', '.join(quote_ident(c) for c in cols)})"
        yield Finding(
            code=FindingCode.FK_WITHOUT_INDEX,
            severity=Severity.WARNING,
            object=obj,
            title=f"Foreign key {fk.conname} -> {fk.referenced} has no index on its columns",
            evidence={"constraint": fk.conname, "columns": cols, "references": fk.referenced},
            recommendation="Index the referencing columns: deletes and key updates on the referenced table scan this one otherwise.",
            fix_sql=f"CREATE INDEX CONCURRENTLY ON {table} ({', '.join(quote_ident(c) for c in cols)});",
        )
    return Coverage(f"{len(fks)} foreign keys")


def _proven(ctx: OperatorContext) -> Generator[Finding, None, int]:
    """Findings from the hypothetical-index advice: only indexes the planner showed it would use."""
    rows = ctx.workspace.rows(IndexAdviceRow, "SELECT * FROM index_advice ORDER BY total_ms DESC")
    for row in rows:
        columns = name_list(row.columns)
        yield Finding(
            code=FindingCode.INDEX_MISSING,
            severity=Severity.WARNING,
            object=qualified(row.schemaname, row.relname)
            + f"({', '.join(quote_ident(c) for c in columns)})",
            title=f"An index on {row.relname}({', '.join(columns)}) cuts the plan cost of {row.statements} statement(s) by {row.saving:.0%}",
            evidence=rounded(
                {
                    "query": row.query,
                    "calls": row.calls,
                    "total_ms": row.total_ms,
                    "proposed_index": row.ddl,
                    "cost_before": row.cost_before,
                    "cost_after": row.cost_after,
                    "saving": row.saving,
                    "estimated_bytes": row.estimated_bytes,
                    "proof": "hypothetical index (hypopg), generic plan",
                }
            ),
            recommendation="Create the index; the planner uses it for these statements (hypothetical-index proof).",
            fix_sql=row.ddl,
            confidence=0.9,
        )
    return len(rows)


@check(
    needs=(TABLE_STATS.table, INDEX_STATS.table),
    uses=(STATEMENTS.table, INDEX_ADVICE, INDEX_ADVICE_UNREADABLE),
    codes=(FindingCode.INDEX_MISSING,),
    counted=(FindingCode.INDEX_MISSING,),
)
def check_missing_indexes(ctx: OperatorContext) -> Judgement:
    """Indexes the top statements need: proven with hypothetical indexes when hypopg ran, else a heuristic.

    The heuristic: large tables read mostly by sequential scans, the column from the filters of
    their statements (lower confidence); without pg_stat_statements it names only the table. When
    hypopg ran but the role could not plan the statements of some tables (EXPLAIN needs SELECT on
    them), the heuristic judges those tables, and the check is partial: the proof is missing there.
    """
    if not ctx.workspace.has(INDEX_ADVICE):
        scanned = yield from _heuristic(ctx, None)
        return Coverage(
            f"{scanned} sequentially scanned large tables",
            "heuristic suggestions: CREATE EXTENSION hypopg lets the review prove them with hypothetical indexes",
        )
    proven = yield from _proven(ctx)
    unreadable = (
        {
            (r.schemaname, r.relname)
            for r in ctx.workspace.rows(UnreadableTableRow, "SELECT * FROM index_advice_unreadable")
        }
        if ctx.workspace.has(INDEX_ADVICE_UNREADABLE)
        else set()
    )
    if not unreadable:
        return Coverage(f"{proven} hypopg-proven suggestions")
    scanned = yield from _heuristic(ctx, unreadable)
    return Coverage(
        f"{proven} hypopg-proven suggestions, and {scanned} sequentially scanned large tables"
        f" among the {len(unreadable)} the role could not plan statements on",
        f"the sequential-scan heuristic judged {len(unreadable)} table(s) whose statements could"
        " not be explained (no proof by hypothetical index there)",
        (FindingCode.INDEX_MISSING,),
    )


def _heuristic(
    ctx: OperatorContext, only: set[tuple[str, str]] | None
) -> Generator[Finding, None, int]:
    """Large tables read mostly by sequential scans (all, or `only` these (schema, table)), with
    the filter column their statements use most; how many such tables there were."""
    t = ctx.settings.thresholds
    tables = ctx.workspace.rows(
        TableStatsRow,
        "SELECT * FROM table_stats WHERE n_live_tup >= ? AND seq_scan >= ? AND seq_tup_read / greatest(seq_scan, 1) >= ?"
        " AND seq_tup_read > idx_tup_fetch",
        [
            t.missing_index_min_rows,
            t.missing_index_min_seq_scans,
            t.missing_index_min_rows_per_scan,
        ],
    )
    if only is not None:
        tables = [row for row in tables if (row.schemaname, row.relname) in only]
    indexed: dict[int, list[list[str]]] = defaultdict(list)
    for row in ctx.workspace.rows(IndexStatsRow, "SELECT * FROM index_stats WHERE indisvalid"):
        indexed[row.relid].append(_key_columns(row))
    statements = (
        ctx.workspace.rows(
            StatementRow, "SELECT * FROM statements ORDER BY total_exec_time DESC LIMIT 200"
        )
        if ctx.workspace.has(STATEMENTS.table)
        else []
    )
    # Each statement is parsed once, whatever the number of tables.
    parsed = [(stmt, filter_columns(stmt.query)) for stmt in statements] if tables else []
    for table in tables:
        candidates: dict[str, Usage] = {}
        for stmt, columns in parsed:
            for col in columns:
                if col.table != table.relname or (col.schema and col.schema != table.schemaname):
                    continue
                if any(index and index[0] == col.column for index in indexed[table.relid]):
                    continue
                best = candidates.setdefault(col.column, Usage(stmt.query))
                best.calls += stmt.calls
                best.total_ms += stmt.total_exec_time
        per_scan = table.seq_tup_read / max(table.seq_scan, 1)
        evidence = rounded(
            {
                "seq_scan": table.seq_scan,
                "idx_scan": table.idx_scan,
                "n_live_tup": table.n_live_tup,
                "rows_per_seq_scan": per_scan,
            }
        )
        name = qualified(table.schemaname, table.relname)
        if candidates:
            column, usage = max(candidates.items(), key=lambda kv: kv[1].total_ms)
            yield Finding(
                code=FindingCode.INDEX_MISSING,
                severity=Severity.WARNING,
                object=f"{name}({quote_ident(column)})",
                title=f"{table.relname} is scanned sequentially for filters on {column}",
                evidence={
                    **evidence,
                    "query": usage.query,
                    "calls": usage.calls,
                    "total_ms": round(usage.total_ms, 1),
                    "proposed_index": f"({column})",
                },
                recommendation=f"Create an index on {table.relname}({column}); measure the plan before and after.",
                fix_sql=f"CREATE INDEX CONCURRENTLY ON {name} ({quote_ident(column)});",
                confidence=0.7,
            )
        else:
            yield Finding(
                code=FindingCode.INDEX_MISSING,
                severity=Severity.WARNING,
                object=name,
                title=f"{table.relname} is read mostly by sequential scans of about {per_scan:.0f} rows",
                evidence=evidence,
                recommendation="Find the statements filtering this table (pg_stat_statements) and index their filter columns.",
                confidence=0.4,
            )
    return len(tables)


@check(
    needs=(TABLE_STATS.table, INDEX_STATS.table),
    codes=(FindingCode.INDEXES_TOO_MANY,),
    counted=(FindingCode.INDEXES_TOO_MANY,),
)
def check_index_count(ctx: OperatorContext) -> Judgement:
    """Write-heavy tables carrying many indexes: every insert and non-HOT update writes each of them."""
    t = ctx.settings.thresholds
    counts = {
        r.relid: r for r in ctx.workspace.rows(IndexCount, INDEX_COUNT_SQL, [t.indexes_too_many])
    }
    for table in ctx.workspace.rows(TableStatsRow, "SELECT * FROM table_stats"):
        heavy = counts.get(table.relid)
        if heavy is None:
            continue
        writes = table.n_tup_ins + table.n_tup_upd + table.n_tup_del
        reads = table.seq_scan + table.idx_scan
        share = writes / max(writes + reads, 1)
        if share < t.indexes_too_many_write_share:
            continue
        yield Finding(
            code=FindingCode.INDEXES_TOO_MANY,
            severity=Severity.WARNING,
            object=qualified(table.schemaname, table.relname),
            title=f"{table.relname} carries {heavy.indexes} indexes and is written far more than read ({share:.0%} writes)",
            evidence=rounded(
                {
                    "indexes": heavy.indexes,
                    "row_writes": writes,
                    "scans": reads,
                    "write_share": share,
                    "least_used": heavy.names[:3],
                }
            ),
            recommendation="Drop the least-used indexes (the unused and duplicate findings name candidates); each one slows every write.",
            confidence=0.6,
        )
    return Coverage(f"{len(counts)} tables with {t.indexes_too_many}+ indexes")
