"""One `Environment` owns the DBCREW_* variables: nothing else reads them, docs/configuration.md is its
rendering, a run-time change is seen, a bad value is one line; the diagnosis thresholds override like the rest."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dbcrew.errors import UsageError
from dbcrew.settings.configuration_page import configuration_markdown
from dbcrew.settings.environment import (
    Environment,
    InvalidEnvironment,
    debugging,
    environment,
    variable,
)
from dbcrew.settings.overrides import parse_overrides
from dbcrew.settings.run import Settings
from dbcrew.settings.thresholds import Thresholds

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("dbcrew",)
HOME = ROOT / "dbcrew" / "settings" / "environment.py"  # the one module that reads DBCREW_*
VARIABLE = re.compile(r"\bDBCREW_[A-Z0-9_]*[A-Z0-9]\b")
KEYED_READS = {"get", "pop", "setdefault", "__getitem__"}


def _is_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ"
    )


def _read_key(node: ast.AST) -> ast.AST | None:
    """The key of an environment read (os.environ.get/[...]/in, getenv, secret), or None for anything else."""
    if isinstance(node, ast.Call) and node.args:
        func = node.func
        name = (
            func.attr
            if isinstance(func, ast.Attribute)
            else func.id
            if isinstance(func, ast.Name)
            else ""
        )
        if (
            isinstance(func, ast.Attribute) and _is_environ(func.value) and name in KEYED_READS
        ) or name in ("getenv", "secret"):
            return node.args[0]
    if (
        isinstance(node, ast.Subscript)
        and _is_environ(node.value)
        and isinstance(node.ctx, ast.Load)
    ):
        return node.slice
    if (
        isinstance(node, ast.Compare)
        and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops)
        and _is_environ(node.comparators[0])
    ):
        return node.left
    return None


def hand_reads(source: str) -> list[int]:
    """Lines where a module reads a DBCREW_* variable from the environment itself: by its name, by a
    module constant holding it, or by a key computed in a module that spells such names (a loop over them)."""
    tree = ast.parse(source)
    constants = {
        target.id: value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target, value in _pairs(node)
        if isinstance(value, ast.Constant) and isinstance(value.value, str)
    }
    spells = any(
        isinstance(n, ast.Constant) and isinstance(n.value, str) and VARIABLE.fullmatch(n.value)
        for n in ast.walk(tree)
    )
    found = []
    for node in ast.walk(tree):
        key = _read_key(node)
        if key is None:
            continue
        if isinstance(key, ast.Constant):
            named = key.value if isinstance(key.value, str) else ""
        elif isinstance(key, ast.Name) and key.id in constants:
            named = constants[key.id]
        else:
            named = "DBCREW_?" if spells else ""
        if named.startswith("DBCREW_"):
            found.append(node.lineno)
    return found


def _pairs(node: ast.Assign) -> list[tuple[ast.Name, ast.expr]]:
    """(name, value) of `A = "x"` and `A, B = "x", "y"`."""
    out = []
    for target in node.targets:
        if isinstance(target, ast.Name):
            out.append((target, node.value))
        elif isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
            out += [
                (t, v)
                for t, v in zip(target.elts, node.value.elts, strict=False)
                if isinstance(t, ast.Name)
            ]
    return out


def product_modules() -> list[Path]:
    return sorted(
        path for package in PRODUCT for path in (ROOT / package).rglob("*.py") if path != HOME
    )


@pytest.mark.parametrize(
    "source",
    [
        'import os\nos.environ.get("DBCREW_X")',
        'import os\nos.getenv("DBCREW_X", "1")',
        'import os\nNAME = "DBCREW_X"\nvalue = os.environ[NAME]',
        'import os\nA, B = "DBCREW_A", "DBCREW_B"\nos.environ.get(B)',
        'import os\nif "DBCREW_X" in os.environ:\n    pass',
        'from os import environ\nenviron.get("DBCREW_X")',
        'import os\nfor env in ("DBCREW_A", "DBCREW_B"):\n    os.environ.get(env, "").strip()',
        'from dbcrew.secrets import secret\nsecret("DBCREW_X")',
    ],
)
def test_the_check_finds_a_hand_read(source: str):
    assert hand_reads(source) != [], source


@pytest.mark.parametrize(
    "source",
    [
        'import os\nos.environ.get("XDG_CACHE_HOME")',
        'import os\nchild = {**os.environ, "DBCREW_REPORTS_DIR": "reports"}',  # a child's environment, written
        "import os\nvalue = os.environ[source.env]",
        'print("set DBCREW_DEBUG=1 for the traceback")',
    ],
)
def test_the_check_leaves_other_code_alone(source: str):
    assert hand_reads(source) == [], source


def test_no_module_but_the_settings_reads_a_dbcrew_variable():
    found = {
        str(path.relative_to(ROOT)): lines
        for path in product_modules()
        if (lines := hand_reads(path.read_text()))
    }
    assert found == {}, f"read DBCREW_* through dbcrew.settings.environment(): {found}"


def test_each_setting_is_imported_from_its_home_module():
    """dbcrew/settings/ is one module per concern and its __init__ only maps them: a name imported from
    the package itself would be a second way to the same setting."""
    package = ast.parse((ROOT / "dbcrew" / "settings" / "__init__.py").read_text())
    assert [type(node) for node in package.body] == [ast.Expr]  # the docstring alone
    found = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for folder in ("dbcrew", "bench", "tests")
        for path in (ROOT / folder).rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and node.module == "dbcrew.settings"
    ]
    assert found == []


def test_every_variable_the_product_names_is_owned_by_the_environment():
    owned = {variable(name) for name in Environment.model_fields}
    named = {
        match for path in [*product_modules(), HOME] for match in VARIABLE.findall(path.read_text())
    }
    assert named - owned == set()
    assert len(owned) == 27


def test_the_configuration_page_is_the_environments_rendering():
    page = (ROOT / "docs" / "configuration.md").read_text()
    assert page == configuration_markdown(), (
        "regenerate it: python -m dbcrew.settings > docs/configuration.md"
    )
    printed = subprocess.run(
        [sys.executable, "-m", "dbcrew.settings"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    assert printed == page
    for name, field in Environment.model_fields.items():
        assert field.description and f"| `{variable(name)}` |" in page


def test_a_variable_changed_at_run_time_is_seen_and_an_unchanged_one_costs_no_validation(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setenv("DBCREW_LLM_MODEL", "first")
    first = environment()
    assert (
        first.llm_model == "first" and environment() is first
    )  # the same variables: the same object, not validated again
    monkeypatch.setenv("DBCREW_LLM_MODEL", "second")
    assert environment().llm_model == "second"
    monkeypatch.setenv("DBCREW_LLM_MODEL", "")  # empty counts as unset
    monkeypatch.delenv("DBCREW_REPORTS_RETENTION_DAYS", raising=False)
    assert (environment().llm_model, environment().reports_retention_days) == ("gpt-4o-mini", 14.0)


def test_bad_values_are_one_line_naming_each_variable(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DBCREW_LLM_TIMEOUT", "abc")
    monkeypatch.setenv("DBCREW_LLM_DIAG_EXPERTS", "0")
    monkeypatch.setenv("DBCREW_LLM_CAPABILITY", "telepathy")
    with pytest.raises(InvalidEnvironment) as caught:
        environment()
    assert str(caught.value) == (
        "DBCREW_LLM_TIMEOUT='abc': give a number above 0; DBCREW_LLM_CAPABILITY='telepathy': choose"
        " one of tools, json_schema, prompted; DBCREW_LLM_DIAG_EXPERTS='0': give a whole number of at least 1"
    )
    assert isinstance(caught.value, UsageError) and isinstance(
        caught.value, ValueError
    )  # the CLI's exit 2


def test_debugging_answers_whatever_else_is_wrong(monkeypatch: pytest.MonkeyPatch):
    """The last line of defence asks it while reporting an error: it must not raise a second one."""
    monkeypatch.setenv("DBCREW_LLM_TIMEOUT", "abc")
    monkeypatch.delenv("DBCREW_DEBUG", raising=False)
    assert debugging() is False
    for value, on in (
        ("1", True),
        ("yes", True),
        ("anything", True),
        ("0", False),
        ("off", False),
        ("", False),
    ):
        monkeypatch.setenv("DBCREW_DEBUG", value)
        assert debugging() is on, value


def test_a_diagnosis_threshold_is_overridden_like_any_other():
    overrides = parse_overrides(
        ["diagnosis.update_rows_per_s_per_core=6000", "dead_tuples_min=500"]
    )
    assert overrides == {"diagnosis.update_rows_per_s_per_core": 6000, "dead_tuples_min": 500}
    settings = Settings(
        thresholds=Thresholds(**overrides)
    )  # as the review flow builds them from its `thresholds` parameter
    again = Settings.model_validate_json(
        settings.model_dump_json()
    )  # a flow parameter between processes
    assert again.thresholds.dead_tuples_min == 500
    assert (
        again.thresholds.diagnosis.update_rows_per_s_per_core,
        again.thresholds.diagnosis.delete_rows_per_s,
    ) == (6000, 2000)
    with pytest.raises(
        ValueError, match=r"^--threshold: diagnosis.query_share .*must not be negative"
    ):
        parse_overrides(["diagnosis.query_share=-0.5"])
    with pytest.raises(ValueError, match="takes a whole number"):
        parse_overrides(["diagnosis.delete_rows_per_s=0.5"])
