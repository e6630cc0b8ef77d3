"""Look-ups of one table's definition a DBA asks for by name: its keys, and how autovacuum treats it.

They complete dbcrew/operators/lookups.py's per-table answers (size, columns, indexes, vacuum history):
"what is the primary key of orders", "what references customers", "which autovacuum settings does
cart_items override, and when will autovacuum next visit it" each get their own catalogue answer
instead of a neighbour's. Same rules as every look-up: fixed catalogue SQL, names bound as parameters,
the target's read-only session.
"""

from __future__ import annotations

from typing import Any

import psycopg
from pydantic import BaseModel

from dbcrew.models import Role
from dbcrew.operators.lookups import (
    LOOKUP,
    TABLE_WHERE,
    Rows,
    TableSlot,
    absent,
    look_up,
    qualified,
    when,
)
from dbcrew.operators.registry import Observation, operator
from dbcrew.vocabulary import Category

# The table's own constraints, and the foreign keys of other tables that reference it. A table with
# no key still gives one row (kind NULL), so "no keys" and "no such table" read differently.
TABLE_KEYS_SQL = f"""
SELECT k.conname::text AS name, k.contype::text AS kind, pg_get_constraintdef(k.oid) AS definition,
       k.conrelid::regclass::text AS owner, (k.conrelid = c.oid) AS own
FROM pg_class c
LEFT JOIN pg_constraint k ON k.contype IN ('p', 'u', 'f') AND (k.conrelid = c.oid OR (k.contype = 'f' AND k.confrelid = c.oid))
{TABLE_WHERE} AND c.relkind IN ('r', 'p', 'f', 'm')
ORDER BY own DESC, kind, name
"""
_KINDS = {"p": "primary key", "u": "unique constraint", "f": "foreign key"}


def _table_keys(slots: BaseModel, rows: Rows) -> str:
    if not rows:
        return absent("Table", slots)
    own = [r for r in rows if r["kind"] and r["own"]]
    referencing = [r for r in rows if r["kind"] == "f" and not r["own"]]
    primary = [r for r in own if r["kind"] == "p"]
    parts = [
        f"primary key {primary[0]['name']}: {primary[0]['definition']}"
        if primary
        else "no primary key"
    ]
    parts += [
        f"{_KINDS[r['kind']]} {r['name']}: {r['definition']}" for r in own if r["kind"] != "p"
    ]
    text = f"Table {qualified(slots)} has {'; '.join(parts)}."
    if referencing:
        text += " Referenced by: " + "; ".join(
            f"{r['owner']}.{r['name']} {r['definition']}" for r in referencing
        )
        text += "."
    return text


# Every autovacuum parameter a table may override, with the server's value beside the table's own
# (reloptions spell the on/off switch autovacuum_enabled), and what decides the next visit: the
# estimated rows, the dead rows and the rows changed since the last analyze.
TABLE_AUTOVACUUM_SQL = f"""
SELECT s.name::text AS name, current_setting(s.name) AS server_value,
       (SELECT split_part(o, '=', 2) FROM unnest(c.reloptions) o
         WHERE split_part(o, '=', 1) = CASE s.name WHEN 'autovacuum' THEN 'autovacuum_enabled' ELSE s.name END) AS table_value,
       greatest(c.reltuples, 0)::bigint AS estimated_rows, st.n_dead_tup AS dead, st.n_mod_since_analyze AS changed,
       st.last_autovacuum, st.last_autoanalyze
FROM pg_class c CROSS JOIN pg_settings s LEFT JOIN pg_stat_all_tables st ON st.relid = c.oid
{TABLE_WHERE} AND c.relkind IN ('r', 'm', 'p')
  AND s.name IN ('autovacuum', 'autovacuum_vacuum_threshold', 'autovacuum_vacuum_scale_factor',
                 'autovacuum_analyze_threshold', 'autovacuum_analyze_scale_factor',
                 'autovacuum_vacuum_insert_threshold', 'autovacuum_vacuum_insert_scale_factor',
                 'autovacuum_vacuum_cost_delay', 'autovacuum_vacuum_cost_limit',
                 'autovacuum_freeze_max_age', 'autovacuum_freeze_min_age')
ORDER BY s.name
"""


def _option(setting: str) -> str:
    """The storage parameter that overrides a server setting for one table (the switch has its own name)."""
    return "autovacuum_enabled" if setting == "autovacuum" else setting


def _effective(rows: Rows) -> dict[str, str]:
    return {r["name"]: r["table_value"] or r["server_value"] for r in rows}


def _table_autovacuum(slots: BaseModel, rows: Rows) -> str:
    if not rows:
        return absent("Table", slots)
    own = [r for r in rows if r["table_value"] is not None]
    value = _effective(rows)
    first = rows[0]
    overrides = (
        "its own settings: "
        + ", ".join(
            f"{_option(r['name'])}={r['table_value']} (server {r['server_value']})" for r in own
        )
        if own
        else "no setting of its own: the server's apply"
    )
    applied = ", ".join(
        f"{r['name']}={value[r['name']]}" for r in rows if r["name"] != "autovacuum"
    )
    if value["autovacuum"].lower() in ("off", "false"):
        return (
            f"Autovacuum is off for {qualified(slots)}: {overrides}. Its dead rows stay until a manual "
            f"VACUUM (now {_count(first['dead'])} dead; last autovacuum {when(first['last_autovacuum'])})."
        )
    rows_now = first["estimated_rows"]
    vacuum_at = (
        float(value["autovacuum_vacuum_threshold"])
        + float(value["autovacuum_vacuum_scale_factor"]) * rows_now
    )
    analyze_at = (
        float(value["autovacuum_analyze_threshold"])
        + float(value["autovacuum_analyze_scale_factor"]) * rows_now
    )
    return (
        f"Autovacuum on {qualified(slots)}: {overrides} (in effect: {applied}). With about {rows_now:,} rows it vacuums the table "
        f"after {vacuum_at:,.0f} dead rows (now {_count(first['dead'])}) and analyzes it after "
        f"{analyze_at:,.0f} changed rows (now {_count(first['changed'])}); last autovacuum "
        f"{when(first['last_autovacuum'])}, last autoanalyze {when(first['last_autoanalyze'])}."
    )


def _count(value: Any) -> str:
    return "unknown" if value is None else str(value)


@operator(role=Role.EXTRACTOR, category=Category.COLLECT, surfaces=LOOKUP)
def table_keys(conn: psycopg.Connection[Any], params: TableSlot) -> Observation:
    """A table's primary key, unique constraints and foreign keys, and the foreign keys that reference it."""
    return look_up(conn, TABLE_KEYS_SQL, params, _table_keys)


@operator(role=Role.EXTRACTOR, category=Category.COLLECT, surfaces=LOOKUP)
def table_autovacuum(conn: psycopg.Connection[Any], params: TableSlot) -> Observation:
    """How autovacuum treats a table: the settings it overrides, and the dead and changed rows that trigger its next visit."""
    return look_up(conn, TABLE_AUTOVACUUM_SQL, params, _table_autovacuum)
