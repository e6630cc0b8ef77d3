"""The layers of ARCHITECTURE.md hold: import-linter's contracts (pyproject.toml) are kept."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    command = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or "lint-imports"
    return subprocess.run([command, "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_import_contracts_are_kept() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "3 kept, 0 broken" in result.stdout


def test_an_upward_import_breaks_the_contract(tmp_path: Path) -> None:
    """The contract is not vacuous: a kernel module importing a role is caught."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    for package in ("cli", "flows", "roles", "error_tree", "prompts", "operators", "dbcrew", "lab"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "dbcrew" / "upward.py").write_text("import roles.crew\n")
    result = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, '.');"
                             "from importlinter.cli import lint_imports_command; lint_imports_command()", "--no-cache"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert "dbcrew.upward -> roles.crew" in result.stdout
