"""Typed names between operators: what an operator needs, uses and produces is a declared key, never a bare name.

A bare string in a registration was a typo waiting to be an empty observation at run time; a key is
declared once beside its producer (dbcrew/artifacts.py) and every reader imports it. The AST scan
holds the whole package to that; the plan still travels as names, which parse back to the keys.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import dbcrew.operators  # noqa: F401  (registers every operator, declaring their artifacts)
from dbcrew.artifacts import Artifact, UnknownArtifact, declare, parse
from dbcrew.models import AgentSpec, CatalogueEntry, Role, Strategy, TaskSpec
from dbcrew.operators.registry import REGISTRY, catalogue
from dbcrew.roles.crew.validators import validate
from dbcrew.vocabulary import ProblemKind

PACKAGE = Path(__file__).resolve().parents[2] / "dbcrew"
REGISTERING = {
    "operator",
    "check",
}  # the decorators that register an operator (registry.py, checks/base.py)
ARTIFACT_KEYWORDS = {"needs", "uses", "produces"}
TYPED_READS = {"has", "observation"}  # Workspace's reads by key


def _called(node: ast.Call) -> str:
    func = node.func
    return (
        func.id
        if isinstance(func, ast.Name)
        else func.attr
        if isinstance(func, ast.Attribute)
        else ""
    )


def _text(node: ast.AST) -> bool:
    return (isinstance(node, ast.Constant) and isinstance(node.value, str)) or isinstance(
        node, ast.JoinedStr
    )


def bare_names(source: str) -> list[tuple[int, str]]:
    """(line, what) for every bare name where a key belongs: a string in a registration's needs/uses/produces,
    a workspace read by a string, an Artifact made outside `declare`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        called = _called(node)
        if called in REGISTERING:
            for keyword in node.keywords:
                if keyword.arg in ARTIFACT_KEYWORDS and any(
                    _text(n) for n in ast.walk(keyword.value)
                ):
                    found.append((keyword.value.lineno, f"{called}({keyword.arg}=<a string>)"))
        elif called in TYPED_READS and node.args and _text(node.args[0]):
            found.append((node.lineno, f".{called}(<a string>)"))
        elif called == "Artifact":
            found.append((node.lineno, "Artifact(...) outside declare"))
    return sorted(found)


PLANTED = """
@operator(role=Role.EXTRACTOR, category=Category.COLLECT, produces=("table_stats",))
def collect(ctx): ...

@check(needs=(TABLE_STATS.table, f"{kind}_widths"), uses=(INDEX_ADVICE,), codes=())
def check_one(ctx): ...

@operator(role=Role.TASKER, category=Category.CHECKS, needs=(TABLE_STATS.table,), uses=(*KEYS.values(),))
def typed(ctx):
    if ctx.workspace.has("index_advice") and ctx.workspace.has(INDEX_ADVICE):
        return ctx.workspace.observation("anomaly_facts")
    return Artifact("made_up")

Property("large", needs="bytes")  # another `needs`: not a registration
"""


def test_the_scan_finds_each_planted_bare_name_and_nothing_typed():
    assert bare_names(PLANTED) == [
        (2, "operator(produces=<a string>)"),
        (5, "check(needs=<a string>)"),
        (10, ".has(<a string>)"),
        (11, ".observation(<a string>)"),
        (12, "Artifact(...) outside declare"),
    ]


def test_no_bare_artifact_name_anywhere_in_the_package():
    found = {
        str(path.relative_to(PACKAGE)): names
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "artifacts.py" and (names := bare_names(path.read_text()))
    }
    assert found == {}


def test_every_registered_artifact_is_a_declared_key():
    for op in REGISTRY.values():
        for artifact in (*op.needs, *op.uses, *op.produces):
            assert type(artifact) is Artifact and parse(artifact) is artifact, (op.name, artifact)


def test_every_artifact_an_operator_needs_or_uses_has_a_producer():
    produced = {a for op in REGISTRY.values() for a in op.produces}
    missing = {
        (op.name, a) for op in REGISTRY.values() for a in (*op.needs, *op.uses) if a not in produced
    }
    assert missing == set()


def test_the_catalogue_travels_as_names_and_parses_back_to_the_keys():
    entries = catalogue()
    sent = [e.model_dump(mode="json") for e in entries]
    assert all(isinstance(n, str) and type(n) is str for e in sent for n in e["produces"])
    back = [CatalogueEntry.model_validate(e) for e in sent]
    assert back == entries
    assert all(parse(n) is n for e in back for n in (*e.needs, *e.uses, *e.produces))


def test_an_unknown_name_is_refused_with_what_is_known():
    with pytest.raises(
        UnknownArtifact,
        match=r"unknown artifact 'tabel_stats': the declared artifacts are .*table_stats",
    ):
        parse("tabel_stats")
    with pytest.raises(ValueError, match="tabel_stats"):
        CatalogueEntry.model_validate(
            {
                "name": "x",
                "role": "tasker",
                "category": "checks",
                "description": "",
                "needs": ["tabel_stats"],
            }
        )


def test_an_artifact_is_declared_once():
    with pytest.raises(ValueError, match="'table_stats' declared twice"):
        declare("table_stats")


def test_a_plan_whose_task_produces_an_unknown_name_is_rejected_and_a_known_one_passes():
    def plan(produces: list[str]) -> Strategy:
        return Strategy(
            team=[AgentSpec(name="extractor", role=Role.EXTRACTOR, goal="collect")],
            tasks=[
                TaskSpec(
                    id="t1", agent="extractor", operator="collect_table_stats", produces=produces
                )
            ],
        )

    entries = catalogue()
    problems = validate(plan(["tabel_stats"]), entries)
    assert [(p.task_id, p.kind) for p in problems] == [("t1", ProblemKind.UNKNOWN_ARTIFACT)]
    assert "unknown artifact 'tabel_stats'" in problems[0].message
    assert validate(plan(["table_stats"]), entries) == []
    assert Strategy.model_validate_json(plan(["table_stats"]).model_dump_json()).tasks[
        0
    ].produces == ["table_stats"]
