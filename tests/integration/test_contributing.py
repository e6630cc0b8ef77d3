"""docs/contributing.md's recipes, followed on a copy of the tree exactly as the doc writes them.

Each fenced block the doc marks as a step (`<!-- step: KIND ARGS -->`) is applied to a copy; then
the copy must hold together as the recipe promises: its vocabulary matches its docs, ruff and
import-linter pass, and the new operator is registered, offered where the recipe says and does
its work (the check judges landed rows, the look-up answers from the real server). A recipe that
drifts from the code (a renamed anchor, a step it no longer needs or newly needs) fails here.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from dbcrew.lab.embedded import EmbeddedPostgres

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "contributing.md"
PACKAGES = ("dbcrew",)
STEP = re.compile(r"<!-- step: (\w+) (.+?) -->\s*\n\s*```\w*\n(.*?)\n\s*```", re.DOTALL)


@dataclass(frozen=True)
class Step:
    kind: str
    path: str
    where: str  # a class, a heading or a line's text; "" for a new file
    text: str


def recipe(title: str) -> list[Step]:
    """The marked steps under the doc's `## title`, in order."""
    doc = DOC.read_text()
    section = doc.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]
    steps = []
    for kind, args, block in STEP.findall(section):
        path, _, where = args.partition(" ")
        steps.append(Step(kind, path, where, textwrap.dedent(block)))
    return steps


def indented(text: str, indent: str) -> list[str]:
    return [indent + line if line else line for line in text.splitlines()]


def apply(step: Step, tree: Path) -> None:
    file = tree / step.path
    if step.kind == "new":
        assert not file.exists(), f"{step.path} exists already: the example must be new"
        file.write_text(step.text + "\n")
        return
    lines = file.read_text().splitlines()
    if step.kind == "member":
        cls = next(
            node
            for node in ast.parse("\n".join(lines)).body
            if isinstance(node, ast.ClassDef) and node.name == step.where
        )
        assert cls.end_lineno is not None
        at, indent = cls.end_lineno, " " * cls.body[-1].col_offset
    elif step.kind == "after":
        at = next(i for i, line in enumerate(lines) if step.where in line) + 1
        following = lines[at] if at < len(lines) else ""
        indent = following[: len(following) - len(following.lstrip())]
    elif step.kind == "end":
        lines += ["", ""]
        at, indent = len(lines), ""
    elif step.kind == "row":
        heading = next(i for i, line in enumerate(lines) if line.startswith(step.where))
        first = next(i for i in range(heading, len(lines)) if lines[i].startswith("|"))
        at = next((i for i in range(first, len(lines)) if not lines[i].startswith("|")), len(lines))
        indent = ""
    else:
        raise AssertionError(f"unknown step kind {step.kind!r} in docs/contributing.md")
    file.write_text("\n".join([*lines[:at], *indented(step.text, indent), *lines[at:]]) + "\n")


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    """A copy of what the recipes touch: the packages, the docs, the config, the vocabulary's test."""
    for package in PACKAGES:
        shutil.copytree(
            ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "tests" / "unit").mkdir(parents=True)
    for name in ("__init__.py", "rows.py", "unit/__init__.py", "unit/test_vocabulary.py"):
        shutil.copy(ROOT / "tests" / name, tmp_path / "tests" / name)
    return tmp_path


def run(tree: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=tree,
        env={"PATH": str(Path(sys.executable).parent), "PYTHONPATH": str(tree), "HOME": str(tree)},
        capture_output=True,
        text=True,
        timeout=600,
    )


def holds_together(tree: Path) -> None:
    """What every recipe promises: ruff, the import layers and the vocabulary's docs all pass."""
    for args in (
        ("-m", "ruff", "check", "--no-cache", *PACKAGES),
        (
            "-c",
            "import sys; sys.path.insert(0, '.');"
            "from importlinter.cli import lint_imports_command; lint_imports_command()",
            "--no-cache",
        ),
        ("-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/unit/test_vocabulary.py"),
    ):
        result = run(tree, *args)
        assert result.returncode == 0, result.stdout + result.stderr


def followed(title: str, tree: Path) -> str:
    """Apply the recipe's steps to `tree`, check that it holds together; the new module's text."""
    steps = recipe(title)
    assert any(s.kind == "new" for s in steps) and any(s.kind != "new" for s in steps)
    for step in steps:
        apply(step, tree)
    holds_together(tree)
    return (tree / next(s.path for s in steps if s.kind == "new")).read_text()


def test_the_add_a_check_recipe_makes_a_check_the_health_review_plans_and_runs(tree: Path):
    name = re.search(r"^def (check_\w+)", followed("Add a health check", tree), re.MULTILINE)
    assert name is not None
    script = f"""
import dataclasses, datetime
from dbcrew.models import Brief
from dbcrew.models.crew import PlanRequest
from dbcrew.settings.run import Settings
from dbcrew.targets import parse_target
from dbcrew.workspace import Workspace
from dbcrew.operators.registry import REGISTRY, OperatorContext, catalogue
from dbcrew.operators.stat_views import TableStatsRow
from dbcrew.roles.brains.rules import RulesBrain
from tests.rows import land_rows

op = REGISTRY["{name.group(1)}"]
brief = Brief(server_version="18.0", server_version_num=180000, database="shop",
              current_user="dba", probed_at=datetime.datetime.now(datetime.UTC))
plan = RulesBrain().plan(PlanRequest(scenario="health", brief=brief, catalogue=catalogue()))
assert op.name in [t.operator for t in plan.tasks], "not in the health review's plan"
fields = {{f.name: 0 for f in dataclasses.fields(TableStatsRow)}}
fields.update(schemaname="public", relname="leftover", last_vacuum=None, last_autovacuum=None,
              last_analyze=None, last_autoanalyze=None, analyzed_seconds_ago=None,
              reltuples=-1.0, reloptions=None, has_primary_key=True)
rows = [TableStatsRow(**{{**fields, "relid": 1, "seq_scan": 7}}),
        TableStatsRow(**{{**fields, "relid": 2, "relname": "busy", "n_live_tup": 5, "seq_scan": 7}})]
ws = Workspace(__import__("pathlib").Path("w.duckdb"))
land_rows(ws, "table_stats", TableStatsRow, rows)
ctx = OperatorContext(target=parse_target("postgresql://u@127.0.0.1:1/x"), workspace=ws,
                      settings=Settings(), brief=brief, run_dir=__import__("pathlib").Path("."))
seen = op.fn(ctx, op.params_model())
print(sorted((f.code, f.object) for f in seen.findings))
"""
    result = run(tree, "-c", script)
    assert result.returncode == 0, result.stdout + result.stderr
    # The example judges an empty table that is scanned, and not a scanned table with rows.
    assert "'public.leftover'" in result.stdout and "busy" not in result.stdout, result.stdout


def test_the_add_an_operator_to_a_surface_recipe_offers_a_working_tool(
    tree: Path, pg: EmbeddedPostgres
):
    text = followed("Add an operator to a surface", tree)
    found = re.search(r"surfaces=(.+?)\)\n\s*def (\w+)", text, re.MULTILINE)
    assert found is not None
    name = found.group(2)
    script = f"""
import anyio, psycopg
from dbcrew.cli.mcp_server import Limits, build_server
from dbcrew.operators.registry import REGISTRY, Surface, catalogue, exposed

op = REGISTRY["{name}"]
offered = {{s.value for s in Surface if op in exposed(s)}}
tools = {{t.name: t for t in anyio.run(lambda: build_server(Limits()).list_tools())}}
assert ("mcp" in offered) == ("{name}" in tools), (offered, sorted(tools))
assert op.name not in [e.name for e in catalogue()] or "plan" in offered
with psycopg.connect({pg.dsn("postgres")!r}) as conn:
    print(sorted(offered), "|", op.fn(conn, op.params_model()).summary)
"""
    result = run(tree, "-c", script)
    assert result.returncode == 0, result.stdout + result.stderr
    offered, summary = result.stdout.split("|", 1)
    assert "mcp" in offered
    # the embedded server's own superuser, whatever roles other tests made
    assert re.search(r"superusers: .*\bpostgres\b", summary), summary


def test_the_add_a_root_cause_recipe_declares_a_cause_in_one_module_that_the_rules_find(tree: Path):
    steps = recipe("Add a root cause")
    code = re.search(r'= "(\w+)"', next(s.text for s in steps if s.kind == "member"))
    assert code is not None
    # One declaration in one module of the causes' families, the code's name and its docs line: no
    # table of the diagnosis, no other module.
    modules = {s.path for s in steps if s.path.endswith(".py")} - {"dbcrew/vocabulary.py"}
    assert len(modules) == 1 and next(iter(modules)).startswith("dbcrew/operators/diagnose/causes/")
    assert {s.path for s in steps if not s.path.endswith(".py")} == {"docs/finding-codes.md"}
    assert not any(s.kind == "new" for s in steps)
    for step in steps:
        apply(step, tree)
    holds_together(tree)
    script = f"""
import dbcrew.operators
from dbcrew.operators.diagnose.candidates import Facts
from dbcrew.operators.diagnose.cross_review import cross_review
from dbcrew.operators.diagnose.experts import CAUSE_TIME, CAUSES, EXPERTS, experts_by_code
from dbcrew.operators.registry import REGISTRY
from dbcrew.operators.window.evidence import BlockedSession, WindowEvidence

declared = next(c for c in CAUSES if c.code == "{code.group(1)}")
expert = declared.expert.name
assert declared.code in CAUSE_TIME and experts_by_code()[declared.code] == expert
assert {{s.name for s in declared.signals}} <= set(REGISTRY[f"expert_{{expert}}"].signals)
for seconds in (120.0, 5.0):
    window = WindowEvidence(
        started_at=0.0, seconds=5.0, interval=0.5, series={{"act.wait_lock": [1.0] * 10}},
        blocked=[BlockedSession(pid=2, blocker_pid=7, blocker_state="idle in transaction",
                                blocker_xact_seconds=seconds)],
    )
    facts = Facts(window, None, [])
    proposed = [c.code for c in EXPERTS[expert](facts)]
    causes, _ = cross_review([c for judge in EXPERTS.values() for c in judge(facts)], facts)
    print(seconds, proposed, [c.code for c in causes])
"""
    result = run(tree, "-c", script)
    assert result.returncode == 0, result.stdout + result.stderr
    # Made-up evidence: a session blocked by a transaction idle for two minutes is the new cause, one
    # idle for five seconds (under the health check's 30 s) is not.
    long, short = result.stdout.splitlines()
    assert long.startswith("120.0") and long.count(code.group(1)) == 2, long
    assert short.startswith("5.0") and code.group(1) not in short, short


def test_the_add_a_metric_recipe_declares_a_metric_once_that_is_read_watched_and_corroborates(
    tree: Path, pg: EmbeddedPostgres
):
    steps = recipe("Add a metric")
    declared = re.search(r'Metric\("([a-z_.]+)"', next(s.text for s in steps))
    assert declared is not None
    name = declared.group(1)
    # Declared once, in the catalogue; no new module, no table of names elsewhere.
    assert not any(s.kind == "new" for s in steps)
    assert [s.path for s in steps if s.path.endswith(".py") and name in s.text] == [
        "dbcrew/operators/window/metrics.py"
    ]
    # Before the recipe the catalogue does not know it (the example is new).
    before = run(
        tree,
        "-c",
        f"from dbcrew.operators.window.metrics import BY_NAME; print({name!r} in BY_NAME)",
    )
    assert before.stdout.strip() == "False", before.stdout + before.stderr
    for step in steps:
        apply(step, tree)
    holds_together(tree)
    # The package still spells no metric's name outside the catalogue, and the knowledge files only its names.
    shutil.copy(ROOT / "tests" / "unit" / "test_typed_names.py", tree / "tests" / "unit")
    scan = run(
        tree,
        *("-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/unit/test_typed_names.py"),
        *("-k", "metric"),
    )
    assert scan.returncode == 0, scan.stdout + scan.stderr
    script = f"""
from datetime import UTC, datetime, timedelta

import psycopg
from psycopg.rows import dict_row

import dbcrew.operators
from dbcrew.operators.diagnose.experts import CAUSES
from dbcrew.operators.window.incidents import SIGNALS, Detector
from dbcrew.operators.window.metrics import parse
from dbcrew.operators.window.readers import read_counters

metric = parse({name!r})
assert SIGNALS[metric.name] == metric.floor, "the detector does not watch it"
print("causes", sorted(str(c.code) for c in CAUSES if metric in c.indicators))
# The detector: quiet passes around a tenth of its floor, then a turnover fifty floors high.
detector, t0, opened = Detector("t"), datetime(2026, 11, 25, 3, tzinfo=UTC), None
for i in range(24):
    value = 100.0 + 10.0 * (i % 3) if i < 20 else 50 * metric.floor
    found = detector.observe(t0 + timedelta(seconds=15 * (i + 1)), 15.0, {{metric.name: value}})
    opened = opened or found
print("incident", opened is not None and [s.name for s in opened.signals])
# The reader, on the real server: a counter of every tick.
with psycopg.connect({pg.dsn("postgres")!r}, autocommit=True, row_factory=dict_row) as conn:
    print("read", metric.name in read_counters(conn, conn.info.server_version))
"""
    result = run(tree, "-c", script)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert lines == {
        "causes": "['io_contention']",
        "incident": f"[{name!r}]",
        "read": "True",
    }, result.stdout
