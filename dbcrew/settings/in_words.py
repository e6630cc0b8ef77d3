"""A setting's field in words: what it takes (the one-line error of a bad variable, the configuration
page) and its default as the page shows it."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import get_args

from annotated_types import Ge, Gt, Le
from pydantic import SecretStr
from pydantic.fields import FieldInfo


def choices(field: FieldInfo) -> list[str]:
    """The values of a field that is a choice (or unset: `Capability | None`); none for any other."""
    kind = next((a for a in get_args(field.annotation) if a is not type(None)), field.annotation)
    return (
        [member.value for member in kind]
        if isinstance(kind, type) and issubclass(kind, StrEnum)
        else []
    )


def takes(field: FieldInfo) -> str:
    """What a field takes, in words, from its type and bounds: `a whole number from 0 to 10`."""
    if choices(field):
        return f"one of {', '.join(choices(field))}"
    kind = next(
        arg for arg in (get_args(field.annotation) or (field.annotation,)) if arg is not type(None)
    )
    words = {
        bool: "a flag",
        str: "text",
        SecretStr: "a secret (never printed)",
        Path: "a path",
        int: "a whole number",
        float: "a number",
    }[kind]
    ge, gt, le = (
        next((getattr(m, name) for m in field.metadata if isinstance(m, bound)), None)
        for name, bound in (("ge", Ge), ("gt", Gt), ("le", Le))
    )
    if ge is not None and le is not None:
        return f"{words} from {ge} to {le}"
    if gt is not None:
        return f"{words} above {gt}"
    return f"{words} of at least {ge}" if ge is not None else words


def shown_default(value: object) -> str:
    """A default as the configuration page shows it: unset, on/off, or the value in code."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "on" if value else "off"
    shown = (
        f"{value:g}"
        if isinstance(value, float)
        else value.value
        if isinstance(value, StrEnum)
        else value
    )
    return f"`{shown}`"
