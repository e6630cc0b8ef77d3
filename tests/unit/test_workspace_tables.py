"""A workspace table as write_table makes it: the declared column types, every row, texts redacted; `has`
finds exactly the tables landed (dbcrew/workspace.py)."""

from __future__ import annotations

import math
from pathlib import Path

from dbcrew.operators.stat_views import INDEX_STATS, TABLE_STATS
from dbcrew.workspace import Workspace

COLUMNS = [
    ("n", "BIGINT"),
    ("note", "VARCHAR"),
    ("ratio", "DOUBLE"),
    ("at", "TIMESTAMPTZ"),
    ("flag", "BOOLEAN"),
]


def described(ws: Workspace, table: str) -> list[tuple[str, str]]:
    return [(r["column_name"], r["column_type"]) for r in ws.query(f'DESCRIBE "{table}"')]


def test_a_table_has_the_declared_types_and_every_row(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "w.duckdb")
    rows = [
        (1, "plain", 0.5, "2026-11-29 05:00:00+00", True),
        (2, "ALTER ROLE x PASSWORD 'hunter2'", math.nan, None, None),
        (3, None, None, None, False),
    ]
    assert ws.write_table("t", COLUMNS, rows) == 3
    assert described(ws, "t") == [
        (name, typ.replace("TIMESTAMPTZ", "TIMESTAMP WITH TIME ZONE")) for name, typ in COLUMNS
    ]
    kept = ws.query("SELECT n, note, ratio, flag FROM t ORDER BY n")
    assert [r["n"] for r in kept] == [1, 2, 3]
    assert kept[0]["note"] == "plain" and kept[0]["ratio"] == 0.5 and kept[0]["flag"] is True
    assert "hunter2" not in str(kept[1]["note"])  # a secret read from the target is not kept
    assert kept[1]["ratio"] is None  # NaN: no measurement


def test_an_empty_table_is_declared_and_replaced_like_any_other(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "w.duckdb")
    ws.write_table("t", COLUMNS, [(1, "a", 1.0, None, True)])
    assert ws.write_table("t", COLUMNS, []) == 0  # replaced: no row of the earlier write is left
    assert ws.query("SELECT count(*) AS n FROM t") == [{"n": 0}]
    assert [typ for _, typ in described(ws, "t")][:3] == ["BIGINT", "VARCHAR", "DOUBLE"]


def test_has_finds_the_tables_landed_and_no_other(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "w.duckdb")
    assert not ws.has(TABLE_STATS.table)
    ws.write_table(TABLE_STATS.table, COLUMNS, [])
    assert ws.has(TABLE_STATS.table)
    assert not ws.has(INDEX_STATS.table)
    assert Workspace(tmp_path / "w.duckdb").has(
        TABLE_STATS.table
    )  # another handle on the same file
