"""The layers of ARCHITECTURE.md: import-linter's contracts (pyproject.toml) catch a broken layer.

`make test` checks that the tree keeps them (`lint-imports`, beside ruff and mypy); this checks that
the contracts are not vacuous.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def lint_with(tmp_path: Path, module: str, source: str) -> subprocess.CompletedProcess[str]:
    """lint-imports over a copy of the tree with one module added (`module`, a path under the root)."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    for package in ("cli", "flows", "roles", "error_tree", "prompts", "operators", "dbcrew", "lab"):
        shutil.copytree(
            ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    (tmp_path / module).write_text(source)
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.path.insert(0, '.');"
            "from importlinter.cli import lint_imports_command; lint_imports_command()",
            "--no-cache",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_an_upward_import_breaks_the_contract(tmp_path: Path) -> None:
    """The contract is not vacuous: a kernel module importing a role is caught."""
    result = lint_with(tmp_path, "dbcrew/upward.py", "import roles.crew.run\n")
    assert result.returncode != 0
    assert "dbcrew.upward -> roles.crew.run" in result.stdout


def test_an_import_circle_between_roles_packages_breaks_the_contract(tmp_path: Path) -> None:
    """The report reads the crew's outcomes; the crew importing the report back closes a circle."""
    result = lint_with(tmp_path, "roles/crew/circle.py", "import roles.report.reporter\n")
    assert result.returncode != 0
    assert "No cycles are allowed in roles" in result.stdout


def test_an_import_circle_inside_operators_breaks_the_contract(tmp_path: Path) -> None:
    """The window floor reads the collectors' machine probe; a collector importing the floor back closes a circle."""
    result = lint_with(
        tmp_path, "operators/collect/circle.py", "import operators.window.evidence\n"
    )
    assert result.returncode != 0
    assert "No cycles are allowed in operators" in result.stdout


@pytest.mark.parametrize(
    ("module", "imported", "message"),
    [
        (
            "operators/watch/borrowed.py",
            "operators.diagnose.experts",
            "operators.watch is not allowed to import operators.diagnose",
        ),
        (
            "operators/diagnose/borrowed.py",
            "operators.watch.sampling",
            "operators.diagnose is not allowed to import operators.watch",
        ),
        (
            "operators/window/borrowed.py",
            "operators.diagnose.experts",
            "operators.window is not allowed to import operators.diagnose",
        ),
    ],
)
def test_an_import_between_the_watch_and_the_diagnosis_breaks_the_contract(
    tmp_path: Path, module: str, imported: str, message: str
) -> None:
    """The watcher and the diagnosis share only the window floor: either wing importing the other, or the floor
    importing a wing, is caught (the planted import alone, with no circle to give it away)."""
    result = lint_with(tmp_path, module, f"import {imported}\n")
    assert result.returncode != 0
    assert message in result.stdout
