"""Each class name in the product means one thing: a name defined twice (an `Alert` sent to a
channel and a worker's `Alert`) makes a reader, an import and a grep guess which one is meant."""

from __future__ import annotations

import ast
import tomllib
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PRODUCT = PYPROJECT["tool"]["importlinter"]["root_packages"]


def class_definitions() -> dict[str, list[str]]:
    """Every class name defined in the product packages, with where (path:line)."""
    defined: dict[str, list[str]] = defaultdict(list)
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.ClassDef):
                    defined[node.name].append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return defined


def test_each_class_name_is_defined_once() -> None:
    definitions = class_definitions()
    assert "Report" in definitions, "the walk did not reach the product packages"
    twice = {name: places for name, places in definitions.items() if len(places) > 1}
    assert twice == {}, f"class names defined more than once: {twice}"
