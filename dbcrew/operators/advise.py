"""Advice proven by the planner: hypothetical indexes (hypopg) for the top statements, and the
what-if of hiding each duplicate index. Runs on the target through the read-only session; the
findings are made by the index checks, which read what this lands in the workspace.
"""

from __future__ import annotations

from collections import defaultdict

from pydantic import BaseModel, ConfigDict, Field

from dbcrew.models import Role
from dbcrew.operators.checks.indexes import (
    INDEX_ADVICE,
    INDEX_ADVICE_UNREADABLE,
    INDEX_HIDE_EFFECTS,
    find_duplicates,
)
from dbcrew.operators.explain import not_explained
from dbcrew.operators.hypothetical_indexes import HideEffect, advise, hide_index_effect
from dbcrew.operators.predicates import filter_columns
from dbcrew.operators.registry import Observation, OperatorContext, operator
from dbcrew.operators.sql import land, name_list, name_list_text, qualified, quote_ident, scalar
from dbcrew.operators.stat_views import INDEX_STATS, STATEMENTS, IndexStatsRow
from dbcrew.vocabulary import Category

ADVICE_COLUMNS = [
    ("schemaname", "VARCHAR"),
    ("relname", "VARCHAR"),
    ("columns", "VARCHAR"),
    ("ddl", "VARCHAR"),
    ("query", "VARCHAR"),
    ("calls", "BIGINT"),
    ("total_ms", "DOUBLE"),
    ("cost_before", "DOUBLE"),
    ("cost_after", "DOUBLE"),
    ("saving", "DOUBLE"),
    ("statements", "INTEGER"),
    ("estimated_bytes", "BIGINT"),
]
HIDE_COLUMNS = [("indexrelid", "BIGINT"), ("available", "BOOLEAN"), ("summary", "VARCHAR")]
UNREADABLE_COLUMNS = [
    ("schemaname", "VARCHAR"),
    ("relname", "VARCHAR"),
    ("statements", "INTEGER"),
    ("grant_sql", "VARCHAR"),
]


class AdviseParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    top_statements: int = Field(
        20, ge=1, le=200, description="statements by total time given to the advisor"
    )


def _indexed(rows: list[IndexStatsRow]) -> dict[tuple[str, str], list[list[str]]]:
    """Key columns of the plain (no expression, no predicate) valid btree indexes, per table."""
    found: dict[tuple[str, str], list[list[str]]] = defaultdict(list)
    for row in rows:
        if (
            row.method == "btree"
            and row.indisvalid
            and not row.predicate
            and not row.expressions
            and row.column_names
        ):
            found[(row.schemaname, row.relname)].append(name_list(row.column_names))
    return found


def _hide_summary(effect: HideEffect) -> str:
    if not effect.available:
        assert effect.reason is not None  # an unmeasured effect always says why
        return effect.reason
    changes = [
        f"{(hidden.total or 0) - (visible.total or 0):+.1f}"
        for _, visible, hidden in effect.costs
        if visible.total is not None
    ]
    if not changes:
        return "no statement on this table could be planned"
    return f"plan cost change with it hidden, per statement on its table: {', '.join(changes)}"


@operator(
    role=Role.TASKER,
    category=Category.ADVISE,
    needs=(STATEMENTS.table, INDEX_STATS.table),
    produces=(INDEX_ADVICE, INDEX_HIDE_EFFECTS, INDEX_ADVICE_UNREADABLE),
    requires=("hypopg",),
)
def advise_indexes(ctx: OperatorContext, params: AdviseParams) -> Observation:
    """Prove missing indexes with hypothetical ones on the top statements' generic plans (hypopg), and measure what hiding each duplicate does."""
    t = ctx.settings.thresholds
    version = ctx.server_version()
    statements = ctx.workspace.query(
        "SELECT query, calls, total_exec_time FROM statements WHERE calls > 0 ORDER BY total_exec_time DESC LIMIT ?",
        [params.top_statements],
    )
    index_rows = ctx.workspace.rows(IndexStatsRow, "SELECT * FROM index_stats")
    with ctx.target.session() as conn:
        role = str(scalar(conn, "SELECT current_user"))
        advice = advise(
            conn,
            [(s["query"], s["calls"], s["total_exec_time"]) for s in statements],
            version,
            min_saving=t.hypo_min_cost_saving,
            indexed=_indexed(index_rows),
        )
        hides = []
        for redundant, _keeper in find_duplicates([r for r in index_rows if r.indisvalid]):
            queries = [
                s["query"]
                for s in statements
                if any(c.table == redundant.relname for c in filter_columns(s["query"]))
            ]
            effect = hide_index_effect(conn, redundant.indexrelid, queries, version)
            hides.append((redundant.indexrelid, effect.available, _hide_summary(effect)))
    rows = [
        (
            s.schema,
            s.table,
            name_list_text(s.columns),
            s.ddl,
            s.proofs[0].query,
            s.proofs[0].calls,
            s.proofs[0].total_ms,
            s.cost_before,
            s.cost_after,
            s.saving,
            len(s.proofs),
            s.estimated_bytes,
        )
        for s in advice.suggestions
    ]
    land(ctx.workspace, INDEX_ADVICE, ADVICE_COLUMNS, rows)
    land(ctx.workspace, INDEX_HIDE_EFFECTS, HIDE_COLUMNS, hides)
    grants = {table: grant_select(table, role) for table in advice.unreadable}
    land(
        ctx.workspace,
        INDEX_ADVICE_UNREADABLE,
        UNREADABLE_COLUMNS,
        [(*table, count, grants[table]) for table, count in sorted(advice.unreadable.items())],
    )
    return Observation(
        summary=f"index advice: {len(rows)} proven of {len(statements)} statements ({advice.plans} plans, {len(advice.skipped)} skipped)",
        artifacts=[INDEX_ADVICE, INDEX_HIDE_EFFECTS, INDEX_ADVICE_UNREADABLE],
        partial="; ".join(
            p
            for p in (
                not_explained(why for _query, why in advice.skipped),
                not_readable(advice.unreadable, grants),
            )
            if p
        ),
    )


def grant_select(table: tuple[str, str], role: str) -> str:
    """The GRANT that lets `role` plan statements on `table` (EXPLAIN checks SELECT on it)."""
    return f"GRANT SELECT ON {qualified(*table)} TO {quote_ident(role)};"


def not_readable(unreadable: dict[tuple[str, str], int], grants: dict[tuple[str, str], str]) -> str:
    """The statements not planned because the role may not read their tables, with the GRANTs that
    fix it: EXPLAIN needs SELECT on every table a statement reads, more than pg_monitor gives."""
    if not unreadable:
        return ""
    tables = ", ".join(f"{qualified(*t)} ({n} statement(s))" for t, n in sorted(unreadable.items()))
    return (
        f"statements not explained: the role may not read {tables}"
        f" ({' '.join(grants[t] for t in sorted(unreadable))} or GRANT pg_read_all_data to it)"
    )
