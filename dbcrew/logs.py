"""Loggers whose records carry data as data: every argument of a message is escaped before it is shown.

A log line names tables, statements, targets and errors a database or a user wrote. Such text can
hold a newline that forges a second, official-looking log line, a terminal escape that repaints
the screen or hides what follows, or a bidi override that reorders what a reader sees. The
message's format string is the crew's own and is left as written (its newlines are meant); each
argument (`log.info("watching %s", target)`) is data and gets every control and format character
written as its escape, newline and tab included, so one record stays one line.

A logger filter only sees the records of its own logger (the logging module does not pass a
logger's filters to its children), so each of the crew's modules takes its logger from
`data_logger`, and the flows put the filter on Prefect's two run loggers (`run_loggers_escaped`).
What Prefect logs of its own (a task's exception as it formats it) is outside this.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from dbcrew.text.untrusted import escaped

PREFECT_RUN_LOGGERS = ("prefect.flow_runs", "prefect.task_runs")


class _Shown:
    """An argument as `%s` or `%r` would show it, escaped (a `%r` of a table's name keeps its quotes)."""

    __slots__ = ("value",)

    def __init__(self, value: object):
        self.value = value

    def __str__(self) -> str:
        return escaped(str(self.value), keep="")

    def __repr__(self) -> str:
        return escaped(repr(self.value), keep="")


def _shown(value: object) -> object:
    """Numbers stay numbers (a `%d` or `%.1f` still formats them); anything else is shown escaped."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return _Shown(value)


class DataArguments(logging.Filter):
    """Formats a record's message with its arguments escaped, once, here: every handler after (a console, Prefect's
    API and JSON handlers) then gets plain text and no arguments to format again. Never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.args:
            return True
        args = record.args
        shown = (
            {key: _shown(value) for key, value in args.items()}
            if isinstance(args, Mapping)
            else tuple(_shown(value) for value in args)
        )
        try:
            message = str(record.msg) % shown
        except (TypeError, ValueError, KeyError):
            # a message that does not match its arguments: left as it came, for logging to report as its error
            return True
        record.msg, record.args = message, ()
        return True


def _escaping(logger: logging.Logger) -> logging.Logger:
    if not any(isinstance(f, DataArguments) for f in logger.filters):
        logger.addFilter(DataArguments())
    return logger


def data_logger(name: str) -> logging.Logger:
    """The logger `name` (a module's `__name__`), its records' arguments escaped."""
    return _escaping(logging.getLogger(name))


def run_loggers_escaped() -> None:
    """Prefect's flow- and task-run loggers (what `get_run_logger()` writes through) escape arguments too."""
    for name in PREFECT_RUN_LOGGERS:
        _escaping(logging.getLogger(name))
