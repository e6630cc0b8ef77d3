"""One reading of a local PostgreSQL server's processes, shared by the databases of that server read side by side.

A host probe (readers.HostProbe) sums the CPU seconds and private memory of the server's processes: psutil's
`children()` walks every process of the host to find the postmaster's, then two files are read per process.
That is the server's figure, the same for each of its databases, yet a watcher of many databases of one
server (a fleet of 250 databases on each of 4 clusters in `python -m bench scale`) read it once per
database per pass: about 1,180 processes walked and 250 read, 37-40 ms of CPU a probe read measured on
that host, some 40 CPU-seconds a minute at 1,000 targets watched every 60 s. Now a probe reuses a reading
of the same postmaster taken at most `max_age` seconds before (a small share of the span its rate is taken
over, so the rate is the same to a few per cent), and the process takes one reading at a time (of any
server: a few milliseconds each now), so the probes of a round wait for one and share it instead of all
reading at once.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import psutil


@dataclass(frozen=True)
class ServerReading:
    """The server's processes at `at` (time.monotonic()): CPU seconds (user + system) and private memory in bytes, by pid."""

    at: float
    cpu: dict[int, float]
    private: dict[int, float]


_readings: dict[int, ServerReading] = {}  # by postmaster pid; one entry per local server ever read
_reading = threading.Lock()  # one reading at a time: the probes waiting on it then reuse it


def server_reading(postmaster: psutil.Process, max_age: float) -> ServerReading:
    """The postmaster's processes as read at most `max_age` seconds ago, or now (no entry when it has gone)."""
    with _reading:
        held = _readings.get(postmaster.pid)
        if held is not None and time.monotonic() - held.at <= max_age:
            return held
        reading = read_server(postmaster)
        _readings[postmaster.pid] = reading
        return reading


def read_server(postmaster: psutil.Process) -> ServerReading:
    """The postmaster's and its children's CPU seconds and private memory now."""
    at = time.monotonic()
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
