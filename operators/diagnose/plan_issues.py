"""Statement analysis: EXPLAIN the heavy statements of the window and name the plan's problem.

Statements come from pg_stat_statements (normalised text with $n parameters) and from the
session samples (statements still running, with their literal text); both are planned by
`operators.explain.generic_plan`. Text from the database is data: only a single plain SELECT
calling nothing but pg_catalog's code is explained, never executed.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
from pglast.ast import SelectStmt
from pydantic import BaseModel

from dbcrew.targets import PostgresTarget
from dbcrew.vocabulary import Cause, FindingCode, RootCauseCode
from operators.explain import FOREIGN_CODE, Unplannable, generic_plan

SELECT = (SelectStmt,)
# A nested loop whose outer x inner row estimate reaches this joins large inputs.
NESTED_LOOP_PAIRS = 1e7
# A sequential scan returning at most this share of its table, through a plain column comparison.
SELECTIVE_SHARE = 0.01
MIN_SCANNED_ROWS = 10_000
COLUMN_FILTER = re.compile(
    r"^\(?\(?(\w+)\)?\s*(=|<|>|<=|>=)\s*(\$\d+|'[^']*'(::[\w ]+)?|-?[\d.]+)\)?$"
)
NOT_EXPLAINED = "not explained"
# A correlated subplan re-run for at least this many outer rows, or fewer runs that each scan so
# much that outer runs x rows scanned reaches NESTED_LOOP_PAIRS (measured: 50 devices each
# re-scanning a 400k-row event table took 1.5 s a statement, the same work as a poor join).
SUBPLAN_MIN_OUTER_ROWS = 100


class PlanIssue(BaseModel):
    code: Cause
    detail: str
    relations: list[str] = []


class StatementPlan(BaseModel):
    query: str
    share: float
    issues: list[PlanIssue] = []
    error: str = ""


def _walk(
    node: dict[str, Any], parents: tuple[dict[str, Any], ...] = ()
) -> list[tuple[dict[str, Any], tuple[dict[str, Any], ...]]]:
    out = [(node, parents)]
    for child in node.get("Plans", []):
        out.extend(_walk(child, (*parents, node)))
    return out


def _relations(node: dict[str, Any]) -> list[str]:
    return sorted({n["Relation Name"] for n, _ in _walk(node) if "Relation Name" in n})


def plan_issues(
    plan: dict[str, Any], table_rows: dict[str, float] | None = None
) -> list[PlanIssue]:
    """Patterns: correlated subqueries (a SubPlan per outer row), nested loops over large inputs,
    selective sequential scans a one-column index would serve (`table_rows`: live rows by table name)."""
    issues = []
    for node, parents in _walk(plan):
        missing = _missing_index(node, parents, table_rows or {})
        if missing is not None:
            issues.append(missing)
        if node.get("Parent Relationship") == "SubPlan" and not str(
            node.get("Subplan Name", "")
        ).startswith("hashed"):
            owner = parents[-1] if parents else plan
            outer_rows = float(owner.get("Plan Rows", 0))
            scanned = outer_rows * _seq_scanned_rows(node, table_rows or {})
            if (
                outer_rows >= SUBPLAN_MIN_OUTER_ROWS
                or owner.get("Node Type") == "Aggregate"
                or scanned >= NESTED_LOOP_PAIRS
            ):
                issues.append(
                    PlanIssue(
                        code=RootCauseCode.QUERY_CORRELATED_SUBQUERY,
                        relations=_relations(node),
                        detail=f"{node.get('Subplan Name', 'SubPlan')} runs once per row of a {owner.get('Node Type')} "
                        f"(about {outer_rows:.0f} rows), scanning {', '.join(_relations(node)) or 'a subquery'} each time",
                    )
                )
        if node.get("Node Type") == "Nested Loop" and len(node.get("Plans", [])) == 2:
            outer, inner = node["Plans"]
            inner_is_index = any("Index" in n.get("Node Type", "") for n, _ in _walk(inner))
            pairs = float(outer.get("Plan Rows", 0)) * float(_scan_rows(inner))
            if not inner_is_index and pairs >= NESTED_LOOP_PAIRS:
                issues.append(
                    PlanIssue(
                        code=RootCauseCode.QUERY_POOR_JOIN,
                        relations=_relations(node),
                        detail=f"nested loop over {outer.get('Plan Rows')} x {_scan_rows(inner):.0f} rows without an index on the inner side"
                        + (
                            f" (join filter {node['Join Filter']})" if "Join Filter" in node else ""
                        ),
                    )
                )
    return issues


def _missing_index(
    node: dict[str, Any], parents: tuple[dict[str, Any], ...], table_rows: dict[str, float]
) -> PlanIssue | None:
    """A top-level sequential scan keeping a small share of a large table through `column op value`."""
    if node.get("Node Type") not in ("Seq Scan", "Parallel Seq Scan") or "Filter" not in node:
        return None
    if any(
        p.get("Node Type") == "Nested Loop" or p.get("Parent Relationship") == "SubPlan"
        for p in (*parents, node)
    ):
        return None  # inside a join or a subplan: the join/subquery pattern owns it
    relation = node.get("Relation Name", "")
    rows = table_rows.get(relation, 0.0)
    match = COLUMN_FILTER.match(node["Filter"].strip())
    workers = 1 + float(
        next(
            (
                p.get("Workers Planned", 0)
                for p in parents
                if p.get("Node Type") in ("Gather", "Gather Merge")
            ),
            0,
        )
    )
    kept = float(node.get("Plan Rows", 0)) * workers
    if match is None or rows < MIN_SCANNED_ROWS or kept > SELECTIVE_SHARE * rows:
        return None
    column = match.group(1)
    return PlanIssue(
        code=FindingCode.INDEX_MISSING,
        relations=[relation],
        detail=f"sequential scan of {relation} ({rows:.0f} rows) keeps about {kept:.0f} through {node['Filter']};"
        f" proposed index: CREATE INDEX ON {relation} ({column})",
    )


def _seq_scanned_rows(node: dict[str, Any], table_rows: dict[str, float]) -> float:
    """Rows one run of `node` reads through sequential scans (the tables' live rows: a filtered
    scan's Plan Rows counts what it keeps, not what it reads)."""
    return sum(
        table_rows.get(n.get("Relation Name", ""), 0.0)
        for n, _ in _walk(node)
        if n.get("Node Type") in ("Seq Scan", "Parallel Seq Scan")
    )


def _scan_rows(node: dict[str, Any]) -> float:
    """Rows the inner side produces per loop (a Materialize passes its child's rows)."""
    if node.get("Node Type") == "Materialize" and node.get("Plans"):
        return _scan_rows(node["Plans"][0])
    return float(node.get("Plan Rows", 0))


def analyse_statements(
    target: PostgresTarget,
    candidates: list[tuple[str, float]],
    version: int,
    table_rows: dict[str, float] | None = None,
) -> list[StatementPlan]:
    """EXPLAIN each (query, share of the window's statement time) and list its plan issues."""
    results = []
    with target.session() as conn:
        for query, share in candidates:
            try:
                issues = plan_issues(generic_plan(conn, query, version, SELECT), table_rows)
                results.append(StatementPlan(query=query, share=share, issues=issues))
            except Unplannable as exc:
                if str(exc).startswith(
                    FOREIGN_CODE
                ):  # worth saying: a heavy statement the diagnosis could not look into
                    results.append(
                        StatementPlan(query=query, share=share, error=f"{NOT_EXPLAINED}: {exc}")
                    )
            except psycopg.Error as exc:
                results.append(
                    StatementPlan(query=query, share=share, error=str(exc).splitlines()[0])
                )
    return results
