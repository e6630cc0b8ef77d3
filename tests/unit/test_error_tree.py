"""The error tree: its shape, its remedies, and its classifier on real error texts."""

from __future__ import annotations

from collections import Counter

import pytest

from dbcrew.error_tree import load_tree
from dbcrew.error_tree.classify import load_labelled, normalise
from dbcrew.error_tree.evaluate import evaluate, split
from dbcrew.models.crew import Remedy
from dbcrew.vocabulary import Action, RemedyKind

# Leaf names that code and other tests rely on (dbcrew/roles/crew/monitor.py records them; tests assert them).
NAMED_ELSEWHERE = {
    "connection",
    "permission",
    "timeout",
    "missing_extension",
    "bad_parameter",
    "resource_limit",
    "wrong_operator",
    "missing_agent",
    "broken_dependency",
}


def test_tree_has_two_branches_and_enough_documented_leaves():
    tree = load_tree()
    assert [c.name for c in tree.root.children] == ["pipeline", "logic"]
    names = [leaf.name for leaf in tree.leaves]
    assert len(names) >= 25 and len(set(names)) == len(names)
    assert NAMED_ELSEWHERE <= set(names)
    for leaf in tree.leaves:
        assert leaf.description and len(leaf.examples) >= 2, leaf.name


def test_every_leaf_has_a_typed_remedy_and_every_action_is_used():
    leaves = load_tree().leaves
    for leaf in leaves:
        assert isinstance(leaf.remedy, Remedy) and leaf.remedy.kind is leaf.remedy.action.kind, (
            leaf.name
        )
    assert {leaf.remedy.action for leaf in leaves if leaf.remedy} == set(Action)


@pytest.mark.parametrize(
    ("remedy", "complaint"),
    [
        (
            "{kind: instruction, action: restart_database}",
            "restart_database",
        ),  # not an action the tasker knows
        (
            "{kind: instruction, action: add_agent}",
            "action add_agent is of kind replan, not instruction",
        ),
        ("{kind: replan, action: retry}", "action retry is of kind instruction, not replan"),
        ("{kind: later, action: retry}", "later"),
    ],
)
def test_a_tree_with_a_wrong_remedy_is_refused_naming_the_leaf(tmp_path, remedy, complaint):
    tree = tmp_path / "tree.yaml"
    tree.write_text(
        f"name: error\nchildren:\n  - name: pipeline\n    children:\n      - name: flaky\n"
        f"        examples: ['x', 'y']\n        remedy: {remedy}\n"
    )
    with pytest.raises(ValueError, match="error tree error/pipeline/flaky: remedy") as raised:
        load_tree(tree)
    assert complaint in str(raised.value)


def test_action_kinds_split_instructions_from_replans():
    assert {a for a in Action if a.kind is RemedyKind.REPLAN} == {
        Action.REPLACE_OPERATOR,
        Action.ADD_AGENT,
        Action.REMOVE_SUBGRAPH,
    }
    assert Remedy(kind="instruction", action="skip") == Remedy(
        kind=RemedyKind.INSTRUCTION, action=Action.SKIP
    )


def test_pipeline_leaves_instruct_and_logic_leaves_replan():
    for leaf in load_tree().leaves:
        assert leaf.remedy is not None
        assert leaf.remedy.kind is (
            RemedyKind.INSTRUCTION if leaf.path[1] == "pipeline" else RemedyKind.REPLAN
        ), leaf.name


def test_declared_fallbacks_name_a_child():
    def walk(node):
        if node.children:
            assert node.fallback is None or node.fallback in {c.name for c in node.children}, (
                node.name
            )
            for child in node.children:
                walk(child)

    walk(load_tree().root)


@pytest.mark.parametrize(
    ("error_type", "message", "leaf", "branch"),
    [
        ("QueryCanceled", "canceling statement due to statement timeout", "timeout", "pipeline"),
        (
            "InsufficientPrivilege",
            "permission denied for function pg_ls_waldir",
            "permission",
            "pipeline",
        ),
        (
            "OperationalError",
            'connection failed: connection to server at "127.0.0.1", port 1 failed: Connection refused',
            "connection",
            "pipeline",
        ),
        (
            "OperationalError",
            'connection failed: connection to server at "127.0.0.1", port 5432 failed: FATAL:  password authentication '
            'failed for user "alice"',
            "authentication_failed",
            "pipeline",
        ),
        (
            "ObjectNotInPrerequisiteState",
            'pg_stat_statements must be loaded via "shared_preload_libraries"',
            "missing_extension",
            "pipeline",
        ),
        (
            "UndefinedColumn",
            'column "total_time" does not exist',
            "schema_drift_column",
            "pipeline",
        ),
        ("ValidationError", "1 validation error for WindowParams", "bad_parameter", "pipeline"),
        (
            "ReadOnlySqlTransaction",
            "cannot execute INSERT in a read-only transaction",
            "read_only_violation",
            "pipeline",
        ),
        ("DeadlockDetected", "deadlock detected", "deadlock", "pipeline"),
        ("TooManyConnections", "sorry, too many clients already", "resource_limit", "pipeline"),
        (
            "RateLimitError",
            "Error code: 429 - Rate limit reached for requests per min (RPM): Limit 500",
            "llm_rate_limit",
            "pipeline",
        ),
        (
            "BrainError",
            "no valid answer after 2 repairs: 1 validation error for Strategy: Invalid JSON: expected value at line 1 column 1",
            "llm_malformed_output",
            "pipeline",
        ),
        (
            "OperatorMisfit",
            "collect_table_stats cannot serve this target (injected misfit, call 1)",
            "wrong_operator",
            "logic",
        ),
        (
            "CatalogException",
            "Catalog Error: Table with name index_stats does not exist!",
            "broken_dependency",
            "logic",
        ),
        ("PlanRejected", "agent 'painter' is not in the team", "missing_agent", "logic"),
        (
            "PlanRejected",
            "the task graph has a cycle: [('a', 'b'), ('b', 'a')]",
            "dependency_cycle",
            "logic",
        ),
        (
            "RateLimitError",
            "Error code: 429 - You exceeded your current quota, please check your plan and billing details.",
            "budget_exhausted",
            "logic",
        ),
    ],
)
def test_classifies_real_messages_to_their_leaf(
    error_type: str, message: str, leaf: str, branch: str
):
    found = load_tree().classify(error_type, message)
    assert (found.leaf, found.branch) == (leaf, branch)
    assert 0.5 < found.confidence <= 1 and not found.fallback


@pytest.mark.parametrize("noise", ["zzz qqq", "hello world", "the frobnicator exploded", ""])
def test_noise_falls_back_with_low_confidence(noise: str):
    found = load_tree().classify("", noise)
    assert found.fallback and found.confidence <= 0.5
    assert (found.branch, found.leaf, found.remedy.kind) == (
        "pipeline",
        "unexpected",
        "instruction",
    )


def test_connect_preamble_is_dropped_so_the_reason_decides():
    text = (
        'cannot connect to postgresql://bob@127.0.0.1:5432/shop: connection failed: connection to server at "127.0.0.1", '
        'port 5432 failed: FATAL:  too many connections for role "bob"'
    )
    assert normalise(text).strip().startswith("FATAL:") and "127" not in normalise(text)


def test_labelled_set_is_large_varied_and_kept_apart_from_the_examples():
    cases = load_labelled()
    leaves = {leaf.name for leaf in load_tree().leaves}
    assert len(cases) >= 150 and len({(c.error_type, c.message) for c in cases}) == len(cases)
    assert {c.leaf for c in cases} <= leaves and len({c.leaf for c in cases}) >= 25
    assert max(Counter(c.leaf for c in cases).values()) <= len(cases) // 10
    examples = {example.strip() for leaf in load_tree().leaves for example in leaf.examples}
    for case in cases:
        assert (
            case.message not in examples and f"{case.error_type}: {case.message}" not in examples
        ), case


def test_classifier_meets_the_accuracy_targets_on_real_messages():
    tree = load_tree()
    cases = load_labelled()
    _, held_out = split(cases)
    for part in (cases, held_out):
        scores = evaluate(tree, part)
        assert scores.top_accuracy >= 0.90 and scores.leaf_accuracy >= 0.80, (
            scores.top_accuracy,
            scores.leaf_accuracy,
            scores.confusions,
        )
