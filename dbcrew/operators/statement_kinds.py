"""What kind of work a statement text read from pg_stat_statements is: the workload's, or utility.

pg_stat_statements tracks utility commands too (pg_stat_statements.track_utility is on by
default): DDL, VACUUM, ANALYZE, CREATE INDEX, COPY, transaction control, EXPLAIN. Their time is
the cost of maintenance and migrations, not of a query an index or a rewrite would speed up, so
the statement checks leave them out of what they rank. PostgreSQL's own parser (pglast) decides;
a text cut short by the collector (its first 2,000 characters) no longer parses, and is judged by
its first keyword, as the parser would begin.
"""

from __future__ import annotations

from enum import StrEnum

from pglast import ast, parse_sql
from pglast.parser import ParseError, scan

# The statements that do the workload's work: the plannable ones, and CALL (a procedure's
# statements are the application's). Everything else the parser knows is a utility command.
WORKLOAD_NODES = (
    ast.SelectStmt,
    ast.InsertStmt,
    ast.UpdateStmt,
    ast.DeleteStmt,
    ast.MergeStmt,
    ast.CallStmt,
)
# The tokens a workload statement can begin with; ASCII_40 is "(", a parenthesised SELECT.
WORKLOAD_FIRST_TOKENS = frozenset(
    {"SELECT", "WITH", "VALUES", "TABLE", "INSERT", "UPDATE", "DELETE", "MERGE", "CALL", "ASCII_40"}
)


class StatementKind(StrEnum):
    WORKLOAD = "workload"
    UTILITY = "utility"


def kind_of(text: str) -> StatementKind:
    """The kind of a normalised statement text ($1, $2 ... for constants), whole or cut short.

    A text that neither parses nor scans (cut inside a quoted name) counts as workload: a
    statement of unknown kind is shown rather than hidden.
    """
    try:
        parsed = parse_sql(text)
    except ParseError:
        return _kind_by_first_keyword(text)
    stmt = parsed[0].stmt if parsed else None
    return StatementKind.WORKLOAD if isinstance(stmt, WORKLOAD_NODES) else StatementKind.UTILITY


def _kind_by_first_keyword(text: str) -> StatementKind:
    try:
        tokens = scan(text)
    except ParseError:
        return StatementKind.WORKLOAD
    first = next((t for t in tokens if t.name not in ("C_COMMENT", "SQL_COMMENT")), None)
    if first is None or first.name in WORKLOAD_FIRST_TOKENS:
        return StatementKind.WORKLOAD
    return StatementKind.UTILITY
