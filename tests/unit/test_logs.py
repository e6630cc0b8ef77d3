"""A log record's arguments are data: one record is one line, and nothing in it reaches the terminal as a control."""

from __future__ import annotations

import io
import logging

import pytest

import dbcrew.flows  # noqa: F401  (its import puts the filter on Prefect's run loggers)
from dbcrew.logs import PREFECT_RUN_LOGGERS, DataArguments, data_logger

FORGED = "orders\n2026-11-30 12:00:00 ERROR | the store was dropped"
ESCAPE = "\x1b[2J\x1b]0;pwned\x07"
BIDI = "name\u202etxt.exe"


def _through(logger: logging.Logger, written: io.StringIO, *args: object, msg: str) -> list[str]:
    handler = logging.StreamHandler(written)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger.addHandler(handler)
    old_level, logger.level = logger.level, logging.INFO
    try:
        logger.warning(msg, *args)
    finally:
        logger.removeHandler(handler)
        logger.level = old_level
    return written.getvalue().splitlines()


@pytest.mark.parametrize(
    "name", ["dbcrew.tests.a_module", *PREFECT_RUN_LOGGERS], ids=["crew", "flow_runs", "task_runs"]
)
def test_an_argument_cannot_forge_a_line_or_command_the_terminal(name: str) -> None:
    logger = data_logger(name) if name.startswith("dbcrew") else logging.getLogger(name)
    shown = _through(logger, io.StringIO(), FORGED, ESCAPE, BIDI, msg="table %s: %s %s")
    assert len(shown) == 1, shown
    assert "orders\\n2026-11-30" in shown[0]
    assert "\\x1b[2J\\x1b]0;pwned\\x07" in shown[0]
    assert "name\\u202etxt.exe" in shown[0]
    assert not any(ch in shown[0] for ch in "\x1b\x07\u202e")


def test_numbers_still_format_and_the_crews_own_newlines_stay() -> None:
    logger = data_logger("dbcrew.tests.numbers")
    shown = _through(
        logger, io.StringIO(), 3, 25.0, None, True, msg="%d passes\nshare %.0f%% %s %s"
    )
    assert shown == ["WARNING 3 passes", "share 25% None True"]


def test_mapping_arguments_are_escaped_too() -> None:
    logger = data_logger("dbcrew.tests.mapping")
    shown = _through(logger, io.StringIO(), {"t": "a\nb", "n": 2}, msg="%(t)s x%(n)d")
    assert shown == ["WARNING a\\nb x2"]


def test_the_filter_is_put_on_a_logger_once() -> None:
    first = data_logger("dbcrew.tests.once")
    again = data_logger("dbcrew.tests.once")
    assert first is again
    assert len(first.filters) == 1


def test_a_repr_keeps_its_quotes_and_an_exception_its_type() -> None:
    logger = data_logger("dbcrew.tests.repr")
    shown = _through(logger, io.StringIO(), "a\nb", ValueError("bad\x1b[0m"), msg="%r failed: %r")
    assert shown == ["WARNING 'a\\nb' failed: ValueError('bad\\x1b[0m')"]


def test_a_message_that_does_not_match_its_arguments_is_left_for_logging_to_report() -> None:
    record = logging.LogRecord(
        "dbcrew.tests", logging.WARNING, __file__, 1, "%d rows", ("x\n",), None
    )
    assert DataArguments().filter(record) is True
    assert (record.msg, record.args) == ("%d rows", ("x\n",))
