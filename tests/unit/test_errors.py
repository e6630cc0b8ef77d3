"""Every exception the product defines is a DbcrewError, placed in the tree dbcrew/errors.py draws:
one `except DbcrewError` catches what dbcrew raises on purpose, and the drawing cannot drift."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import tomllib
from functools import cache
from pathlib import Path

import dbcrew.errors
from dbcrew.errors import DbcrewError

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PRODUCT = PYPROJECT["tool"]["importlinter"]["root_packages"]
# "├── StoreUnavailable    dbcrew.store, a RuntimeError: ...": the drawing, four columns a level
TREE_LINE = re.compile(
    r"^(?P<indent>[│├└─ ]*)(?P<name>\w+)\s+(?P<module>[\w.]+)"
    r"(, an? (?P<builtin>\w+))?:"
)


@cache
def product_exceptions() -> dict[str, type[BaseException]]:
    """The exception classes defined at the top of the product's modules."""
    found: dict[str, type[BaseException]] = {}
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            if not any(isinstance(n, ast.ClassDef) for n in ast.parse(path.read_text()).body):
                continue  # defines no class: no need to import it
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            found |= {
                cls.__name__: cls
                for cls in vars(importlib.import_module(name)).values()
                if inspect.isclass(cls)
                and issubclass(cls, BaseException)
                and cls.__module__ == name
            }
    return found


def drawn_tree() -> dict[str, tuple[str | None, str, str | None]]:
    """Each class the docstring draws: (its parent there, its module, the builtin base it names)."""
    drawn: dict[str, tuple[str | None, str, str | None]] = {}
    path: list[str] = []
    for line in (dbcrew.errors.__doc__ or "").splitlines():
        match = TREE_LINE.match(line)
        if match and (line.startswith(DbcrewError.__name__) or line[0] in "│├└"):
            depth = len(match["indent"]) // 4
            path[depth:] = [match["name"]]
            parent = path[depth - 1] if depth else None
            drawn[match["name"]] = (parent, match["module"], match["builtin"])
    return drawn


def test_every_product_exception_derives_from_the_kernel_root() -> None:
    exceptions = product_exceptions()
    assert {"DbcrewError", "UsageError", "BrainError", "OperatorMisfit"} <= exceptions.keys()
    outside = sorted(name for name, cls in exceptions.items() if not issubclass(cls, DbcrewError))
    assert outside == [], f"exceptions not under dbcrew.errors.DbcrewError: {outside}"


def test_the_docstring_draws_each_exception_under_its_bases_in_its_module() -> None:
    """Parent, module and builtin base (a ValueError callers catch as one) as the code has them."""
    exceptions = product_exceptions()
    drawn = drawn_tree()
    assert drawn.keys() == exceptions.keys(), "dbcrew/errors.py's tree and the exceptions differ"
    for name, cls in exceptions.items():
        base = next((b.__name__ for b in cls.__bases__ if issubclass(b, DbcrewError)), None)
        builtin = next(
            (
                b.__name__
                for b in cls.__bases__
                if not issubclass(b, DbcrewError) and b is not Exception
            ),
            None,
        )
        assert drawn[name] == (base, cls.__module__, builtin), f"{name} is drawn as {drawn[name]}"
