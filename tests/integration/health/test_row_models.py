"""Each workspace table's row model declares what its collector lands from a real PostgreSQL: the columns
of its SQL, in order, with their types (the window adds a `<counter>_delta` per changed column and
`window_seconds`, which the models leave to the checks' own queries)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, get_type_hints

import dbcrew.operators  # noqa: F401
from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.operators.collect.catalog import (
    ForeignKeyRow,
    HorizonRow,
    SequenceRow,
    SettingRow,
    WraparoundRow,
    collect_schema,
    collect_settings,
)
from dbcrew.operators.collect.machine import MachineRow, collect_machine
from dbcrew.operators.collect.replication import ReplicationRow, SlotRow, collect_replication
from dbcrew.operators.collect.storage import (
    IndexWidthRow,
    StorageParams,
    TableWidthRow,
    collect_relation_widths,
)
from dbcrew.operators.collect.window import (
    ActivityParams,
    ConnectionsRow,
    WindowParams,
    collect_activity,
    collect_database_stats,
    collect_index_stats,
    collect_statements,
    collect_table_stats,
)
from dbcrew.operators.registry import OperatorContext
from dbcrew.operators.stat_views import (
    CheckpointerRow,
    DatabaseStatsRow,
    IndexStatsRow,
    SessionRow,
    StatementRow,
    TableStatsRow,
)
from dbcrew.settings.run import Settings
from dbcrew.targets import parse_target
from dbcrew.workspace import Workspace
from tests.rows import duckdb_type

MODELS: dict[str, type[Any]] = {
    "settings": SettingRow,
    "foreign_keys": ForeignKeyRow,
    "sequences": SequenceRow,
    "wraparound": WraparoundRow,
    "xmin_horizon": HorizonRow,
    "machine": MachineRow,
    "replication": ReplicationRow,
    "replication_slots": SlotRow,
    "table_widths": TableWidthRow,
    "index_widths": IndexWidthRow,
    "database_stats": DatabaseStatsRow,
    "checkpointer": CheckpointerRow,
    "table_stats": TableStatsRow,
    "index_stats": IndexStatsRow,
    "statements": StatementRow,
    "activity": SessionRow,
    "connections": ConnectionsRow,
}
SCHEMA = """
CREATE EXTENSION pg_stat_statements;
CREATE TABLE parent (id int PRIMARY KEY);
CREATE TABLE child (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, parent_id int REFERENCES parent (id), note text);
INSERT INTO parent SELECT generate_series(1, 100);
INSERT INTO child (parent_id, note) SELECT 1 + g % 100, md5(g::text) FROM generate_series(1, 2000) g;
ANALYZE;
"""


# information_schema's spelling of a type, as write_table declares it (an INTEGER reads back as an int too)
SPELLED = {"INTEGER": "BIGINT", "TIMESTAMP WITH TIME ZONE": "TIMESTAMPTZ"}


def model_columns(model: type[Any]) -> list[tuple[str, str]]:
    hints = get_type_hints(model)
    return [(f.name, duckdb_type(hints[f.name])) for f in dataclasses.fields(model)]


def landed_columns(ws: Workspace, table: str) -> list[tuple[str, str]]:
    rows = ws.query(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position",
        [table],
    )
    return [
        (r["column_name"], SPELLED.get(r["data_type"], r["data_type"]))
        for r in rows
        if not r["column_name"].endswith("_delta") and r["column_name"] != "window_seconds"
    ]


def test_every_table_model_declares_the_columns_its_collector_lands(
    pg: EmbeddedPostgres, tmp_path: Path
):
    pg.psql("CREATE DATABASE row_models;")
    pg.psql(SCHEMA, dbname="row_models")
    ctx = OperatorContext(
        target=parse_target(pg.dsn("row_models")),
        workspace=Workspace(tmp_path / "w.duckdb"),
        settings=Settings(),
        brief=None,
        run_dir=tmp_path,
    )
    now = WindowParams(window_seconds=0)
    collect_settings(ctx)
    collect_schema(ctx)
    collect_machine(ctx)
    collect_replication(ctx)
    collect_relation_widths(ctx, StorageParams(min_pages=1))
    collect_database_stats(ctx, now)
    collect_table_stats(ctx, now)
    collect_index_stats(ctx, now)
    collect_statements(ctx, now)
    collect_activity(ctx, ActivityParams(window_seconds=0, samples=1))
    assert {table: landed_columns(ctx.workspace, table) for table in MODELS} == {
        table: model_columns(model) for table, model in MODELS.items()
    }
    for table, model in MODELS.items():
        ctx.workspace.rows(model, f"SELECT * FROM {table}")  # every landed row builds its model
