"""One read-only operator run on its own against a target, outside any plan (the MCP server's operator tools).

Only operators that stand alone qualify: extractors that need no artifact from upstream (the
collectors). Each call gets a throw-away workspace, the target's brief (the probe, so an operator
sees the server's version and privileges as in a review) and a window that caps the operator's
own `window_seconds`, exactly as a review's `--window` does. What it produced comes back as rows,
at most `row_limit` per table: texts were redacted when the workspace stored them.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from dbcrew.models import Finding, Role
from dbcrew.settings import Settings
from dbcrew.targets import PostgresTarget
from dbcrew.vocabulary import Category
from dbcrew.workspace import Workspace
from operators import REGISTRY, Operator, OperatorContext
from operators.collect.probe import probe


class ProducedTable(BaseModel):
    name: str
    total_rows: int
    rows: list[dict[str, Any]] = Field(description="the first rows, at most the server's row limit")


class Lookup(BaseModel):
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


def standalone_operators() -> list[Operator]:
    """The operators a caller may run on their own: collectors that need nothing from upstream."""
    return [
        op
        for op in REGISTRY.values()
        if op.role is Role.EXTRACTOR and op.category is Category.COLLECT and not op.needs
    ]


def look_up(
    target: PostgresTarget, operator: Operator, params: BaseModel, window: float, row_limit: int
) -> Lookup:
    """Run `operator` once against `target` in a throw-away workspace; its products, `row_limit` rows per table."""
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
                    body = workspace.query("SELECT body FROM observations WHERE key = ?", [name])
                    if body:
                        observations[name] = json.loads(body[0]["body"])
        finally:
            workspace.close()
    return Lookup(
        operator=operator.name,
        target=target.display,
        summary=observation.summary,
        partial=observation.partial,
        findings=observation.findings,
        tables=tables,
        observations=observations,
    )
