"""A store's schema is made once per process and database: a review opens the store three times, and each
opening used to make it again in a session (a connection, the DuckDB file opened) of its own."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from dbcrew.store import Store
from dbcrew.store.backends import DuckDBBackend, Session
from dbcrew.store.records import RunRecord, RunStatus


class CountedDuckDB(DuckDBBackend):
    """The real DuckDB backend, counting the sessions it opens."""

    def __init__(self, path: Path):
        super().__init__(path)
        self.sessions = 0

    @contextmanager
    def session(self) -> Iterator[Session]:
        self.sessions += 1
        with super().session() as session:
            yield session


def run(run_id: str) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        target="t",
        display="postgresql://h/db",
        scenario="health",
        started_at=datetime.now(UTC),
        status=RunStatus.COMPLETED,
    )


def test_a_store_opened_again_in_the_process_makes_no_schema_and_works(tmp_path: Path):
    path = tmp_path / "store.duckdb"
    first = CountedDuckDB(path)
    Store(first).record_run(run("one"), [])
    assert first.sessions == 2, "the schema's session, then the run's"

    again = CountedDuckDB(path)
    store = Store(again)
    assert again.sessions == 0, "the schema this process made is not made again"
    store.record_run(run("two"), [])
    assert [r.run_id for r in store.runs("t")] == ["one", "two"]
    assert again.sessions == 2


def test_a_store_file_made_anew_at_the_same_path_gets_its_schema_again(tmp_path: Path):
    """Another file (deleted, then made again) is another database: what this process made in the old one
    says nothing about it."""
    path = tmp_path / "store.duckdb"
    Store(CountedDuckDB(path)).record_run(run("one"), [])
    keep = tmp_path / "kept.duckdb"
    path.rename(keep)  # the old file stays on disk, so the new one cannot take its inode
    anew = CountedDuckDB(path)
    store = Store(anew)
    assert anew.sessions == 1
    assert store.runs("t") == []
