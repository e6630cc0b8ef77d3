"""Workspace artifacts as typed keys: the names operators need and produce, declared once beside their producers.

An operator's `needs`, `uses` and `produces`, the plan's DAG validation and the workspace's reads all
take an `Artifact`, never a bare string: each is a module constant made by `declare` in the module
that writes it (a collector, a check's staging, a diagnosis step), so a typo is a NameError at import
(or mypy's complaint), not an empty observation at run time.

An artifact is still its name where a name is what travels: the catalogue a model reads and the
strategy JSON it writes hold strings. `Artifact` is a `str` (it prints, hashes, compares and serializes
as its name), and `parse` is the one way back from a name: it returns the declared key or raises
UnknownArtifact, so a name nobody declared never reaches the workspace.
"""

from __future__ import annotations

from typing import Any

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

from dbcrew.errors import DbcrewError


class UnknownArtifact(DbcrewError, ValueError):
    """A name no module declares as an artifact (a model's plan, a typo)."""

    def __init__(self, name: str):
        known = ", ".join(sorted(_DECLARED))
        super().__init__(f"unknown artifact {name!r}: the declared artifacts are {known}")
        self.name = name


class Artifact(str):
    """A declared workspace artifact (a table, or an observation behind a snapshot key); made only by `declare`.

    As a pydantic field it validates from its name through `parse` and serializes as the name."""

    __slots__ = ()

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(
            parse,
            core_schema.str_schema(),
            serialization=core_schema.plain_serializer_function_ser_schema(str),
        )


_DECLARED: dict[str, Artifact] = {}


def declare(name: str) -> Artifact:
    """The key of artifact `name`, declared by the module that produces it; a second declaration of a name
    fails (one home per artifact)."""
    if name in _DECLARED:
        raise ValueError(f"artifact {name!r} declared twice")
    artifact = _DECLARED[name] = Artifact(name)
    return artifact


def parse(name: str) -> Artifact:
    """The declared artifact named `name` (an Artifact passes through); UnknownArtifact when none is."""
    try:
        return _DECLARED[name]
    except KeyError:
        raise UnknownArtifact(name) from None
