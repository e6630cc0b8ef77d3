"""Settings advice (setting_suboptimal): server settings far from advice for this machine and workload.

Two kinds of rule. Hazards are wrong whatever the machine (checkpoint_completion_target too low,
work_mem that can exhaust memory, jit on an OLTP server is not one: too workload-dependent):
warnings. Sizing advice (shared_buffers, effective_cache_size, maintenance_work_mem,
random_page_cost) follows pgtune for the machine's size and is info, unless a symptom measured in
this review (cache misses, temp-file spills, requested checkpoints) shows it costing now: then a
warning. Without the machine's size, sizing advice is not given at all.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from dbcrew.models import Finding, Severity
from dbcrew.operators.checks.base import Coverage, Judgement, check
from dbcrew.operators.checks.database import (
    CACHE_SQL,
    CHECKPOINT_SQL,
    CacheWindow,
    judged_hit_ratio,
    wal_checkpoint_share,
)
from dbcrew.operators.collect.catalog import SETTINGS, SettingRow
from dbcrew.operators.collect.machine import MACHINE, MachineRow
from dbcrew.operators.registry import OperatorContext
from dbcrew.operators.stat_views import CHECKPOINTER_TABLE, DATABASE_STATS, CheckpointerRow
from dbcrew.operators.statistics_age import cold_cache
from dbcrew.vocabulary import FindingCode

KB = 1024
MB = 1024 * KB
GB = 1024 * MB
UNIT_BYTES = {"B": 1, "kB": KB, "8kB": 8 * KB, "MB": MB, "16MB": 16 * MB, "GB": GB}


@dataclass(frozen=True)
class Advice:
    setting: str
    current: str
    advised: str
    why: str
    hazard: bool = False
    symptom: str = ""


@dataclass(frozen=True)
class ServerSettings:
    """The target's settings by name (the `settings` table); one the role may not read is absent."""

    by_name: dict[str, SettingRow]

    def text(self, name: str) -> str | None:
        row = self.by_name.get(name)
        return None if row is None else row.setting

    def number(self, name: str) -> float | None:
        text = self.text(name)
        return None if text is None else float(text)

    def bytes(self, name: str) -> int | None:
        """The setting in bytes; None when absent or -1 (derived from another setting)."""
        row = self.by_name.get(name)
        if row is None or row.setting in (None, "-1"):
            return None
        return int(float(row.setting) * UNIT_BYTES.get(row.unit or "B", 1))


@dataclass(frozen=True)
class Symptoms:
    """Measured evidence that a sizing setting costs something in this review's window ("" when none)."""

    cache: str = ""
    temp: str = ""
    checkpoints: str = ""
    cold: str = (
        ""  # why the cache could not be a symptom (dbcrew/operators/statistics_age.py cold_cache)
    )


def _human(n: float) -> str:
    for unit, size in (("GB", GB), ("MB", MB), ("kB", KB)):
        if n >= size:
            return f"{n / size:.0f}{unit}"
    return f"{n:.0f}B"


def _hazards(s: ServerSettings, memory: int | None) -> Iterator[Advice]:
    target = s.text("checkpoint_completion_target")
    if target and float(target) < 0.7:
        yield Advice(
            "checkpoint_completion_target",
            target,
            "0.9",
            "checkpoint writes are squeezed into a short part of the interval: I/O spikes",
            hazard=True,
        )
    work_mem, connections = s.bytes("work_mem"), s.number("max_connections")
    if memory and work_mem and connections:
        worst = work_mem * int(connections)
        if worst > memory:
            yield Advice(
                "work_mem",
                _human(work_mem),
                _human(max(4 * MB, memory // (int(connections) * 4))),
                f"work_mem x max_connections = {_human(worst)}, more than the machine's {_human(memory)}: a busy hour can run it out of memory",
                hazard=True,
            )
    if memory:
        shared = s.bytes("shared_buffers")
        if shared and shared > memory * 0.5:
            yield Advice(
                "shared_buffers",
                _human(shared),
                _human(memory // 4),
                "more than half of memory in shared_buffers starves the OS cache and work_mem",
                hazard=True,
            )


def _sizing(s: ServerSettings, memory: int, symptoms: Symptoms) -> Iterator[Advice]:
    shared = s.bytes("shared_buffers")
    if shared and shared < memory / 8:
        yield Advice(
            "shared_buffers",
            _human(shared),
            _human(memory // 4),
            "pgtune advises a quarter of memory",
            symptom=symptoms.cache,
        )
    cache = s.bytes("effective_cache_size")
    if cache and cache < memory / 3:
        yield Advice(
            "effective_cache_size",
            _human(cache),
            _human(memory * 3 // 4),
            "the planner assumes little OS cache and avoids index scans",
        )
    maintenance = s.bytes("maintenance_work_mem")
    if maintenance and maintenance < min(memory / 32, 2 * GB):
        yield Advice(
            "maintenance_work_mem",
            _human(maintenance),
            _human(min(memory // 16, 2 * GB)),
            "vacuum and index builds make more passes with little memory",
        )
    work_mem, connections = s.bytes("work_mem"), s.number("max_connections")
    if work_mem and connections and symptoms.temp:
        advised = max(4 * MB, (memory - (shared or 0)) // (int(connections) * 3))
        if advised > work_mem:
            yield Advice(
                "work_mem",
                _human(work_mem),
                _human(advised),
                "sorts and hashes spill to temporary files",
                symptom=symptoms.temp,
            )


def _workload(s: ServerSettings, symptoms: Symptoms) -> Iterator[Advice]:
    max_wal = s.bytes("max_wal_size")
    if max_wal and symptoms.checkpoints:
        yield Advice(
            "max_wal_size",
            _human(max_wal),
            _human(max(max_wal * 4, 4 * GB)),
            "checkpoints are triggered by WAL volume before checkpoint_timeout",
            symptom=symptoms.checkpoints,
        )
    random_cost = s.text("random_page_cost")
    if random_cost and float(random_cost) >= 4.0:
        yield Advice(
            "random_page_cost",
            random_cost,
            "1.1",
            "4 models spinning disks; on SSD or cloud storage it makes the planner avoid index scans",
        )
    scale = s.text("autovacuum_vacuum_scale_factor")
    if scale and float(scale) > 0.2:
        yield Advice(
            "autovacuum_vacuum_scale_factor",
            scale,
            "0.05",
            "large tables wait for a large share of dead rows before autovacuum comes",
            hazard=True,
        )


def _symptoms(ctx: OperatorContext) -> Symptoms:
    """Measured evidence that a sizing setting costs something in this review's window."""
    cache = temp = checkpoints = ""
    ws, t = ctx.workspace, ctx.settings.thresholds
    cold = cold_cache(ctx) or ""  # a cache still filling after a start says nothing of its size
    if ws.has(DATABASE_STATS.table):
        for row in ws.rows(CacheWindow, CACHE_SQL):
            ratio = judged_hit_ratio(row, t)
            if not cold and ratio is not None and ratio <= t.cache_hit_ratio_warning:
                cache = f"cache hit ratio {ratio:.1%} in the window"
            if row.temp >= t.temp_spill_warning_bytes:
                temp = f"{_human(row.temp)} of temporary files in the window"
    if ws.has(CHECKPOINTER_TABLE):
        for checkpoint in ws.rows(CheckpointerRow, CHECKPOINT_SQL):
            if wal_checkpoint_share(checkpoint, t) is not None:
                checkpoints = f"{checkpoint.requested} of {checkpoint.timed + checkpoint.requested} checkpoints requested"
    return Symptoms(cache=cache, temp=temp, checkpoints=checkpoints, cold=cold)


def _finding(advice: Advice, source: str) -> Finding:
    severity = Severity.WARNING if advice.hazard or advice.symptom else Severity.INFO
    because = f" ({advice.symptom})" if advice.symptom else ""
    return Finding(
        code=FindingCode.SETTING_SUBOPTIMAL,
        severity=severity,
        object=advice.setting,
        title=f"{advice.setting} = {advice.current}: advised {advice.advised}{because}",
        evidence={
            "current": advice.current,
            "advised": advice.advised,
            "why": advice.why,
            "symptom": advice.symptom,
            "machine": source,
        },
        recommendation=f"Set {advice.setting} = {advice.advised}: {advice.why}.",
        fix_sql=f"ALTER SYSTEM SET {advice.setting} = '{advice.advised}';",
        confidence=0.7 if advice.hazard or advice.symptom else 0.5,
    )


@check(
    needs=(SETTINGS, MACHINE),
    uses=(DATABASE_STATS.table, CHECKPOINTER_TABLE),
    codes=(FindingCode.SETTING_SUBOPTIMAL,),
)
def check_settings(ctx: OperatorContext) -> Judgement:
    """Memory, checkpoint, work_mem, random_page_cost and autovacuum settings against pgtune-style advice."""
    settings = ServerSettings(
        {r.name: r for r in ctx.workspace.rows(SettingRow, "SELECT * FROM settings")}
    )
    machine = ctx.workspace.rows(MachineRow, "SELECT * FROM machine")[0]
    memory = machine.memory_bytes
    symptoms = _symptoms(ctx)
    advice = [*_hazards(settings, memory), *_workload(settings, symptoms)]
    if memory:
        advice.extend(_sizing(settings, memory, symptoms))
    seen: set[str] = set()
    for item in sorted(
        advice, key=lambda a: not (a.hazard or a.symptom)
    ):  # a hazard wins over plain sizing advice
        if item.setting not in seen:
            seen.add(item.setting)
            yield _finding(item, machine.source)
    looked_at = f"{len(settings.by_name)} settings, machine {machine.source}"
    unseen = [
        *(
            ["machine size unknown: memory-sized advice not given (declare it in settings.machine)"]
            if not memory
            else []
        ),
        *([f"the cache hit ratio is no symptom: {symptoms.cold}"] if symptoms.cold else []),
    ]
    return Coverage(looked_at, "; ".join(unseen))
