"""A per-table look-up run over every table of the catalogue at once: one query, not one round trip a table.

"Which tables have no primary key" is the per-table look-up `table_keys` asked of every table. Each
per-table look-up's SQL (dbcrew/operators/lookups.py, dbcrew/operators/table_lookups.py) names its table by the
bound slots `%(schema_name)s` and `%(table)s`; here the same SQL becomes a LATERAL subquery whose
slots are the columns of a list of the catalogue's user tables, so the server runs the look-up once
per table inside one statement, on the question's read-only session, and nothing of the question
reaches the SQL. The list is bounded: the first `cap` tables by schema and name, and the total is
returned beside it so the answer can say when the cap cut the catalogue.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import psycopg

from dbcrew.operators.lookups import (
    TABLE_COLUMNS_SQL,
    TABLE_INDEXES_SQL,
    TABLE_SIZE_SQL,
    TABLE_STATS_SQL,
    USER_TABLES,
    Rows,
)
from dbcrew.operators.sql import fetch
from dbcrew.operators.table_lookups import TABLE_AUTOVACUUM_SQL, TABLE_KEYS_SQL
from dbcrew.vocabulary import Lookup

TABLE_CAP = 500  # tables one catalogue-wide look-up reads at most

# The per-table look-ups, by the SQL they run for the one table their slots name.
PER_TABLE_SQL: dict[Lookup, str] = {
    Lookup.TABLE_SIZE: TABLE_SIZE_SQL,
    Lookup.TABLE_COLUMNS: TABLE_COLUMNS_SQL,
    Lookup.TABLE_INDEXES: TABLE_INDEXES_SQL,
    Lookup.TABLE_STATS: TABLE_STATS_SQL,
    Lookup.TABLE_KEYS: TABLE_KEYS_SQL,
    Lookup.TABLE_AUTOVACUUM: TABLE_AUTOVACUUM_SQL,
}

_TABLES = f"""
SELECT n.nspname::text AS schema_name, c.relname::text AS table_name, count(*) OVER () AS tables_total
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE {USER_TABLES}
ORDER BY 1, 2 LIMIT %(cap)s
"""
_OWN = ("schema_name", "table_name", "tables_total")


@dataclass
class EveryTable:
    """What one look-up returned for each table it read (a table it found nothing for has no rows)."""

    lookup: Lookup
    rows: dict[tuple[str, str], Rows] = field(default_factory=dict)
    total: int = 0  # user tables in the catalogue; more than len(rows) when the cap cut them

    @property
    def capped(self) -> bool:
        return self.total > len(self.rows)


def every_table_sql(lookup: Lookup) -> str:
    """The look-up's SQL over the first %(cap)s tables: its slots bound to each table's schema and name."""
    per_table = (
        PER_TABLE_SQL[lookup]
        .replace("%(schema_name)s", "t.schema_name")
        .replace("%(table)s", "t.table_name")
    )
    return (
        f"SELECT t.schema_name, t.table_name, t.tables_total, x.* FROM ({_TABLES}) t "
        f"LEFT JOIN LATERAL ({per_table}) x ON true"
    )


def every_table(conn: psycopg.Connection[Any], lookup: Lookup, cap: int = TABLE_CAP) -> EveryTable:
    """Run the per-table `lookup` over the catalogue's first `cap` user tables in one statement."""
    columns, tuples = fetch(conn, every_table_sql(lookup), {"cap": cap})
    names = [c for c, _ in columns]
    out = EveryTable(lookup)
    for values in tuples:
        row: dict[str, Any] = dict(zip(names, values))
        table = (row["schema_name"], row["table_name"])
        out.total = int(row["tables_total"])
        own = {k: v for k, v in row.items() if k not in _OWN}
        found = out.rows.setdefault(table, [])
        if any(v is not None for v in own.values()):
            found.append(own)
    return out
