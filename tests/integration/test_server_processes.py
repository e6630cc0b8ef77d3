"""The databases of one local server share a reading of its processes within a pass's span (server_processes.py).

A watcher of many databases on one server walked /proc once per database per pass; at 1,000 targets on four
clusters that was the watchers' time (bench scale)."""

from __future__ import annotations

import subprocess
import time

import psutil
import psycopg

from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.operators.window import server_processes
from dbcrew.operators.window.metrics import PG_CPU
from dbcrew.operators.window.readers import HostProbe
from dbcrew.targets import parse_target


def probe(pg: EmbeddedPostgres) -> tuple[HostProbe, psycopg.Connection]:
    conn = psycopg.connect(pg.dsn(), autocommit=True)
    row = conn.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    found = HostProbe.find(parse_target(pg.dsn()), int(row[0]))
    assert found is not None, "the embedded server runs on this host"
    return found, conn


def test_probes_of_one_server_within_a_pass_share_one_reading_of_its_processes(
    pg: EmbeddedPostgres, monkeypatch
) -> None:
    first, conn1 = probe(pg)
    second, conn2 = probe(pg)
    reads = []
    real = server_processes.read_server
    monkeypatch.setattr(
        server_processes, "read_server", lambda pm: reads.append(pm.pid) or real(pm)
    )
    try:
        first.read(0.0)  # a first reading is always taken now (none of any earlier test is reused)
        second.read(60.0)  # the same server, a moment later, over a 60 s pass: the first's reading
        assert reads == [first.postmaster.pid]
        assert second.last_proc_cpu is first.last_proc_cpu
        assert (
            first.postmaster.pid in first.last_proc_cpu
        )  # the postmaster and its children were read
        assert len(first.last_proc_cpu) > 1
        time.sleep(0.05)
        second.read(0.1)  # over a tenth of a second (the live window), 50 ms is too old: read again
        assert reads == [first.postmaster.pid, first.postmaster.pid]
    finally:
        conn1.close()
        conn2.close()


def test_the_servers_cpu_is_still_measured_over_each_probes_own_span(pg: EmbeddedPostgres) -> None:
    """A probe's rate is its own last reading against the (maybe shared) new one, over its own elapsed seconds."""
    first, conn1 = probe(pg)
    try:
        first.read(0.0)
        conn1.execute(
            "SELECT count(*) FROM generate_series(1, 3000000)"
        )  # its own backend, still alive
        values = first.read(1.0)
        assert values[PG_CPU.name] > 0
    finally:
        conn1.close()


# Server processes that come and go on their own (one may exit between the listing and a reading).
TRANSIENT = ("client backend", "autovacuum worker", "parallel worker", "background worker")


def server_pids(conns: list[psycopg.Connection]) -> tuple[int, set[int]]:
    """The postmaster, and the backends of `conns` with the auxiliary processes pg_stat_activity shows."""
    backends = set()
    for conn in conns:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        backends.add(int(row[0]))
    postmaster = psutil.Process(min(backends)).parent()
    assert postmaster is not None
    rows = (
        conns[0]
        .execute(
            "SELECT pid FROM pg_stat_activity WHERE backend_type <> ALL(%s)", (list(TRANSIENT),)
        )
        .fetchall()
    )
    auxiliaries = {int(row[0]) for row in rows}
    assert auxiliaries, "the checkpointer at least"
    return postmaster.pid, backends | auxiliaries


def test_a_reading_holds_the_postmaster_and_every_process_of_the_server(
    pg: EmbeddedPostgres,
) -> None:
    """The kernel's list of the postmaster's children (where it keeps one) and psutil's walk of the host find
    the same processes: the backend of each open connection and the auxiliaries pg_stat_activity shows."""
    conns = [psycopg.connect(pg.dsn(), autocommit=True) for _ in range(4)]
    try:
        postmaster, children = server_pids(conns)
        listed = server_processes.read_server(psutil.Process(postmaster))
        walked = server_processes.read_server(psutil.Process(postmaster), children=lambda pid: None)
        for reading in (listed, walked):
            assert {postmaster, *children} <= set(reading.cpu), children - set(reading.cpu)
            assert set(reading.cpu) == set(reading.private)
            assert all(seconds >= 0 for seconds in reading.cpu.values())
            assert all(held >= 0 for held in reading.private.values())
            for pid in set(reading.cpu) - {postmaster}:  # nothing but the server's own processes
                if psutil.pid_exists(pid):  # (one may have exited since)
                    assert psutil.Process(pid).ppid() == postmaster
        if (
            server_processes.KERNEL_LISTS_CHILDREN
        ):  # Linux: the kernel's own list, not a walk of the host
            assert children <= set(server_processes.listed_children(postmaster) or [])
    finally:
        for conn in conns:
            conn.close()


def test_a_process_gone_reads_as_no_processes() -> None:
    """A postmaster that exited (a stopped server) has no processes by either way of finding them."""
    child = subprocess.Popen(["sleep", "60"])
    gone = psutil.Process(child.pid)
    child.kill()
    child.wait()
    assert server_processes.read_server(gone).cpu == {}
    assert server_processes.read_server(gone, children=lambda pid: None).cpu == {}
