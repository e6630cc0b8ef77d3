"""The layers of ARCHITECTURE.md: import-linter's contracts (pyproject.toml) catch a broken layer.

`make test` checks that the tree keeps them (`lint-imports`, beside ruff and mypy); this checks that
the contracts are not vacuous.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

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
