"""Bloat estimates: pages a table or btree index occupies beyond what its rows need.

The estimate is the classic one (check_postgres, pg_gather, postgres-checkup): expected pages
from the row count and the average row width in pg_stats, aligned to 8 bytes, against the pages
the relation really has. It is screening, not proof (confirm with pgstattuple before a rebuild),
and it is only made when pg_stats covers every column: a hidden column would shrink the expected
width and invent bloat.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dbcrew.models import Finding, Severity
from dbcrew.operators.checks.base import Coverage, Judgement, check, rounded, severity_for
from dbcrew.operators.collect.storage import (
    INDEX_WIDTHS,
    TABLE_WIDTHS,
    IndexWidthRow,
    TableWidthRow,
)
from dbcrew.operators.registry import OperatorContext
from dbcrew.operators.sql import qualified
from dbcrew.vocabulary import FindingCode

BLOCK = 8192
PAGE_HEADER = 24
HEAP_TUPLE_HEADER = 23
INDEX_TUPLE_HEADER = 8
ITEM_POINTER = 4
BTREE_SPECIAL = 16


def _align(n: float) -> int:
    return int(math.ceil(n / 8.0) * 8)


@dataclass(frozen=True)
class Estimate:
    expected_pages: int
    wasted_pages: int

    @property
    def wasted_bytes(self) -> int:
        return self.wasted_pages * BLOCK

    def ratio(self, relpages: int) -> float:
        return self.wasted_pages / relpages if relpages else 0.0


def estimate_table(
    relpages: int,
    reltuples: float,
    data_width: float,
    columns: int,
    has_nulls: bool,
    fillfactor: int,
) -> Estimate:
    header = _align(HEAP_TUPLE_HEADER + (math.ceil(columns / 8) if has_nulls else 0))
    per_tuple = header + _align(data_width) + ITEM_POINTER
    usable = (BLOCK - PAGE_HEADER) * fillfactor / 100
    expected = max(1, math.ceil(reltuples * per_tuple / usable))
    return Estimate(expected, max(relpages - expected, 0))


def estimate_btree(relpages: int, reltuples: float, data_width: float, fillfactor: int) -> Estimate:
    per_tuple = INDEX_TUPLE_HEADER + _align(data_width) + ITEM_POINTER
    usable = (BLOCK - PAGE_HEADER - BTREE_SPECIAL) * fillfactor / 100
    expected = 1 + max(1, math.ceil(reltuples * per_tuple / usable))  # plus the metapage
    return Estimate(expected, max(relpages - expected, 0))


def _complete(row: TableWidthRow | IndexWidthRow) -> bool:
    """Analyzed (reltuples known) and every column visible in pg_stats."""
    return row.reltuples >= 0 and row.stats_columns >= row.columns


def _severity(ctx: OperatorContext, ratio: float, wasted: int) -> Severity | None:
    t = ctx.settings.thresholds
    if wasted < t.bloat_min_wasted_bytes:
        return None
    return severity_for(ratio, t.bloat_warning_ratio, t.bloat_critical_ratio)


def _bloat_finding(
    ctx: OperatorContext,
    code: FindingCode,
    row: TableWidthRow | IndexWidthRow,
    name: str,
    est: Estimate,
) -> Finding | None:
    ratio = est.ratio(row.relpages)
    severity = _severity(ctx, ratio, est.wasted_bytes)
    if severity is None:
        return None
    kind = "Table" if code == FindingCode.TABLE_BLOAT else "Index"
    return Finding(
        code=code,
        severity=severity,
        object=qualified(row.schemaname, name),
        title=f"{kind} {name} wastes about {est.wasted_bytes / 2**20:.0f} MiB ({ratio:.0%} of its pages)",
        evidence=rounded(
            {
                "pages": row.relpages,
                "expected_pages": est.expected_pages,
                "wasted_bytes": est.wasted_bytes,
                "ratio": ratio,
                "estimate": "pg_stats widths; confirm with pgstattuple",
            }
        ),
        confidence=0.6,
    )


@check(needs=(TABLE_WIDTHS, INDEX_WIDTHS), codes=(FindingCode.TABLE_BLOAT, FindingCode.INDEX_BLOAT))
def check_bloat(ctx: OperatorContext) -> Judgement:
    """Estimated wasted space of the largest tables and btree indexes, from pg_stats widths."""
    tables = ctx.workspace.rows(TableWidthRow, "SELECT * FROM table_widths")
    indexes = ctx.workspace.rows(IndexWidthRow, "SELECT * FROM index_widths")
    for row in filter(_complete, tables):
        est = estimate_table(
            row.relpages, row.reltuples, row.data_width, row.columns, row.has_nulls, row.fillfactor
        )
        finding = _bloat_finding(ctx, FindingCode.TABLE_BLOAT, row, row.relname, est)
        if finding:
            yield finding.model_copy(
                update={
                    "recommendation": "Confirm with pgstattuple, then rewrite it online with pg_repack (VACUUM FULL locks it for the whole rewrite).",
                }
            )
    for index in filter(_complete, indexes):
        est = estimate_btree(index.relpages, index.reltuples, index.data_width, index.fillfactor)
        finding = _bloat_finding(ctx, FindingCode.INDEX_BLOAT, index, index.indexrelname, est)
        if finding:
            yield finding.model_copy(
                update={
                    "recommendation": "Rebuild it without blocking writes.",
                    "fix_sql": f"REINDEX INDEX CONCURRENTLY {qualified(index.schemaname, index.indexrelname)};",
                }
            )
    partial = sum(not _complete(r) for r in tables) + sum(not _complete(r) for r in indexes)
    looked_at = f"{len(tables)} tables and {len(indexes)} indexes"
    if partial:
        return Coverage(
            looked_at,
            f"{partial} relations not estimated (never analyzed, or columns hidden from"
            f" pg_stats: GRANT SELECT on them, or pg_read_all_data, lets the role see their statistics)",
            # a relation not estimated this time: its earlier finding is not resolved
            (FindingCode.TABLE_BLOAT, FindingCode.INDEX_BLOAT),
        )
    return Coverage(looked_at)
