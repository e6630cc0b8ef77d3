"""Fault injector: counts calls per operator and raises the configured failure, for real."""

from __future__ import annotations

import threading
from collections import Counter

from dbcrew.models.faults import FaultKind, FaultSpec
from dbcrew.targets import PostgresTarget
from operators.registry import OperatorMisfit

INJECTED_TIMEOUT_MS = 10


class FaultInjector:
    def __init__(self, faults: list[FaultSpec], target: PostgresTarget):
        self._faults = {f.operator: f for f in faults}
        self._target = target
        self._calls: Counter[str] = Counter()
        self._lock = threading.Lock()

    def before(self, operator: str) -> None:
        fault = self._faults.get(operator)
        if fault is None:
            return
        with self._lock:
            self._calls[operator] += 1
            call = self._calls[operator]
        if fault.times is not None and call > fault.times:
            return
        if fault.kind is FaultKind.TIMEOUT:
            # A genuine statement timeout from the server, so the error text and class are real.
            with self._target.session(statement_timeout_ms=INJECTED_TIMEOUT_MS) as conn:
                conn.execute("SELECT pg_sleep(1)")
        raise OperatorMisfit(f"{operator} cannot serve this target (injected misfit, call {call})")
