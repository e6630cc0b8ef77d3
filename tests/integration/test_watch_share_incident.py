"""An incident open when its watcher dies is carried on by the watcher that takes the target over: two watcher
processes (tests/integration/share_watcher.py) over one PostgreSQL store, on a real target (a database of the
embedded PostgreSQL). Lock contention opens an incident at holder a; a is killed with SIGKILL while it is open; b
takes the target over; the contention ends; the incident closes at b, in the store as one incident (a's start), and
is due for its diagnosis exactly once, at b. Before the carry-over, b's detector started empty of it: the incident
stayed open in the store for ever and was never diagnosed (bench scale, 100 targets: 2 of 5 injected incidents).

Everything asserted is read from the store and from the watchers' record of the diagnoses they would start.
"""

from __future__ import annotations

import json
import signal
import threading
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.store.leases import create_schema, lease_holders, tenures
from dbcrew.store.samples import Incident, SampleStore, open_samples
from dbcrew.targets import parse_target
from tests.integration.test_watch_share import _passes, _start, _until, publish

WAITERS = (
    6  # sessions left waiting on the lock: act.wait_lock 0 -> 6, far past Z_OPEN deviations of 1
)


def _incidents(store: SampleStore, identity: str, since: datetime) -> list[Incident]:
    return store.incidents(identity, since - timedelta(hours=1))


def _diagnosed(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_an_incident_open_at_a_killed_watcher_closes_at_its_taker_and_is_diagnosed_once(
    pg: EmbeddedPostgres, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:6]
    database, store_db = f"held_{suffix}", f"handover_store_{suffix}"
    pg.psql(f"CREATE DATABASE {database};")
    pg.psql(f"CREATE DATABASE {store_db};")
    target_url, store_url = pg.dsn(database), pg.dsn(store_db)
    with psycopg.connect(target_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE accounts (id int PRIMARY KEY, balance int)")
        conn.execute("INSERT INTO accounts SELECT g, 0 FROM generate_series(1, 100) g")
    inventory = tmp_path / "inventory.json"
    publish(inventory, {"t1": target_url})
    store = open_samples(store_url)
    create_schema(store.backend)
    diagnosed = tmp_path / "diagnosed.jsonl"
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    began = datetime.now(UTC)
    a = _start(store_url, "a", inventory, logs[0], diagnosed)
    b = None
    holder = psycopg.connect(target_url)
    waiters: list[threading.Thread] = []
    try:
        identity: list[str] = []

        def history() -> bool:
            """a holds the target and stored enough quiet passes for its detector to judge (MIN_HISTORY and more)."""
            found = store.identity_of(parse_target(target_url).display)
            if found is None:
                return False
            identity[:] = [found]
            return lease_holders(store.backend).get("t1") == "a" and len(_passes(store, found)) >= 8

        _until("a storing quiet passes of t1", history, logs)
        (ident,) = identity
        b = _start(store_url, "b", inventory, logs[1], diagnosed)

        holder.execute("LOCK TABLE accounts IN ACCESS EXCLUSIVE MODE")

        def wait_on_lock() -> None:
            with psycopg.connect(target_url, autocommit=True) as conn:
                conn.execute("SELECT count(*) FROM accounts").fetchone()

        waiters = [threading.Thread(target=wait_on_lock, daemon=True) for _ in range(WAITERS)]
        for w in waiters:
            w.start()

        def open_at_a() -> bool:
            return any(not i.closed for i in _incidents(store, ident, began))

        _until("the incident open in the store, written by a", open_at_a, logs)
        assert lease_holders(store.backend).get("t1") == "a", "a holds t1 while its incident opens"
        (opened,) = [i for i in _incidents(store, ident, began) if not i.closed]
        killed = datetime.now(UTC)
        a.send_signal(signal.SIGKILL)
        a.wait(timeout=30)

        def taken_by_b() -> bool:
            return any(
                s.holder == "b" and s.ended_at > killed for s in tenures(store.backend, "t1")
            )

        _until("b storing passes of t1", taken_by_b, logs)
        holder.commit()  # the contention ends: the waiters get the table and leave
        for w in waiters:
            w.join(timeout=60)

        def closed() -> list[Incident]:
            return [i for i in _incidents(store, ident, began) if i.closed]

        _until("the incident closed in the store", lambda: bool(closed()), logs)
        settled = datetime.now(UTC)
        _until(
            "two rounds of b after the close",
            lambda: sum(p.at > settled for p in _passes(store, ident)) >= 2,
            logs,
        )
    finally:
        holder.close()
        for process in (a, b):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
        if b is not None:
            b.wait(timeout=60)

    (incident,) = _incidents(store, ident, began)
    assert incident.started_at == opened.started_at, "one incident: the one a opened, carried on"
    assert incident.closed and incident.ended_at >= opened.ended_at
    assert "act.wait_lock" in [s.name for s in incident.signals]
    due = _diagnosed(diagnosed)
    assert due == [
        {
            "holder": "b",
            "key": "t1",
            "target": ident,
            "started_at": due[0]["started_at"] if due else None,
            "while_open": False,
        }
    ], f"diagnosed once, at its close, by b: {due}\n" + "\n".join(
        p.read_text()[-1500:] for p in logs
    )
    assert datetime.fromisoformat(due[0]["started_at"]) == opened.started_at
    assert "carrying on its incident open since" in logs[1].read_text()
