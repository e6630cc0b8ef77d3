"""`--threshold NAME=VALUE`: the names a run may override (`OVERRIDABLE`) and their values, checked."""

from __future__ import annotations

import math
import operator
import re
from decimal import Decimal

from pydantic import ValidationError
from pydantic.fields import FieldInfo

from dbcrew.settings.diagnosis import DiagnosisThresholds
from dbcrew.settings.thresholds import Thresholds

OVERRIDABLE: dict[str, FieldInfo] = {
    **{name: field for name, field in Thresholds.model_fields.items() if name != "diagnosis"},
    **{f"diagnosis.{name}": field for name, field in DiagnosisThresholds.model_fields.items()},
}  # what --threshold NAME=VALUE may name


PLAIN_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def parse_overrides(pairs: list[str]) -> dict[str, float]:
    """`name=value` pairs (the CLI's --threshold) checked against Thresholds; ValueError in one line.

    A value is a plain decimal (`300`, `0.5`, `1e6`): not `nan` or `inf`, which compare false
    with everything and would silently switch a check off, nor `1_000` or non-ASCII digits,
    which Python's float() accepts. Counts and sizes take whole numbers, kept exact as int.
    """
    known = OVERRIDABLE
    overrides: dict[str, float] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        name, raw = name.strip(), raw.strip()
        if not sep or name not in known:
            raise ValueError(
                f"--threshold {pair!r}: expected NAME=VALUE with NAME one of {', '.join(sorted(known))}"
            )
        if not PLAIN_NUMBER.fullmatch(raw):
            raise ValueError(
                f"--threshold {pair!r}: {raw!r} is not a number (write e.g. 300, 0.5 or 1e6)"
            )
        overrides[name] = _number(pair, raw, whole=known[name].annotation is int)
    try:
        checked = Thresholds(**overrides)
    except ValidationError as exc:
        error = exc.errors()[0]
        raise ValueError(
            f"--threshold: {'.'.join(map(str, error['loc']))} {error['msg'].lower()}"
        ) from None
    return {name: operator.attrgetter(name)(checked) for name in overrides}


def _number(pair: str, raw: str, *, whole: bool) -> float:
    """The exact value of a plain decimal: an int for a count or size, a finite float otherwise."""
    value = Decimal(raw)
    if whole:
        if value.adjusted() >= 18:  # checked before any conversion: 1e999999999 would take minutes
            raise ValueError(f"--threshold {pair!r}: {raw!r} is out of range")
        if value != value.to_integral_value():
            raise ValueError(f"--threshold {pair!r}: takes a whole number")
        return int(value)
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"--threshold {pair!r}: {raw!r} is out of range")
    return number
