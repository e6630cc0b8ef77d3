"""Typed names between operators: what an operator needs, uses and produces is a declared key, never a bare name;
a window's metric is the catalogue's constant, never its name's text.

A bare string in a registration was a typo waiting to be an empty observation at run time; a key is
declared once beside its producer (dbcrew/artifacts.py) and every reader imports it. The AST scan
holds the whole package to that; the plan still travels as names, which parse back to the keys.
Likewise a metric-name string ("db.tup_inserted") read a series that a typo left empty: the metric
catalogue (dbcrew/operators/window/metrics.py) declares each once, and no other module of the package
spells one (nor a prefix of one); the knowledge files, which name metrics as text, name only the
catalogue's.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

import dbcrew.operators  # noqa: F401  (registers every operator, declaring their artifacts)
from dbcrew.artifacts import Artifact, UnknownArtifact, declare, parse
from dbcrew.models import AgentSpec, CatalogueEntry, Role, Strategy, TaskSpec
from dbcrew.operators.diagnose.experts import CAUSES, EXPERT_SIGNALS
from dbcrew.operators.knowledge import KNOWLEDGE_DIR, Chunk, load_chunks
from dbcrew.operators.registry import REGISTRY, catalogue
from dbcrew.operators.window import metrics
from dbcrew.operators.window.metrics import (
    METRICS,
    UnknownMetric,
    looks_like_a_metric,
)
from dbcrew.roles.crew.validators import validate
from dbcrew.vocabulary import ProblemKind

PACKAGE = Path(__file__).resolve().parents[2] / "dbcrew"
REGISTERING = {
    "operator",
    "check",
}  # the decorators that register an operator (registry.py, checks/base.py)
ARTIFACT_KEYWORDS = {"needs", "uses", "produces"}
CATALOGUE = Path(metrics.__file__).resolve()
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


def metric_names(source: str) -> list[tuple[int, str]]:
    """(line, text) for every string of `source` that is a metric's name or shaped like one (a catalogue
    kind, a dot, lower-case words: "act.wait_lock", the prefix "io.wal.", the "db." of f"db.{column}");
    a docstring or a message that mentions a metric among other words is prose, not a name."""
    return sorted(
        (node.lineno, node.value)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and (node.value in metrics.BY_NAME or looks_like_a_metric(node.value))
    )


PLANTED_METRICS = """
\"\"\"Lock waits (act.wait_lock) and inserts (db.tup_inserted) are prose here.\"\"\"
waiting = w.mean("act.wait_lock")
rows = w.mean(ROWS_INSERTED) / w.mean(COMMITS)
io_time = w.mean(f"io.{obj}.read_time")
signals = ("db.tup_", WAL_IO, "Lock:transactionid", "public.orders")
shown = {"host.cpu_busy": "busy"}
raise ValueError(f"unknown metric {name!r}: see act.active")
"""


def test_the_metric_scan_finds_each_planted_name_and_nothing_typed():
    assert metric_names(PLANTED_METRICS) == [
        (3, "act.wait_lock"),
        (5, "io."),
        (6, "db.tup_"),
        (7, "host.cpu_busy"),
    ]


def test_every_catalogue_name_and_family_is_shaped_like_a_metric():
    """So that the scan's shape rule catches any of them, and a new kind of metric widens it."""
    families = [v for v in vars(metrics).values() if isinstance(v, metrics.Family)]
    assert families and all(f.members() for f in families)
    assert all(
        looks_like_a_metric(t) for t in [m.name for m in METRICS] + [f.name for f in families]
    )


def test_no_metric_name_anywhere_in_the_package_outside_the_catalogue():
    found = {
        str(path.relative_to(PACKAGE)): names
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.resolve() != CATALOGUE and (names := metric_names(path.read_text()))
    }
    assert found == {}


def test_a_metric_name_that_travelled_as_text_parses_back_and_an_unknown_one_is_refused():
    assert all(metrics.parse(m.name) is m for m in METRICS)
    with pytest.raises(UnknownMetric, match=r"unknown metric 'db.tup_insertd': .*db\.tup_inserted"):
        metrics.parse("db.tup_insertd")


def _texts(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _texts(v)]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    return []


def test_every_metric_the_knowledge_files_name_is_the_catalogues():
    named = {
        text
        for path in sorted(KNOWLEDGE_DIR.rglob("*.yaml"))
        for text in _texts(yaml.safe_load(path.read_text()))
        if looks_like_a_metric(text)
    }
    assert len(named) >= 10  # the chunks' metric lists are read
    assert sorted(n for n in named if n not in metrics.BY_NAME) == []


def test_a_knowledge_chunk_naming_an_unknown_metric_is_refused_where_it_is_loaded():
    raw = load_chunks()[0].model_dump()
    with pytest.raises(ValueError, match=r"unknown metric 'act\.wait_lok'"):
        Chunk.model_validate({**raw, "metrics": ["act.wait_lok", "Lock:tuple"]})
    assert Chunk.model_validate({**raw, "metrics": ["act.wait_lock", "Lock:tuple"]})


def test_a_cause_names_its_metrics_typed_and_its_expert_is_called_in_by_their_names():
    for declared in CAUSES:
        assert all(type(m) is metrics.Metric for m in declared.indicators), declared.code
        assert declared.signals and all(
            isinstance(s, metrics.Metric | metrics.Family) for s in declared.signals
        ), declared.code
        prefixes, _words = EXPERT_SIGNALS[declared.expert.name]
        assert {s.name for s in declared.signals} <= set(prefixes)
        assert set(prefixes) <= set(REGISTRY[f"expert_{declared.expert.name}"].signals)
