"""Rows are models: the checks read workspace rows as the dataclasses declared next to the SQL that lands them."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

from dbcrew.workspace import Workspace

CHECKS = Path(__file__).resolve().parents[2] / "dbcrew" / "operators" / "checks"


def string_key_subscripts(source: str) -> list[int]:
    """Lines that read a value by a literal string key: `x["k"]`, `x.get("k")` (a row read as a dict)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, str)
        ) or (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            lines.append(node.lineno)
    return sorted(lines)


def test_the_detector_sees_subscripts_gets_and_those_inside_f_strings():
    source = 'a = row["x"]\nb = row.get("y", 0)\nc = f"{row[\'z\']}"\nd = row.x + rows[0].y + by_name.get(name)\n'
    assert string_key_subscripts(source) == [1, 2, 3]


def test_no_check_reads_a_row_by_a_string_key():
    found = {
        path.name: lines
        for path in sorted(CHECKS.glob("*.py"))
        if (lines := string_key_subscripts(path.read_text()))
    }
    assert found == {}


@dataclass(frozen=True, slots=True)
class Pair:
    name: str
    n: int | None


def test_rows_are_built_by_column_name_leaving_out_undeclared_columns(tmp_path: Path):
    ws = Workspace(tmp_path / "w.duckdb")
    ws.write_table(
        "pairs",
        [("n", "BIGINT"), ("name", "VARCHAR"), ("n_delta", "DOUBLE")],
        [(1, "a", 0.5), (None, "b", None)],
    )
    assert ws.rows(Pair, "SELECT * FROM pairs ORDER BY name") == [Pair("a", 1), Pair("b", None)]


def test_a_declared_column_the_result_lacks_fails(tmp_path: Path):
    ws = Workspace(tmp_path / "w.duckdb")
    ws.write_table("pairs", [("name", "VARCHAR")], [("a",)])
    with pytest.raises(TypeError, match="'n'"):
        ws.rows(Pair, "SELECT * FROM pairs")
