"""One reading of a local PostgreSQL server's processes, shared by the databases of that server read side by side.

A host probe (readers.HostProbe) sums the CPU seconds and private memory of the server's processes. psutil's
`children()` finds the postmaster's children by walking every process of the host (/proc/*/stat), then two
files are read per process: an embedded server with 100 connections open (109 processes) among 1,276
processes on the host took 24 ms of CPU a reading (read_server timed 300 times, 29 Nov 2026), most of it
the walk, and in the nightly fleet of `python -m bench scale` (four clusters of 250 databases, ~1,200
processes) some 12 % of a worker's samples. On Linux the kernel lists a task's children itself
(/proc/<pid>/task/<tid>/children, CONFIG_PROC_CHILDREN), so a reading lists the children of each of the
postmaster's tasks and reads /proc/<pid>/stat and statm of those alone: 3.0 ms for the same server
(psutil.Process objects for the same listed pids took 4.6 ms). Where the kernel keeps no such list (another
OS, an older kernel) psutil walks the host as before.

The figure is the server's, the same for each of its databases, yet a watcher of many databases of one
server read it once per database per pass. A probe reuses a reading of the same postmaster taken at most
`max_age` seconds before (a small share of the span its rate is taken over, so the rate is the same to a
few per cent), and the process takes one reading at a time (of any server), so the probes of a round wait
for one and share it instead of all reading at once.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil


@dataclass(frozen=True)
class ServerReading:
    """The server's processes at `at` (time.monotonic()): CPU seconds (user + system) and private memory in bytes, by pid."""

    at: float
    cpu: dict[int, float]
    private: dict[int, float]


_readings: dict[int, ServerReading] = {}  # by postmaster pid; one entry per local server ever read
_reading = threading.Lock()  # one reading at a time: the probes waiting on it then reuse it

# Whether this kernel lists each task's children (asked of this process's own main task, once).
PROC = Path("/proc")
KERNEL_LISTS_CHILDREN = (PROC / str(os.getpid()) / "task" / str(os.getpid()) / "children").exists()
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

ChildrenSource = Callable[[int], list[int] | None]


def listed_children(pid: int) -> list[int] | None:
    """The pids of `pid`'s children as the kernel lists them, over all its tasks (threads); None where the
    kernel keeps no such list. A process gone has none; a thread gone while read has none either."""
    if not KERNEL_LISTS_CHILDREN:
        return None
    try:
        tasks = list((PROC / str(pid) / "task").iterdir())
    except (FileNotFoundError, ProcessLookupError):
        return []
    children: list[int] = []
    for task in tasks:
        try:
            children.extend(int(child) for child in (task / "children").read_bytes().split())
        except (FileNotFoundError, ProcessLookupError):
            continue
    return children


def server_reading(postmaster: psutil.Process, max_age: float) -> ServerReading:
    """The postmaster's processes as read at most `max_age` seconds ago, or now (no entry when it has gone)."""
    with _reading:
        held = _readings.get(postmaster.pid)
        if held is not None and time.monotonic() - held.at <= max_age:
            return held
        reading = read_server(postmaster)
        _readings[postmaster.pid] = reading
        return reading


def read_server(
    postmaster: psutil.Process, children: ChildrenSource = listed_children
) -> ServerReading:
    """The postmaster's and its children's CPU seconds and private memory now: the kernel's list of its
    children read from /proc, or psutil's walk of the host where `children` has no list."""
    at = time.monotonic()
    listed = children(postmaster.pid)
    if listed is None:
        return walked_reading(postmaster, at)
    cpu: dict[int, float] = {}
    private: dict[int, float] = {}
    for pid in [postmaster.pid, *listed]:
        try:
            stat = (PROC / str(pid) / "stat").read_bytes()
            pages = (PROC / str(pid) / "statm").read_bytes().split()
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue  # it exited since it was listed (or is not ours to read), as psutil skips it below
        # The fields after the command's closing parenthesis (the name may hold spaces and parentheses):
        # utime and stime are the 14th and 15th of proc(5), 12th and 13th from the state on.
        fields = stat[stat.rindex(b")") + 2 :].split()
        cpu[pid] = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
        # statm: size, resident, shared (pages); psutil's memory_info rss and shared are the same two.
        private[pid] = max(int(pages[1]) - int(pages[2]), 0) * PAGE_BYTES
    return ServerReading(at, cpu, private)


def walked_reading(postmaster: psutil.Process, at: float) -> ServerReading:
    """The reading through psutil, which finds the postmaster's children by walking every process of the host."""
    try:
        processes = [postmaster, *postmaster.children()]
    except psutil.NoSuchProcess:
        return ServerReading(at, {}, {})
    cpu: dict[int, float] = {}
    private: dict[int, float] = {}
    for proc in processes:
        try:
            times = proc.cpu_times()
            mem = proc.memory_info()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        cpu[proc.pid] = times.user + times.system
        private[proc.pid] = max(mem.rss - getattr(mem, "shared", 0), 0)
    return ServerReading(at, cpu, private)
