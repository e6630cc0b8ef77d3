"""What the wheel installs: one top-level package, `dbcrew`, and every data file the code reads.

A user's site-packages is shared with everything else they install, so the product must not claim names such
as `cli` or `lab` there; and a file the code opens at run time (a knowledge chunk, a template, the error tree)
that no package-data pattern names would be missing from an installed wheel while present in a checkout. Both
are read from pyproject.toml as setuptools reads them (a namespace-aware package search and glob patterns), so
building a wheel, which needs a newer setuptools from the index, is not needed to see them.
"""

from __future__ import annotations

import tomllib
from fnmatch import fnmatch
from pathlib import Path

from setuptools import find_namespace_packages

ROOT = Path(__file__).resolve().parents[2]
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_the_only_top_level_package_is_dbcrew() -> None:
    """setuptools' search (namespace-aware, as pyproject.toml's `packages.find` is) keeps a folder of the checkout
    whose dotted name matches an include pattern; the top-level names are what land in site-packages."""
    include = SETUPTOOLS["packages"]["find"]["include"]
    top_level = {
        path.name
        for path in ROOT.iterdir()
        if path.is_dir()
        and path.name.isidentifier()  # as setuptools skips "dbcrew.egg-info" and ".venv"
        and any(fnmatch(path.name, p) for p in include)
    }
    assert top_level == {"dbcrew"}
    packages = find_namespace_packages(str(ROOT / "dbcrew"))
    assert "operators.checks" in packages, "the search did not reach the product's packages"


def test_every_data_file_under_dbcrew_is_package_data() -> None:
    """Every file of dbcrew/ that is not Python source is named by a package-data pattern."""
    package = ROOT / "dbcrew"
    shipped = {
        path for pattern in SETUPTOOLS["package-data"]["dbcrew"] for path in package.glob(pattern)
    }
    data = {
        path
        for path in package.rglob("*")
        if path.is_file() and path.suffix not in {".py", ".pyc"} and "__pycache__" not in path.parts
    }
    assert any(path.suffix == ".yaml" and "knowledge" in path.parts for path in data)
    assert data - shipped == set()
