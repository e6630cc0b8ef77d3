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


def test_an_upward_import_breaks_the_contract(tmp_path: Path) -> None:
    """The contract is not vacuous: a kernel module importing a role is caught."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    for package in ("cli", "flows", "roles", "error_tree", "prompts", "operators", "dbcrew", "lab"):
        shutil.copytree(
            ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    (tmp_path / "dbcrew" / "upward.py").write_text("import roles.crew.run\n")
    result = subprocess.run(
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
    assert result.returncode != 0
    assert "dbcrew.upward -> roles.crew.run" in result.stdout
