"""One read-only operator run on its own against a target, outside any plan (the MCP server's operator tools).

Only the registry's operators of the MCP surface qualify: the collectors that need no artifact from
upstream, and ask's look-ups. A collector gets a throw-away workspace, the target's brief (the
probe, so an operator sees the server's version and privileges as in a review) and a window that
caps the operator's own `window_seconds`, exactly as a review's `--window` does; what it produced
comes back as rows, at most `row_limit` per table (texts were redacted when the workspace stored
them). A look-up runs on one read-only session and its rows come back as a table of its name.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import psycopg
from pydantic import BaseModel, Field

from dbcrew.models import Finding
from dbcrew.operators import Operator, OperatorContext
from dbcrew.operators.collect.probe import probe
from dbcrew.redact import redact, redact_value
from dbcrew.settings.run import Settings
from dbcrew.targets import PostgresTarget
from dbcrew.workspace import Workspace


class ProducedTable(BaseModel):
    name: str
    total_rows: int
    rows: list[dict[str, Any]] = Field(description="the first rows, at most the server's row limit")


class Reading(BaseModel):
    """What one operator call read: its summary, findings, and the tables (or observations) it produced."""

    operator: str
    target: str = Field(description="the target without its password")
    summary: str
    partial: str = ""
    findings: list[Finding] = Field(default_factory=list)
    tables: list[ProducedTable] = Field(default_factory=list)
    observations: dict[str, Any] = Field(
        default_factory=dict, description="produced snapshots that are not tables"
    )


def look_up(
    target: PostgresTarget, operator: Operator, params: BaseModel, window: float, row_limit: int
) -> Reading:
    """Run `operator` once against `target`; its products, `row_limit` rows per table."""
    if issubclass(operator.context, psycopg.Connection):
        return _on_session(target, operator, params, row_limit)
    with tempfile.TemporaryDirectory(prefix="dbcrew-lookup-") as tmp:
        workspace = Workspace(Path(tmp) / "workspace.duckdb")
        try:
            ctx = OperatorContext(
                target=target,
                workspace=workspace,
                settings=Settings(window_seconds=window),
                brief=None,
                run_dir=Path(tmp),
            )
            ctx.brief = probe(ctx)
            observation = operator.fn(ctx, params)
            tables, observations = [], {}
            for name in dict.fromkeys([*operator.produces, *observation.artifacts]):
                if workspace.has(name):
                    total = workspace.query(f'SELECT count(*) AS n FROM "{name}"')[0]["n"]
                    tables.append(
                        ProducedTable(
                            name=name,
                            total_rows=total,
                            rows=workspace.query(f'SELECT * FROM "{name}" LIMIT ?', [row_limit]),
                        )
                    )
                else:
                    body = workspace.observation(name)
                    if body is not None:
                        observations[name] = json.loads(body)
        finally:
            workspace.close()
    return Reading(
        operator=operator.name,
        target=target.display,
        summary=observation.summary,
        partial=observation.partial,
        findings=observation.findings,
        tables=tables,
        observations=observations,
    )


def _on_session(
    target: PostgresTarget, operator: Operator, params: BaseModel, row_limit: int
) -> Reading:
    """A look-up (dbcrew/operators/lookups.py) on one read-only session: its summary and its rows as one table,
    their texts redacted as the workspace redacts what it stores."""
    with target.session() as conn:
        observation = operator.fn(conn, params)
    rows = [{k: redact_value(v) for k, v in row.items()} for row in observation.rows[:row_limit]]
    return Reading(
        operator=operator.name,
        target=target.display,
        summary=redact(observation.summary),
        tables=[ProducedTable(name=operator.name, total_rows=len(observation.rows), rows=rows)],
    )
