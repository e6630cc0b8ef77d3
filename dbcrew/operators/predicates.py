"""Filter columns of a statement, from PostgreSQL's own parser (pglast), for missing-index advice.

Like PgHero's suggested indexes: single-table statements, columns compared with =, IN, ranges or
IS NULL against parameters or constants. Joins are left to the hypothetical-index path.
"""

from __future__ import annotations

from dataclasses import dataclass

from pglast import ast, parse_sql
from pglast.enums import A_Expr_Kind, BoolExprType
from pglast.parser import ParseError

COMPARISONS = {"=", "<", ">", "<=", ">="}


@dataclass(frozen=True)
class FilterColumn:
    schema: str | None
    table: str
    column: str
    operator: str


def filter_columns(query: str) -> list[FilterColumn]:
    """Columns the statement filters its single table on; [] for anything it cannot read."""
    try:
        statements = parse_sql(query)
    except ParseError:
        return []
    found: list[FilterColumn] = []
    for raw in statements:
        stmt = raw.stmt
        relation, where = _relation_and_where(stmt)
        if relation is None or where is None:
            continue
        assert relation.relname is not None  # the parser names every relation it reads
        names = {relation.relname, relation.alias.aliasname if relation.alias else relation.relname}
        for column, op in _comparisons(where):
            fields = [
                f.sval
                for f in column.fields or ()
                if isinstance(f, ast.String) and f.sval is not None
            ]
            if len(fields) == 2 and fields[0] not in names:
                continue
            if not fields or len(fields) > 2:
                continue
            found.append(FilterColumn(relation.schemaname, relation.relname, fields[-1], op))
    return found


def _relation_and_where(stmt: ast.Node | None) -> tuple[ast.RangeVar | None, ast.Node | None]:
    if isinstance(stmt, ast.SelectStmt):
        from_clause = stmt.fromClause or ()
        if len(from_clause) == 1 and isinstance(from_clause[0], ast.RangeVar):
            return from_clause[0], stmt.whereClause
        return None, None
    if isinstance(stmt, (ast.UpdateStmt, ast.DeleteStmt)):
        if isinstance(stmt, ast.UpdateStmt) and stmt.fromClause:
            return None, None
        if isinstance(stmt, ast.DeleteStmt) and stmt.usingClause:
            return None, None
        return stmt.relation, stmt.whereClause
    return None, None


def _is_value(node: object) -> bool:
    """Whether `node` is one value for the whole scan: a constant, a parameter, or a cast or plain
    function call of values (`md5($1)`, `lower($1)`), which an index on the column serves as well;
    never a column, a subquery, an aggregate or a window function."""
    if isinstance(node, ast.TypeCast):
        return _is_value(node.arg)
    if isinstance(node, ast.FuncCall):
        plain = not (node.agg_star or node.agg_distinct or node.over or node.agg_filter)
        return plain and all(_is_value(arg) for arg in node.args or ())
    return isinstance(node, (ast.ParamRef, ast.A_Const))


def _comparisons(node: object) -> list[tuple[ast.ColumnRef, str]]:
    if isinstance(node, ast.BoolExpr):
        if node.boolop != BoolExprType.AND_EXPR:
            return []  # an OR of filters is not served by one index
        return [pair for arg in node.args or () for pair in _comparisons(arg)]
    if isinstance(node, ast.A_Expr):
        op = node.name[0].sval if node.name else ""
        if node.kind == A_Expr_Kind.AEXPR_IN and isinstance(node.lexpr, ast.ColumnRef):
            return [(node.lexpr, "in")]
        if node.kind == A_Expr_Kind.AEXPR_OP and op in COMPARISONS:
            if isinstance(node.lexpr, ast.ColumnRef) and _is_value(node.rexpr):
                return [(node.lexpr, op)]
            if isinstance(node.rexpr, ast.ColumnRef) and _is_value(node.lexpr):
                return [(node.rexpr, op)]
    if isinstance(node, ast.NullTest) and isinstance(node.arg, ast.ColumnRef):
        return [(node.arg, "is null")]
    return []
