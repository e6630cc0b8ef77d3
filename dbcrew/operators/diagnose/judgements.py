"""EXPLAIN's judgements of a statement (its query plan's, not the crew's plan of a run): what the plan
shows on its own, correlated subqueries, nested loops over large inputs, selective sequential scans
of large tables.

The plans come from `dbcrew.operators.diagnose.heavy_statements`, which picks the window's heaviest statements,
plans them through `dbcrew.operators.explain.generic_plan` and judges them against what they cost per call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pglast import ast, enums, parse_sql
from pglast.ast import SelectStmt
from pglast.parser import ParseError
from pydantic import BaseModel, Field

from dbcrew.vocabulary import Cause, FindingCode, RootCauseCode

SELECT = (SelectStmt,)
# A nested loop whose outer x inner row estimate reaches this joins large inputs.
NESTED_LOOP_PAIRS = 1e7
# A sequential scan returning at most this share of its table, through a plain column comparison.
SELECTIVE_SHARE = 0.01
MIN_SCANNED_ROWS = 10_000
EQUALITY = ("=",)
RANGE = ("<", ">", "<=", ">=")
NOT_EXPLAINED = "not explained"
# A correlated subplan re-run for at least this many outer rows, or fewer runs that each scan so
# much that outer runs x rows scanned reaches NESTED_LOOP_PAIRS (measured: 50 devices each
# re-scanning a 400k-row event table took 1.5 s a statement, the same work as a poor join).
SUBPLAN_MIN_OUTER_ROWS = 100


class PlanIssue(BaseModel):
    """One judgement of a plan: the cause it is evidence of, the plan node and its numbers."""

    code: Cause
    detail: str
    relations: list[str] = Field(
        default_factory=list, description="tables, and join keys as table(column)"
    )
    node: str = Field("", description="the plan node judged, with its condition")
    numbers: dict[str, float] = Field(default_factory=dict)


class StatementPlan(BaseModel):
    """One heavy statement of the window: its plan's judgements, or why it was not planned."""

    query: str
    share: float = Field(description="share of the window's statement time (or of its samples)")
    queryid: int | None = Field(
        None, description="pg_stat_statements' id; None while still running"
    )
    issues: list[PlanIssue] = Field(default_factory=list)
    remarks: list[str] = Field(
        default_factory=list,
        description="what the judgement rests on: visible settings, the plan that accounts for the"
        " measured cost, estimates far from the rows per call",
    )
    numbers: dict[str, float] = Field(
        default_factory=dict,
        description="per call: time, rows, buffers; the plan's cost and buffers",
    )
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
    plan: dict[str, Any],
    table_rows: dict[str, float] | None = None,
    dead_rows: Mapping[str, float] | None = None,
) -> list[PlanIssue]:
    """Patterns: correlated subqueries (a SubPlan per outer row), nested loops over large inputs,
    selective sequential scans a one-column index would serve, sequential scans reading more dead
    row versions than live ones (`table_rows`: live rows by table name; `dead_rows`: dead ones)."""
    issues = []
    dead = dead_rows or {}
    for node, parents in _walk(plan):
        missing = _missing_index(node, parents, table_rows or {}, dead)
        if missing is not None:
            issues.append(missing)
        bloated = _dead_rows_scanned(node, table_rows or {}, dead)
        if bloated is not None and all(
            i.code != bloated.code or i.relations != bloated.relations for i in issues
        ):
            issues.append(bloated)
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


def _dead_rows_scanned(
    node: dict[str, Any], table_rows: dict[str, float], dead_rows: Mapping[str, float]
) -> PlanIssue | None:
    """A sequential scan of a table holding more dead row versions than live ones: every call reads
    them all, so the table's dead tuples are the statement's cost whatever else its plan shows (an
    index would skip them; VACUUM removes them for every statement)."""
    if node.get("Node Type") not in ("Seq Scan", "Parallel Seq Scan"):
        return None
    relation = node.get("Relation Name", "")
    live, dead = table_rows.get(relation, 0.0), dead_rows.get(relation, 0.0)
    if dead < MIN_SCANNED_ROWS or dead <= live:
        return None
    return PlanIssue(
        code=FindingCode.DEAD_TUPLES_HIGH,
        relations=[relation],
        node=f"{node['Node Type']} on {relation}",
        numbers={"live_rows": live, "dead_rows": dead},
        detail=f"each sequential scan of {relation} reads {dead:.0f} dead row versions beside"
        f" {live:.0f} live ones: autovacuum has not kept up with it (VACUUM {relation})",
    )


def _missing_index(
    node: dict[str, Any],
    parents: tuple[dict[str, Any], ...],
    table_rows: dict[str, float],
    dead_rows: Mapping[str, float],
) -> PlanIssue | None:
    """A top-level sequential scan keeping a small share of a large table through `column op value`
    (large by the row versions it reads: a table of few live rows and many dead ones is read whole)."""
    if node.get("Node Type") not in ("Seq Scan", "Parallel Seq Scan") or "Filter" not in node:
        return None
    if any(
        p.get("Node Type") == "Nested Loop" or p.get("Parent Relationship") == "SubPlan"
        for p in (*parents, node)
    ):
        return None  # inside a join or a subplan: the join/subquery pattern owns it
    relation = node.get("Relation Name", "")
    rows = table_rows.get(relation, 0.0) + dead_rows.get(relation, 0.0)
    columns = filter_columns(node["Filter"])
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
    if not columns or rows < MIN_SCANNED_ROWS or kept > SELECTIVE_SHARE * rows:
        return None
    return PlanIssue(
        code=FindingCode.INDEX_MISSING,
        relations=[relation, f"{relation}({', '.join(columns)})"],  # the table, and the key
        node=f"{node['Node Type']} on {relation} (Filter: {node['Filter']})",
        numbers={"table_rows": rows, "rows_kept": kept},
        detail=f"sequential scan of {relation} ({rows:.0f} rows) keeps about {kept:.0f} through {node['Filter']};"
        f" proposed index: CREATE INDEX ON {relation} ({', '.join(columns)})",
    )


def filter_columns(condition: str) -> list[str]:
    """The columns an index could serve in a scan's filter, read by PostgreSQL's parser: those
    compared with a constant or a parameter (`k = $1`, `(email)::text = 'x'::text` for a varchar,
    `k = ANY ($1)`), equalities first and then one range; none when no conjunct compares a column
    (`md5(a) < md5(b)`)."""
    try:
        parsed = parse_sql(f"SELECT 1 WHERE {condition}")
    except ParseError:
        return []
    equal: list[str] = []
    ranged: list[str] = []
    for expr in conjuncts(getattr(parsed[0].stmt, "whereClause", None)):
        if not isinstance(expr, ast.A_Expr):
            continue
        op = "".join(n.sval for n in expr.name or ())
        column = _compared_column(expr.lexpr, expr.rexpr) or _compared_column(
            expr.rexpr, expr.lexpr
        )
        if column is None:
            continue
        if op in EQUALITY and column not in equal:
            equal.append(column)
        elif op in RANGE and column not in ranged:
            ranged.append(column)
    return equal + ranged[:1]


def conjuncts(expr: Any) -> list[Any]:
    """The parts of an AND (the expression itself when it is none)."""
    if isinstance(expr, ast.BoolExpr) and expr.boolop == enums.BoolExprType.AND_EXPR:
        return [c for arg in expr.args or () for c in conjuncts(arg)]
    return [expr]


def _uncast(expr: Any) -> Any:
    while isinstance(expr, ast.TypeCast):
        expr = expr.arg
    return expr


def _compared_column(side: Any, other: Any) -> str | None:
    """`side`'s column name when it is a column (through casts) and `other` a constant or parameter."""
    column, value = _uncast(side), _uncast(other)
    if not isinstance(column, ast.ColumnRef) or not isinstance(
        value, ast.A_Const | ast.ParamRef | ast.A_ArrayExpr
    ):
        return None
    name = getattr((column.fields or ())[-1], "sval", None)
    return str(name) if name else None


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
