"""Fault injector: counts calls per operator and raises the configured failure, for real.

Run-time faults fail an operator's call with a genuine error (a server-side statement timeout, a
refused connection, an OperatorMisfit); plan faults damage the planner's draft before reflection.
"""

from __future__ import annotations

import threading
from collections import Counter

import psycopg

from dbcrew.errors import TargetError
from dbcrew.models import Strategy
from dbcrew.models.faults import FaultKind, FaultSpec
from dbcrew.operators.registry import OperatorMisfit
from dbcrew.targets import PostgresTarget
from dbcrew.targets.postgres import first_line

INJECTED_TIMEOUT_MS = 10
# Port 1 on loopback: nothing listens there, so the connection is refused by the kernel, quickly.
UNREACHABLE = "host=127.0.0.1 port=1 connect_timeout=2"
# A parameter the operators' models reject: unknown for most, out of range (ge=0) for window_seconds.
BAD_PARAMS = {"window_seconds": -1}


class FaultInjector:
    def __init__(self, faults: list[FaultSpec], target: PostgresTarget):
        self._faults = {f.operator: f for f in faults if not f.kind.damages_plan}
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
        if fault.kind is FaultKind.DISCONNECT:
            raise self._refused()
        raise OperatorMisfit(f"{operator} cannot serve this target (injected misfit, call {call})")

    def _refused(self) -> TargetError:
        """The error a refused connection really raises (the target's display in place of port 1)."""
        try:
            psycopg.connect(UNREACHABLE).close()
        except psycopg.OperationalError as exc:
            return TargetError(f"cannot connect to {self._target.display}: {first_line(exc)}")
        return TargetError(f"cannot connect to {self._target.display}: connection refused")


def damage_plan(strategy: Strategy, faults: list[FaultSpec]) -> Strategy:
    """The draft as a careless planner would write it: bad parameters, a task's agent or dependencies left out."""
    for fault in faults:
        task = next((t for t in strategy.tasks if t.operator == fault.operator), None)
        if task is None:
            continue
        if fault.kind is FaultKind.BAD_PARAM:
            strategy = strategy.change_params(task.id, dict(BAD_PARAMS))
        elif fault.kind is FaultKind.MISSING_AGENT:
            strategy = strategy.model_copy(
                update={"team": [a for a in strategy.team if a.name != task.agent]}
            )
        elif fault.kind is FaultKind.LOST_DEPENDENCY:
            strategy = strategy.replace_task(task.id, task.model_copy(update={"needs": []}))
    return strategy
