"""Properties of the option parsers (`--threshold`, `--inject-fault`): a valid value round-trips, anything else is one ValueError line."""

from __future__ import annotations

import math
import re

import annotated_types
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from dbcrew.models.faults import FaultKind, FaultSpec
from dbcrew.settings.overrides import OVERRIDABLE, parse_overrides
from dbcrew.settings.thresholds import Thresholds

FIELDS = OVERRIDABLE  # the flat thresholds and the nested diagnosis ones (diagnosis.NAME)
WHOLE = sorted(n for n, f in FIELDS.items() if f.annotation is int)
FRACTIONAL = sorted(n for n, f in FIELDS.items() if f.annotation is float)


def one_line_value_error(call) -> None:  # type: ignore[no-untyped-def]
    """The call either returns or raises a plain ValueError whose message is one line."""
    try:
        call()
    except ValueError as exc:
        message = str(exc)
        assert type(exc) is ValueError, (
            f"{type(exc).__name__}: {message}"
        )  # not a pydantic dump, not an int() complaint
        assert message and "\n" not in message, message


def value_of(thresholds: Thresholds, name: str) -> object:
    """A threshold by its override name: `diagnosis.NAME` is the nested one."""
    group, _, leaf = name.rpartition(".")
    return thresholds.model_dump()[group][leaf] if group else thresholds.model_dump()[leaf]


@given(st.sampled_from(WHOLE), st.integers(0, 10**17))
def test_a_whole_threshold_round_trips_exactly(name: str, value: int):
    assert parse_overrides([f"{name}={value}"]) == {name: value}
    assert value_of(Thresholds(**parse_overrides([f" {name} = {value} "])), name) == value


def upper_bound(name: str) -> float | None:
    """The field's own `le` (a share is at most 1), None when unbounded above."""
    return next((m.le for m in FIELDS[name].metadata if isinstance(m, annotated_types.Le)), None)


@given(st.data())
def test_a_fractional_threshold_round_trips_exactly(data: st.DataObject):
    name = data.draw(st.sampled_from(FRACTIONAL))
    value = data.draw(
        st.floats(min_value=0, max_value=upper_bound(name), allow_nan=False, allow_infinity=False)
    )
    assert parse_overrides([f"{name}={value!r}"]) == {name: value}


@given(
    st.sampled_from(sorted(FIELDS)),
    st.sampled_from(
        [
            "nan",
            "NaN",
            "inf",
            "-inf",
            "Infinity",
            "1e400",
            "1_000",
            "١",
            "0x10",
            "",
            "1.2.3",
            "1e999999999",
        ]
    ),
)
def test_nan_infinity_and_python_only_spellings_are_refused(name: str, raw: str):
    with pytest.raises(ValueError, match=r"^--threshold .*(not a number|out of range)") as caught:
        parse_overrides([f"{name}={raw}"])
    assert name in str(caught.value)


@given(
    st.sampled_from(WHOLE),
    st.floats(min_value=0.01, max_value=1e6).filter(lambda v: not v.is_integer()),
)
def test_a_count_refuses_a_fraction(name: str, value: float):
    with pytest.raises(ValueError, match="takes a whole number"):
        parse_overrides([f"{name}={value!r}"])


@given(
    st.sampled_from(sorted(FIELDS)),
    st.floats(max_value=-1e-9, allow_nan=False, allow_infinity=False),
)
def test_a_negative_threshold_is_refused(name: str, value: float):
    with pytest.raises(ValueError, match=f"--threshold.*{name}"):
        parse_overrides([f"{name}={value!r}"])


@given(st.lists(st.text(), max_size=3))
@example(["dead_tuples_min=nan"])
@example(["no_such_threshold=1", "dead_tuples_ratio=0.5"])
@example(["dead_tuples_ratio=\n1"])
def test_any_threshold_text_is_an_override_or_one_line_of_error(pairs: list[str]):
    one_line_value_error(lambda: parse_overrides(pairs))


@given(st.sampled_from(sorted(FIELDS)), st.text().filter(lambda t: "=" not in t))
def test_unknown_names_are_refused_with_the_known_ones(known: str, name: str):
    if name.strip() in FIELDS:
        return
    with pytest.raises(ValueError, match="expected NAME=VALUE") as caught:
        parse_overrides([f"{name}=1"])
    assert known in str(caught.value)


def test_nan_once_switched_a_check_off():
    """`value < threshold` is false for every value when threshold is NaN: the check never fires."""
    assert math.isnan(float("nan")) and not (5.0 > float("nan"))
    with pytest.raises(ValueError, match="'nan' is not a number"):
        parse_overrides(["long_running_query_seconds=nan"])


operator_names = st.from_regex(r"\A[a-z][a-z0-9_]{0,30}\Z")
faults = st.builds(
    FaultSpec,
    operator=operator_names,
    kind=st.sampled_from(FaultKind),
    times=st.none() | st.integers(1, 10**6),
)


@given(faults)
def test_a_fault_round_trips_through_its_text(fault: FaultSpec):
    assert FaultSpec.parse(str(fault)) == fault


@given(st.text())
@example("check_sessions:timeout:0")
@example("check_sessions:timeout:-1")
@example("check_sessions:timeout: 2")
@example("check_sessions:timeout:١")
@example("check_sessions:timeout:" + "9" * 5000)
@example("check_sessions:Timeout")
@example(":timeout")
def test_any_fault_text_is_a_fault_or_one_line_of_error(text: str):
    one_line_value_error(lambda: FaultSpec.parse(text))
    for kind in FaultKind:
        one_line_value_error(
            lambda kind=kind: FaultSpec.parse(f"check_sessions:{kind.value}:{text}")
        )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "check_sessions:timeout:0",
            "times '0' is not a whole number of 1 or more",
        ),  # was a pydantic dump
        (
            "check_sessions:bogus",
            "kind 'bogus' is not one of timeout, misfit",
        ),  # was "'bogus' is not a valid FaultKind"
        ("check_sessions:timeout:x", "times 'x'"),  # was "invalid literal for int() with base 10"
        (":timeout", "expected operator:kind[:times]"),  # was accepted: a fault on no operator
    ],
)
def test_what_the_fault_properties_found(text: str, message: str):
    with pytest.raises(ValueError, match=re.escape(message)):
        FaultSpec.parse(text)
