"""The machine the target runs on, for settings advice sized to it.

Declared sizes (settings) win; a target on this host (loopback or a socket) is measured with
psutil; anything else is unknown, and advice that needs the machine's size is not given.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import psutil
from psycopg.conninfo import conninfo_to_dict

from dbcrew.artifacts import declare
from dbcrew.models import Role
from dbcrew.operators.registry import Observation, OperatorContext, operator
from dbcrew.operators.sql import land
from dbcrew.vocabulary import Category

LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", ""}
MACHINE_COLUMNS = [("memory_bytes", "BIGINT"), ("cpus", "INTEGER"), ("source", "VARCHAR")]


@dataclass(frozen=True, slots=True)
class MachineRow:
    """The one row of `machine` (MACHINE_COLUMNS): sizes None when unknown, `source` says how they were found."""

    memory_bytes: int | None
    cpus: int | None
    source: str


def target_is_local(dsn: str) -> bool:
    """Loopback, a Unix socket (a path, URL-encoded or as ?host=), or no host at all."""
    host = conninfo_to_dict(dsn).get("host") or ""
    return all(h in LOCAL_HOSTS or h.startswith("/") for h in str(host).split(","))


MACHINE = declare("machine")  # the target host's memory and CPUs (MACHINE_COLUMNS)


@operator(role=Role.EXTRACTOR, category=Category.COLLECT, produces=(MACHINE,))
def collect_machine(ctx: OperatorContext) -> Observation:
    """Memory and CPUs of the target's machine: declared in settings, measured when the target is local, else unknown."""
    declared = ctx.settings.machine
    if declared.memory_bytes and declared.cpus:
        memory, cpus, source = declared.memory_bytes, declared.cpus, "declared"
    elif target_is_local(ctx.target.dsn):
        memory, cpus, source = (
            psutil.virtual_memory().total,
            os.cpu_count() or 1,
            "measured on this host",
        )
    else:
        memory, cpus, source = None, None, "unknown"
    land(ctx.workspace, MACHINE, MACHINE_COLUMNS, [(memory, cpus, source)])
    return Observation(summary=f"machine: {source}", artifacts=[MACHINE])
