"""Reviews run in threads of one worker process (dbcrew/flows/worker.py) and share its DuckDB store file."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from dbcrew.store import open_store
from dbcrew.store.records import RunRecord, RunStatus

THREADS = 8


def test_concurrent_reviews_in_one_process_share_a_new_duckdb_store(tmp_path: Path):
    """Each thread opens the not-yet-created store (schema creation) and records a run: none may fail with
    DuckDB's in-process write-write conflict, and every run is kept."""
    path = str(tmp_path / "store.duckdb")

    def review(i: int) -> None:
        store = open_store(path)
        store.record_run(
            RunRecord(
                run_id=f"run-{i}",
                target=f"t{i}",
                display=f"postgresql://h/db{i}",
                scenario="health",
                started_at=datetime.now(UTC),
                status=RunStatus.COMPLETED,
            ),
            [],
        )

    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(review, range(THREADS)))  # re-raises a thread's exception
    store = open_store(path)
    assert sorted(r.run_id for i in range(THREADS) for r in store.runs(f"t{i}")) == sorted(
        f"run-{i}" for i in range(THREADS)
    )
