"""What the bloat estimates need: page counts, row counts and per-column widths from pg_stats.

The estimate itself is the check's job (dbcrew/operators/checks/bloat.py). Only relations above a
minimum size are read, largest first and capped, so a database of 10,000 tables costs one
bounded query. pg_stats shows only columns the role may SELECT: `stats_columns` against
`columns` tells the check whether the width is complete.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from dbcrew.artifacts import declare
from dbcrew.models import Role
from dbcrew.operators.registry import Observation, OperatorContext, operator
from dbcrew.operators.sql import fetch, land
from dbcrew.vocabulary import Category

TABLE_WIDTHS_SQL = """
WITH big AS (
  SELECT c.oid, n.nspname, c.relname, c.relpages, c.reltuples, c.reloptions
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  WHERE c.relkind IN ('r', 'm') AND c.relpages >= %(min_pages)s
    AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname !~ '^pg_toast'
  ORDER BY c.relpages DESC LIMIT %(limit)s)
SELECT b.oid::bigint AS relid, b.nspname::text AS schemaname, b.relname::text, b.relpages::bigint AS relpages,
       b.reltuples::float8 AS reltuples,
       coalesce((SELECT option_value::int FROM pg_options_to_table(b.reloptions) WHERE option_name = 'fillfactor'), 100) AS fillfactor,
       (SELECT count(*) FROM pg_attribute a WHERE a.attrelid = b.oid AND a.attnum > 0 AND NOT a.attisdropped) AS columns,
       (SELECT count(*) FROM pg_stats s WHERE s.schemaname = b.nspname AND s.tablename = b.relname AND NOT s.inherited) AS stats_columns,
       (SELECT coalesce(sum((1 - s.null_frac) * s.avg_width), 0) FROM pg_stats s
         WHERE s.schemaname = b.nspname AND s.tablename = b.relname AND NOT s.inherited)::float8 AS data_width,
       (SELECT coalesce(max(s.null_frac), 0) > 0 FROM pg_stats s
         WHERE s.schemaname = b.nspname AND s.tablename = b.relname AND NOT s.inherited) AS has_nulls
FROM big b
"""


@dataclass(frozen=True, slots=True)
class TableWidthRow:
    """A row of `table_widths` (TABLE_WIDTHS_SQL): `reltuples` -1 when never analyzed or vacuumed."""

    relid: int
    schemaname: str
    relname: str
    relpages: int
    reltuples: float
    fillfactor: int
    columns: int
    stats_columns: int
    data_width: float
    has_nulls: bool


INDEX_WIDTHS_SQL = """
WITH big AS (
  SELECT ic.oid, n.nspname, ic.relname AS indexrelname, tc.relname, i.indrelid, i.indkey, ic.relpages, ic.reltuples, ic.reloptions
  FROM pg_index i
  JOIN pg_class ic ON ic.oid = i.indexrelid
  JOIN pg_class tc ON tc.oid = i.indrelid
  JOIN pg_namespace n ON n.oid = ic.relnamespace
  JOIN pg_am am ON am.oid = ic.relam
  WHERE am.amname = 'btree' AND i.indisvalid AND i.indexprs IS NULL AND ic.relpages >= %(min_pages)s
    AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname !~ '^pg_toast'
  ORDER BY ic.relpages DESC LIMIT %(limit)s)
SELECT b.oid::bigint AS indexrelid, b.nspname::text AS schemaname, b.relname::text, b.indexrelname::text,
       b.relpages::bigint AS relpages, b.reltuples::float8 AS reltuples,
       coalesce((SELECT option_value::int FROM pg_options_to_table(b.reloptions) WHERE option_name = 'fillfactor'), 90) AS fillfactor,
       cardinality(b.indkey::int2[]) AS columns,
       (SELECT count(*) FROM pg_attribute a JOIN pg_stats s
          ON s.schemaname = b.nspname AND s.tablename = b.relname AND s.attname = a.attname AND NOT s.inherited
         WHERE a.attrelid = b.indrelid AND a.attnum = ANY (b.indkey::int2[])) AS stats_columns,
       (SELECT coalesce(sum((1 - s.null_frac) * s.avg_width), 0) FROM pg_attribute a JOIN pg_stats s
          ON s.schemaname = b.nspname AND s.tablename = b.relname AND s.attname = a.attname AND NOT s.inherited
         WHERE a.attrelid = b.indrelid AND a.attnum = ANY (b.indkey::int2[]))::float8 AS data_width
FROM big b
"""


@dataclass(frozen=True, slots=True)
class IndexWidthRow:
    """A row of `index_widths` (INDEX_WIDTHS_SQL): a btree index of a plain column list."""

    indexrelid: int
    schemaname: str
    relname: str
    indexrelname: str
    relpages: int
    reltuples: float
    fillfactor: int
    columns: int
    stats_columns: int
    data_width: float


class StorageParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    min_pages: int = Field(128, ge=1, description="smaller relations (1 MiB) are not estimated")
    limit: int = Field(500, ge=1, le=10_000, description="largest relations estimated")


TABLE_WIDTHS = declare("table_widths")  # tables' estimated widths (the bloat estimate's input)
INDEX_WIDTHS = declare("index_widths")  # indexes' estimated widths


@operator(role=Role.EXTRACTOR, category=Category.COLLECT, produces=(TABLE_WIDTHS, INDEX_WIDTHS))
def collect_relation_widths(ctx: OperatorContext, params: StorageParams) -> Observation:
    """Read pages, rows and column widths (pg_stats) of the largest tables and btree indexes, for bloat estimates."""
    args = {"min_pages": params.min_pages, "limit": params.limit}
    with ctx.target.session() as conn:
        t_cols, t_rows = fetch(conn, TABLE_WIDTHS_SQL, args)
        i_cols, i_rows = fetch(conn, INDEX_WIDTHS_SQL, args)
    land(ctx.workspace, TABLE_WIDTHS, t_cols, t_rows)
    land(ctx.workspace, INDEX_WIDTHS, i_cols, i_rows)
    return Observation(
        summary=f"widths: {len(t_rows)} tables and {len(i_rows)} btree indexes of at least {params.min_pages} pages",
        artifacts=[TABLE_WIDTHS, INDEX_WIDTHS],
    )
