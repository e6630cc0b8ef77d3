"""Check operators over a real DuckDB workspace filled with rows shaped like the collectors' output."""

from __future__ import annotations

from pathlib import Path

import pytest

import operators  # noqa: F401
from dbcrew.models import Finding, Role, Severity
from dbcrew.settings import Settings
from dbcrew.targets import parse_target
from dbcrew.vocabulary import Category, FindingCode
from dbcrew.workspace import Workspace
from operators.checks.base import Coverage, check
from operators.checks.indexes import check_duplicate_indexes
from operators.checks.tables import check_vacuum_health
from operators.registry import REGISTRY, OperatorContext

INDEX_COLUMNS = [
    ("indexrelid", "BIGINT"), ("relid", "BIGINT"), ("schemaname", "VARCHAR"), ("relname", "VARCHAR"),
    ("indexrelname", "VARCHAR"), ("indisunique", "BOOLEAN"), ("indisprimary", "BOOLEAN"), ("indisvalid", "BOOLEAN"),
    ("backs_constraint", "BOOLEAN"), ("column_names", "VARCHAR"), ("indclass", "VARCHAR"), ("method", "VARCHAR"),
    ("expressions", "VARCHAR"), ("predicate", "VARCHAR"), ("indexdef", "VARCHAR"), ("index_bytes", "BIGINT"),
]


def ctx(tmp_path: Path) -> OperatorContext:
    return OperatorContext(target=parse_target("postgresql://u@127.0.0.1:1/x"), workspace=Workspace(tmp_path / "w.duckdb"),
                           settings=Settings(), brief=None, run_dir=tmp_path)


def index(oid, name, cols, *, unique=False, primary=False, constraint=False, classes=None, predicate="", method="btree"):
    classes = classes or " ".join("3124" for _ in cols.split(","))
    return (oid, 1, "public", "orders", name, unique, primary, True, constraint, cols, classes, method, "", predicate, f"def {name}", 8192)


def duplicates(tmp_path: Path, rows: list[tuple]) -> set[str]:
    c = ctx(tmp_path)
    c.workspace.write_table("index_stats", INDEX_COLUMNS, rows)
    return {f.object for f in check_duplicate_indexes(c).findings}


def test_leading_prefix_is_a_duplicate(tmp_path):
    rows = [index(1, "orders_pkey", "id", unique=True, primary=True, constraint=True),
            index(2, "orders_customer_idx", "customer_id"), index(3, "orders_customer_created_idx", "customer_id,created_at")]
    assert duplicates(tmp_path, rows) == {"public.orders_customer_idx"}


def test_unique_narrow_index_partial_index_and_other_opclass_are_not_duplicates(tmp_path):
    rows = [index(2, "orders_code_key", "code", unique=True), index(3, "orders_code_created_idx", "code,created_at"),
            index(4, "orders_status_open", "status", predicate="(status = 'open'::text)"), index(5, "orders_status_created", "status,created_at"),
            index(6, "orders_name_pattern", "name", classes="10044"), index(7, "orders_name_created", "name,created_at")]
    assert duplicates(tmp_path, rows) == set()


def test_exact_twins_report_one_and_never_the_constraint(tmp_path):
    rows = [index(2, "a_idx", "email"), index(3, "b_idx", "email")]
    assert duplicates(tmp_path, rows) == {"public.b_idx"}
    rows = [index(2, "a_key", "email", unique=True, constraint=True), index(3, "b_idx", "email")]
    assert duplicates(tmp_path / "2", rows) == {"public.b_idx"}


TABLE_COLUMNS = [("schemaname", "VARCHAR"), ("relname", "VARCHAR"), ("reloptions", "VARCHAR"), ("n_live_tup", "BIGINT"),
                 ("n_dead_tup", "BIGINT"), ("n_mod_since_analyze", "BIGINT"), ("last_analyze", "TIMESTAMPTZ"),
                 ("last_autoanalyze", "TIMESTAMPTZ"), ("last_vacuum", "TIMESTAMPTZ"), ("last_autovacuum", "TIMESTAMPTZ")]


def test_vacuum_health_thresholds(tmp_path):
    c = ctx(tmp_path)
    c.workspace.write_table("settings", [("name", "VARCHAR"), ("setting", "VARCHAR")], [("autovacuum", "on")])
    c.workspace.write_table("table_stats", TABLE_COLUMNS, [
        ("public", "carts", "autovacuum_enabled=false", 30000, 60000, 0, "2026-11-01", None, None, None),
        ("public", "fine", None, 30000, 100, 10, "2026-11-01", None, None, None),
        ("public", "small_dead", None, 100, 9000, 0, "2026-11-01", None, None, None),
        ("public", "unanalyzed", None, 5000, 0, 0, None, None, None, None),
    ])
    found = {(f.code, f.object, f.severity.value) for f in check_vacuum_health(c).findings}
    assert found == {
        ("autovacuum_disabled", "public.carts", "warning"),
        ("dead_tuples_high", "public.carts", "critical"),
        ("statistics_stale", "public.unanalyzed", "warning"),
    }


def test_the_check_skeleton_gathers_findings_and_reports_coverage(tmp_path):
    """@check registers a tasker operator of the checks category; the body's findings carry its name as
    source, its coverage is the declared one unless the body returns its own (with what it could not see)."""
    ws_ctx = ctx(tmp_path)
    seen = Finding(code=FindingCode.INDEX_INVALID, severity=Severity.WARNING, object="public.i", title="i is invalid")

    def check_toy_declared(_ctx):
        """Toy check with a fixed coverage."""
        yield seen

    def check_toy_returned(_ctx):
        """Toy check that could not see everything."""
        yield seen
        yield seen.model_copy(update={"severity": Severity.INFO})
        return Coverage("two toys", partial="one toy hidden")

    def check_toy_silent(_ctx):
        """Toy check that forgets its coverage."""
        yield seen

    try:
        declared = check(needs=("toys",), codes=(FindingCode.INDEX_INVALID,), looked_at="one toy")(check_toy_declared)(ws_ctx)
        returned = check(needs=("toys",), codes=(FindingCode.INDEX_INVALID,))(check_toy_returned)(ws_ctx)
        silent = check(needs=("toys",), codes=(FindingCode.INDEX_INVALID,))(check_toy_silent)
        entry = REGISTRY["check_toy_declared"].entry()
        with pytest.raises(TypeError, match="check_toy_silent returned no coverage"):
            silent(ws_ctx)
    finally:
        for name in ("check_toy_declared", "check_toy_returned", "check_toy_silent"):
            REGISTRY.pop(name, None)
    assert (entry.role, entry.category, entry.needs, entry.checks) == (Role.TASKER, Category.CHECKS, ["toys"], ["index_invalid"])
    assert entry.description == "Toy check with a fixed coverage."
    assert declared.summary == "check_toy_declared: 1 findings (1 problems) over one toy" and declared.partial == ""
    assert [f.source for f in declared.findings] == ["check_toy_declared"]
    assert returned.summary == "check_toy_returned: 2 findings (1 problems) over two toys"
    assert returned.partial == "one toy hidden"
