"""Workspace tables written from row models, for checks tested on their own: the columns and their
DuckDB types come from the model the checks read the table with, so a test table is never missing
a column the collector lands."""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Union, get_args, get_origin, get_type_hints

from dbcrew.workspace import Workspace

DUCKDB_TYPES: dict[Any, str] = {
    bool: "BOOLEAN",
    int: "BIGINT",
    float: "DOUBLE",
    str: "VARCHAR",
    datetime: "TIMESTAMPTZ",
}


def duckdb_type(annotation: Any) -> str:
    """`int` -> BIGINT; `int | None` too (every column is nullable)."""
    if get_origin(annotation) in (Union, types.UnionType):
        (inner,) = [a for a in get_args(annotation) if a is not type(None)]
        return duckdb_type(inner)
    return DUCKDB_TYPES[annotation]


def land_rows(ws: Workspace, table: str, model: type[Any], rows: Sequence[Any]) -> None:
    hints = get_type_hints(model)
    columns = [(f.name, duckdb_type(hints[f.name])) for f in dataclasses.fields(model)]
    ws.write_table(table, columns, [dataclasses.astuple(row) for row in rows])
