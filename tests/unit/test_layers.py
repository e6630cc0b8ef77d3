"""The layers of ARCHITECTURE.md: import-linter's contracts (pyproject.toml) catch a broken layer.

`make test` checks that the tree keeps them (`lint-imports`, beside ruff and mypy); this checks that
the contracts are not vacuous.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def lint_with(tmp_path: Path, module: str, source: str) -> subprocess.CompletedProcess[str]:
    """lint-imports over a copy of the tree with `source` added to `module` (a path under the root)."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(
        ROOT / "dbcrew", tmp_path / "dbcrew", ignore=shutil.ignore_patterns("__pycache__")
    )
    with (tmp_path / module).open("a") as planted:  # a new module, or an import added to one
        planted.write(source)
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
    result = lint_with(tmp_path, "dbcrew/deadline.py", "\nimport dbcrew.roles.crew.run\n")
    assert result.returncode != 0
    assert "dbcrew.deadline -> dbcrew.roles.crew.run" in result.stdout


def test_an_import_circle_between_roles_packages_breaks_the_contract(tmp_path: Path) -> None:
    """The report reads the crew's outcomes; the crew importing the report back closes a circle."""
    result = lint_with(
        tmp_path, "dbcrew/roles/crew/circle.py", "import dbcrew.roles.report.reporter\n"
    )
    assert result.returncode != 0
    assert "No cycles are allowed in dbcrew.roles" in result.stdout


def test_an_import_circle_inside_operators_breaks_the_contract(tmp_path: Path) -> None:
    """The window floor reads the collectors' machine probe; a collector importing the floor back closes a circle."""
    result = lint_with(
        tmp_path, "dbcrew/operators/collect/circle.py", "import dbcrew.operators.window.evidence\n"
    )
    assert result.returncode != 0
    assert "No cycles are allowed in dbcrew.operators" in result.stdout


@pytest.mark.parametrize(
    ("module", "imported", "message"),
    [
        (
            "dbcrew/operators/watch/borrowed.py",
            "dbcrew.operators.diagnose.experts",
            "dbcrew.operators.watch is not allowed to import dbcrew.operators.diagnose",
        ),
        (
            "dbcrew/operators/diagnose/borrowed.py",
            "dbcrew.operators.watch.sampling",
            "dbcrew.operators.diagnose is not allowed to import dbcrew.operators.watch",
        ),
        (
            "dbcrew/operators/window/borrowed.py",
            "dbcrew.operators.diagnose.experts",
            "dbcrew.operators.window is not allowed to import dbcrew.operators.diagnose",
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


def test_the_agent_loop_importing_one_of_its_users_breaks_the_contract(tmp_path: Path) -> None:
    """The agent loop serves ask and the diagnosis knowing neither: reaching into one of them is caught by
    name (the forbidden contract's message, not only the circle such an import also closes)."""
    result = lint_with(tmp_path, "dbcrew/roles/agent/borrowed.py", "import dbcrew.roles.ask.llm\n")
    assert result.returncode != 0
    assert "dbcrew.roles.agent is not allowed to import dbcrew.roles.ask" in result.stdout


UPPER = {"cli", "flows", "roles", "operators", "error_tree", "prompts", "lab"}


def test_every_kernel_module_is_a_member_of_the_kernel_layer() -> None:
    """The layers contract names the kernel's modules one by one (import-linter has no "the rest" layer): a
    module added to dbcrew/ outside the upper folders and left out of that list would be unchecked."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [c["layers"] for c in config["contracts"] if c["type"] == "layers"]
    kernel_layer = {name.strip() for name in layers[-1].split(":")}
    on_disk = {
        path.stem if path.suffix == ".py" else path.name
        for path in (ROOT / "dbcrew").iterdir()
        if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").exists()
    }
    assert on_disk - UPPER == kernel_layer
