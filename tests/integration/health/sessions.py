"""Background sessions that hold a condition open while a review watches (test set-up, read-write)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import psycopg


class Held:
    """Sessions and loops kept alive for the duration of a review, closed together afterwards."""

    def __init__(self, dsn: str):
        self.dsn = dsn
        self.connections: list[psycopg.Connection[Any]] = []
        self.threads: list[threading.Thread] = []
        self.stop = threading.Event()

    def connect(self, **kwargs: Any) -> psycopg.Connection[Any]:
        conn = psycopg.connect(self.dsn, autocommit=True, **kwargs)
        self.connections.append(conn)
        return conn

    def pid(self, conn: psycopg.Connection[Any]) -> int:
        return conn.info.backend_pid

    def in_background(self, statement: str) -> psycopg.Connection[Any]:
        """Run one long statement on its own session without waiting for it (it is cancelled at close)."""
        conn = self.connect()
        thread = threading.Thread(target=self._swallow_cancel, args=(conn, statement), daemon=True)
        thread.start()
        self.threads.append(thread)
        return conn

    def loop(self, body: Callable[[psycopg.Connection[Any]], None]) -> psycopg.Connection[Any]:
        """Repeat `body` on its own session until close()."""
        conn = self.connect()

        def run() -> None:
            while not self.stop.is_set():
                try:
                    body(conn)
                except psycopg.errors.QueryCanceled:
                    return  # close() cancels the statement in flight on purpose

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        self.threads.append(thread)
        return conn

    @staticmethod
    def _swallow_cancel(conn: psycopg.Connection[Any], statement: str) -> None:
        try:
            conn.execute(statement)
        except (psycopg.errors.QueryCanceled, psycopg.OperationalError):
            pass  # close() cancels it on purpose

    def close(self) -> None:
        self.stop.set()
        for conn in self.connections:
            conn.cancel_safe()
        for thread in self.threads:
            thread.join(timeout=30)
        for conn in self.connections:
            conn.close()
