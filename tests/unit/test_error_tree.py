"""The error tree classifies real error texts to the right branch and leaf."""

from __future__ import annotations

import pytest

from error_tree import load_tree


@pytest.mark.parametrize(
    ("error_type", "message", "leaf", "branch"),
    [
        ("QueryCanceled", "canceling statement due to statement timeout", "timeout", "pipeline"),
        ("InsufficientPrivilege", "permission denied for function pg_ls_waldir", "permission", "pipeline"),
        ("OperationalError", 'connection failed: connection to server at "127.0.0.1", port 1 failed: Connection refused', "connection", "pipeline"),
        ("ObjectNotInPrerequisiteState", 'pg_stat_statements must be loaded via "shared_preload_libraries"', "missing_extension", "pipeline"),
        ("ValidationError", "1 validation error for WindowParams window_seconds Input should be greater than or equal to 0", "bad_parameter", "pipeline"),
        ("OperatorMisfit", "collect_table_stats cannot serve this target (injected misfit, call 1)", "wrong_operator", "logic"),
        ("CatalogException", "Catalog Error: Table with name index_stats does not exist!", "broken_dependency", "logic"),
        ("TooManyConnections", "sorry, too many clients already", "resource_limit", "pipeline"),
    ],
)
def test_classifies_to_leaf(error_type: str, message: str, leaf: str, branch: str):
    found = load_tree().classify(error_type, message)
    assert (found.leaf, found.branch) == (leaf, branch)
    assert 0 < found.confidence <= 1 and not found.fallback


def test_unknown_text_falls_back_with_low_confidence():
    found = load_tree().classify("", "zzz qqq")
    assert found.fallback and found.confidence <= 0.5
