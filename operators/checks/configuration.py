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
from typing import Any

from dbcrew.models import Finding, Severity
from dbcrew.vocabulary import FindingCode
from operators.checks.base import Coverage, Judgement, check
from operators.checks.database import CACHE_SQL, CHECKPOINT_SQL, judged_hit_ratio, wal_checkpoint_share
from operators.registry import OperatorContext

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


def _bytes(settings: dict[str, dict[str, Any]], name: str) -> int | None:
    row = settings.get(name)
    if row is None or row["setting"] in (None, "-1"):
        return None
    return int(float(row["setting"]) * UNIT_BYTES.get(row["unit"] or "B", 1))


def _human(n: float) -> str:
    for unit, size in (("GB", GB), ("MB", MB), ("kB", KB)):
        if n >= size:
            return f"{n / size:.0f}{unit}"
    return f"{n:.0f}B"


def _hazards(s: dict[str, dict[str, Any]], memory: int | None) -> Iterator[Advice]:
    target = s.get("checkpoint_completion_target")
    if target and float(target["setting"]) < 0.7:
        yield Advice("checkpoint_completion_target", target["setting"], "0.9",
                     "checkpoint writes are squeezed into a short part of the interval: I/O spikes", hazard=True)
    work_mem, connections = _bytes(s, "work_mem"), s.get("max_connections")
    if memory and work_mem and connections:
        worst = work_mem * int(connections["setting"])
        if worst > memory:
            yield Advice("work_mem", _human(work_mem), _human(max(4 * MB, memory // (int(connections["setting"]) * 4))),
                         f"work_mem x max_connections = {_human(worst)}, more than the machine's {_human(memory)}: a busy hour can run it out of memory",
                         hazard=True)
    if memory:
        shared = _bytes(s, "shared_buffers")
        if shared and shared > memory * 0.5:
            yield Advice("shared_buffers", _human(shared), _human(memory // 4),
                         "more than half of memory in shared_buffers starves the OS cache and work_mem", hazard=True)


def _sizing(s: dict[str, dict[str, Any]], memory: int, symptoms: dict[str, str]) -> Iterator[Advice]:
    shared = _bytes(s, "shared_buffers")
    if shared and shared < memory / 8:
        yield Advice("shared_buffers", _human(shared), _human(memory // 4), "pgtune advises a quarter of memory",
                     symptom=symptoms.get("cache", ""))
    cache = _bytes(s, "effective_cache_size")
    if cache and cache < memory / 3:
        yield Advice("effective_cache_size", _human(cache), _human(memory * 3 // 4),
                     "the planner assumes little OS cache and avoids index scans")
    maintenance = _bytes(s, "maintenance_work_mem")
    if maintenance and maintenance < min(memory / 32, 2 * GB):
        yield Advice("maintenance_work_mem", _human(maintenance), _human(min(memory // 16, 2 * GB)),
                     "vacuum and index builds make more passes with little memory")
    work_mem, connections = _bytes(s, "work_mem"), s.get("max_connections")
    if work_mem and connections and symptoms.get("temp"):
        advised = max(4 * MB, (memory - (shared or 0)) // (int(connections["setting"]) * 3))
        if advised > work_mem:
            yield Advice("work_mem", _human(work_mem), _human(advised), "sorts and hashes spill to temporary files",
                         symptom=symptoms["temp"])


def _workload(s: dict[str, dict[str, Any]], symptoms: dict[str, str]) -> Iterator[Advice]:
    max_wal = _bytes(s, "max_wal_size")
    if max_wal and symptoms.get("checkpoints"):
        yield Advice("max_wal_size", _human(max_wal), _human(max(max_wal * 4, 4 * GB)),
                     "checkpoints are triggered by WAL volume before checkpoint_timeout", symptom=symptoms["checkpoints"])
    random_cost = s.get("random_page_cost")
    if random_cost and float(random_cost["setting"]) >= 4.0:
        yield Advice("random_page_cost", random_cost["setting"], "1.1",
                     "4 models spinning disks; on SSD or cloud storage it makes the planner avoid index scans")
    scale = s.get("autovacuum_vacuum_scale_factor")
    if scale and float(scale["setting"]) > 0.2:
        yield Advice("autovacuum_vacuum_scale_factor", scale["setting"], "0.05",
                     "large tables wait for a large share of dead rows before autovacuum comes", hazard=True)


def _symptoms(ctx: OperatorContext) -> dict[str, str]:
    """Measured evidence that a sizing setting costs something in this review's window."""
    found: dict[str, str] = {}
    ws, t = ctx.workspace, ctx.settings.thresholds
    if ws.has("database_stats"):
        for row in ws.query(CACHE_SQL.format(more=", temp_bytes_delta AS temp")):
            ratio = judged_hit_ratio(row, t)
            if ratio is not None and ratio <= t.cache_hit_ratio_warning:
                found["cache"] = f"cache hit ratio {ratio:.1%} in the window"
            if row["temp"] >= t.temp_spill_warning_bytes:
                found["temp"] = f"{_human(row['temp'])} of temporary files in the window"
    if ws.has("checkpointer"):
        for row in ws.query(CHECKPOINT_SQL):
            if wal_checkpoint_share(row, t) is not None:
                found["checkpoints"] = f"{row['requested']} of {(row['timed'] or 0) + row['requested']} checkpoints requested"
    return found


def _finding(advice: Advice, source: str) -> Finding:
    severity = Severity.WARNING if advice.hazard or advice.symptom else Severity.INFO
    because = f" ({advice.symptom})" if advice.symptom else ""
    return Finding(
        code=FindingCode.SETTING_SUBOPTIMAL, severity=severity, object=advice.setting,
        title=f"{advice.setting} = {advice.current}: advised {advice.advised}{because}",
        evidence={"current": advice.current, "advised": advice.advised, "why": advice.why, "symptom": advice.symptom,
                  "machine": source},
        recommendation=f"Set {advice.setting} = {advice.advised}: {advice.why}.",
        fix_sql=f"ALTER SYSTEM SET {advice.setting} = '{advice.advised}';",
        confidence=0.7 if advice.hazard or advice.symptom else 0.5,
    )


@check(needs=("settings", "machine"), uses=("database_stats", "checkpointer"), codes=(FindingCode.SETTING_SUBOPTIMAL,))
def check_settings(ctx: OperatorContext) -> Judgement:
    """Memory, checkpoint, work_mem, random_page_cost and autovacuum settings against pgtune-style advice."""
    settings = {r["name"]: r for r in ctx.workspace.query("SELECT name, setting, unit FROM settings")}
    machine = ctx.workspace.query("SELECT * FROM machine")[0]
    memory = machine["memory_bytes"]
    symptoms = _symptoms(ctx)
    advice = [*_hazards(settings, memory), *_workload(settings, symptoms)]
    if memory:
        advice.extend(_sizing(settings, memory, symptoms))
    seen: set[str] = set()
    for item in sorted(advice, key=lambda a: not (a.hazard or a.symptom)):  # a hazard wins over plain sizing advice
        if item.setting not in seen:
            seen.add(item.setting)
            yield _finding(item, machine["source"])
    looked_at = f"{len(settings)} settings, machine {machine['source']}"
    if not memory:
        return Coverage(looked_at, "machine size unknown: memory-sized advice not given (declare it in settings.machine)")
    return Coverage(looked_at)
