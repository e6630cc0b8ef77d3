"""The databases of one local server share a reading of its processes within a pass's span (server_processes.py).

A watcher of many databases on one server walked /proc once per database per pass; at 1,000 targets on four
clusters that was the watchers' time (bench scale)."""

from __future__ import annotations

import time

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
