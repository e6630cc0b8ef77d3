"""The shared store: run history, findings, vital signs, baselines and long-term lessons, per target.

One schema on both backends (backends.py). Everything is keyed by the target's identity (the
cluster's system identifier and the database), so the same database reviewed under another host
name or port keeps one history.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from dbcrew.models.finding import Severity
from dbcrew.store.backends import Backend, Session, create_tables, utc
from dbcrew.store.records import (
    Baseline,
    RunRecord,
    RunStatus,
    Sighting,
    StoredFinding,
    TargetSummary,
    Vitals,
)

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS runs (
        run_id TEXT PRIMARY KEY, target TEXT NOT NULL, display TEXT NOT NULL, scenario TEXT NOT NULL,
        started_at TIMESTAMPTZ NOT NULL, finished_at TIMESTAMPTZ, status TEXT NOT NULL,
        report TEXT NOT NULL, link TEXT NOT NULL, error TEXT NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS runs_target_started ON runs (target, started_at)",
    """CREATE TABLE IF NOT EXISTS findings (
        run_id TEXT NOT NULL, fingerprint TEXT NOT NULL, code TEXT NOT NULL, object TEXT NOT NULL,
        severity TEXT NOT NULL, title TEXT NOT NULL, PRIMARY KEY (run_id, fingerprint))""",
    """CREATE TABLE IF NOT EXISTS vitals (
        run_id TEXT PRIMARY KEY, cache_hit_ratio DOUBLE PRECISION, dead_tuples BIGINT, oldest_xid_age BIGINT,
        database_bytes BIGINT, critical INTEGER NOT NULL, warning INTEGER NOT NULL, info INTEGER NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS baselines (
        target TEXT NOT NULL, run_id TEXT NOT NULL, taken_at TIMESTAMPTZ NOT NULL, quiet BOOLEAN NOT NULL,
        reason TEXT NOT NULL, window_json TEXT NOT NULL, PRIMARY KEY (target, run_id))""",
    """CREATE TABLE IF NOT EXISTS lessons (
        target TEXT NOT NULL, operator TEXT NOT NULL, kind TEXT NOT NULL, body TEXT NOT NULL,
        successes INTEGER NOT NULL, learned_at TIMESTAMPTZ NOT NULL, used_at TIMESTAMPTZ NOT NULL,
        PRIMARY KEY (target, operator))""",
    """CREATE TABLE IF NOT EXISTS unfixed_errors (
        target TEXT NOT NULL, operator TEXT NOT NULL, leaf TEXT NOT NULL, body TEXT NOT NULL,
        seen_at TIMESTAMPTZ NOT NULL, PRIMARY KEY (target, operator, leaf))""",
)
RUN_COLUMNS = (
    "run_id, target, display, scenario, started_at, finished_at, status, report, link, error"
)
VITAL_COLUMNS = (
    "cache_hit_ratio",
    "dead_tuples",
    "oldest_xid_age",
    "database_bytes",
    "critical",
    "warning",
    "info",
)
# Runs whose findings count for history: a failed run saw nothing, so it resolves nothing.
SEEN = f"status <> '{RunStatus.FAILED.value}'"


def _run(row: tuple[object, ...]) -> RunRecord:
    values = dict(zip(RUN_COLUMNS.split(", "), row, strict=True))
    values["started_at"] = utc(values["started_at"])  # type: ignore[arg-type]
    values["finished_at"] = utc(values["finished_at"]) if values["finished_at"] else None  # type: ignore[arg-type]
    return RunRecord.model_validate(values)


# The databases (Backend.identity) where this process made the schema: a Store opened there again skips it.
_SCHEMA_MADE: set[Hashable] = set()
_SCHEMA_MADE_GUARD = threading.Lock()


class Store:
    """History, baselines and lessons on one backend. Every method is one short transaction, or part of the
    caller's `transaction()`.

    Opening one makes its schema (tables and indexes, if missing) in a session of its own, once per process
    and database: a review opens the store three times (the earlier XID age, the long-term memory, the
    history), and making the schema each time was 3 of its 7 sessions, each a connection (for DuckDB,
    the file opened, 13 ms) and seven DDL statements (on PostgreSQL, under the schema's advisory lock)."""

    def __init__(self, backend: Backend):
        self.backend = backend
        self._held = threading.local()  # the session of a `transaction()` block, per thread
        made = backend.identity()
        with _SCHEMA_MADE_GUARD:
            if made is not None and made in _SCHEMA_MADE:
                return
        create_tables(backend, SCHEMA)
        made = backend.identity()  # a DuckDB file exists once the session made it
        if made is not None:
            with _SCHEMA_MADE_GUARD:
                _SCHEMA_MADE.add(made)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Inside the block, this thread's calls share one session: one connection, one transaction.

        A review's history is ~10 calls; each opening its own connection (and, for DuckDB, the file)
        cost more than the statements. Nested blocks join the outer one; an error rolls all back.
        """
        with self._session() as session:
            outer = getattr(self._held, "session", None)
            self._held.session = session
            try:
                yield
            finally:
                self._held.session = outer

    @contextmanager
    def _session(self) -> Iterator[Session]:
        """The session `transaction()` holds for this thread, else a new one for this call."""
        held = getattr(self._held, "session", None)
        if held is not None:
            yield held
            return
        with self.backend.session() as session:
            yield session

    @property
    def location(self) -> str:
        """Where the store is, password-free (a file path or a redacted URL)."""
        return self.backend.location

    # -- runs, findings, vitals ---------------------------------------------------------------
    def record_run(
        self, run: RunRecord, findings: list[StoredFinding], vitals: Vitals | None = None
    ) -> None:
        """Keep one run with its findings (one per fingerprint, the worst severity) and vital signs; idempotent."""
        worst: dict[str, StoredFinding] = {}
        for finding in findings:
            known = worst.get(finding.fingerprint)
            if known is None or finding.severity.rank < known.severity.rank:
                worst[finding.fingerprint] = finding
        with self._session() as session:
            for table in ("findings", "vitals", "runs"):
                session.run(f"DELETE FROM {table} WHERE run_id = ?", [run.run_id])
            session.run(
                f"INSERT INTO runs ({RUN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    run.run_id,
                    run.target,
                    run.display,
                    run.scenario,
                    run.started_at,
                    run.finished_at,
                    run.status.value,
                    run.report,
                    run.link,
                    run.error,
                ],
            )
            for f in worst.values():
                session.run(
                    "INSERT INTO findings VALUES (?, ?, ?, ?, ?, ?)",
                    [run.run_id, f.fingerprint, f.code, f.object, f.severity.value, f.title],
                )
            if vitals is not None:
                session.run(
                    f"INSERT INTO vitals (run_id, {', '.join(VITAL_COLUMNS)}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [run.run_id, *(getattr(vitals, c) for c in VITAL_COLUMNS)],
                )

    def runs(self, target: str, limit: int | None = None) -> list[RunRecord]:
        """The target's runs, oldest first (the latest `limit` when given)."""
        with self._session() as session:
            rows = session.run(
                f"SELECT {RUN_COLUMNS} FROM runs WHERE target = ? ORDER BY started_at DESC"
                + (f" LIMIT {int(limit)}" if limit else ""),
                [target],
            )
        return [_run(r) for r in reversed(rows)]

    def previous_runs(
        self, target: str, scenario: str, before: datetime, limit: int
    ) -> list[RunRecord]:
        """The latest `limit` runs of `target` in `scenario` that started before `before` and saw the database
        (not failed), the latest first."""
        with self._session() as session:
            rows = session.run(
                f"SELECT {RUN_COLUMNS} FROM runs WHERE target = ? AND scenario = ? AND started_at < ?"
                f" AND {SEEN} ORDER BY started_at DESC LIMIT {int(limit)}",
                [target, scenario, before],
            )
        return [_run(r) for r in rows]

    def findings(self, run_id: str) -> list[StoredFinding]:
        with self._session() as session:
            rows = session.run(
                "SELECT fingerprint, code, object, severity, title FROM findings WHERE run_id = ?"
                " ORDER BY code, object",
                [run_id],
            )
        return [
            StoredFinding(
                fingerprint=r[0], code=r[1], object=r[2], severity=Severity(r[3]), title=r[4]
            )
            for r in rows
        ]

    def sightings(self, target: str, scenario: str, before: datetime) -> dict[str, Sighting]:
        """Each fingerprint seen on `target` in `scenario` runs started before `before`: first and last time."""
        with self._session() as session:
            rows = session.run(
                "SELECT f.fingerprint, min(r.started_at), max(r.started_at) FROM findings f"
                " JOIN runs r ON r.run_id = f.run_id WHERE r.target = ? AND r.scenario = ?"
                f" AND r.started_at < ? AND r.{SEEN} GROUP BY f.fingerprint",
                [target, scenario, before],
            )
        return {r[0]: Sighting(first_seen=utc(r[1]), last_seen=utc(r[2])) for r in rows}

    def trends(
        self, target: str, scenario: str, limit: int | None = None
    ) -> list[tuple[RunRecord, Vitals]]:
        """The vital signs of the target's `scenario` runs, oldest first (the latest `limit` when given)."""
        columns = ", ".join(f"r.{c}" for c in RUN_COLUMNS.split(", "))
        with self._session() as session:
            rows = session.run(
                f"SELECT {columns}, {', '.join(f'v.{c}' for c in VITAL_COLUMNS)} FROM runs r"
                " JOIN vitals v ON v.run_id = r.run_id WHERE r.target = ? AND r.scenario = ?"
                " ORDER BY r.started_at DESC" + (f" LIMIT {int(limit)}" if limit else ""),
                [target, scenario],
            )
        width = len(RUN_COLUMNS.split(", "))
        return [
            (_run(r[:width]), Vitals(**dict(zip(VITAL_COLUMNS, r[width:], strict=True))))
            for r in reversed(rows)
        ]

    def identity_of(self, display: str) -> str | None:
        """The identity last recorded for a display (a failed run cannot probe the target for it)."""
        with self._session() as session:
            rows = session.run(
                "SELECT target FROM runs WHERE display = ? ORDER BY started_at DESC LIMIT 1",
                [display],
            )
        return rows[0][0] if rows else None

    def targets(self) -> list[TargetSummary]:
        """Every target with history: its identity, latest display, run count and latest start."""
        with self._session() as session:
            rows = session.run(
                "SELECT target, count(*), max(started_at) FROM runs GROUP BY target ORDER BY target"
            )
            displays = dict(
                session.run(
                    "SELECT target, display FROM runs r WHERE started_at ="
                    " (SELECT max(started_at) FROM runs s WHERE s.target = r.target)"
                )
            )
        return [
            TargetSummary(target=t, display=displays.get(t, t), runs=n, last_started_at=utc(last))
            for t, n, last in rows
        ]

    # -- baselines ----------------------------------------------------------------------------
    def save_baseline(self, baseline: Baseline) -> None:
        with self._session() as session:
            session.run(
                "DELETE FROM baselines WHERE target = ? AND run_id = ?",
                [baseline.target, baseline.run_id],
            )
            session.run(
                "INSERT INTO baselines VALUES (?, ?, ?, ?, ?, ?)",
                [
                    baseline.target,
                    baseline.run_id,
                    baseline.taken_at,
                    baseline.quiet,
                    baseline.reason,
                    baseline.window_json,
                ],
            )

    def latest_baseline(self, target: str) -> Baseline | None:
        """The target's latest window that was quiet, or None."""
        with self._session() as session:
            rows = session.run(
                "SELECT target, run_id, taken_at, quiet, reason, window_json FROM baselines"
                " WHERE target = ? AND quiet ORDER BY taken_at DESC LIMIT 1",
                [target],
            )
        if not rows:
            return None
        target_id, run_id, taken_at, quiet, reason, window_json = rows[0]
        return Baseline(
            target=target_id,
            run_id=run_id,
            taken_at=utc(taken_at),
            quiet=quiet,
            reason=reason,
            window_json=window_json,
        )

    # -- long-term memory ---------------------------------------------------------------------
    def lesson(self, target: str, operator: str) -> tuple[str, int] | None:
        """The stored lesson (JSON body, successes) for one operator on one target."""
        with self._session() as session:
            rows = session.run(
                "SELECT body, successes FROM lessons WHERE target = ? AND operator = ?",
                [target, operator],
            )
        return (rows[0][0], int(rows[0][1])) if rows else None

    def put_lesson(self, target: str, operator: str, kind: str, body: str, successes: int) -> None:
        now = datetime.now(UTC)
        with self._session() as session:
            session.run("DELETE FROM lessons WHERE target = ? AND operator = ?", [target, operator])
            session.run(
                "INSERT INTO lessons VALUES (?, ?, ?, ?, ?, ?, ?)",
                [target, operator, kind, body, successes, now, now],
            )

    def unfixed_error(self, target: str, operator: str, leaf: str) -> str | None:
        """The stored error (JSON body) an operator left unfixed on one target, by its error class."""
        with self._session() as session:
            rows = session.run(
                "SELECT body FROM unfixed_errors WHERE target = ? AND operator = ? AND leaf = ?",
                [target, operator, leaf],
            )
        return str(rows[0][0]) if rows else None

    def put_unfixed_error(self, target: str, operator: str, leaf: str, body: str) -> None:
        with self._session() as session:
            session.run(
                "DELETE FROM unfixed_errors WHERE target = ? AND operator = ? AND leaf = ?",
                [target, operator, leaf],
            )
            session.run(
                "INSERT INTO unfixed_errors VALUES (?, ?, ?, ?, ?)",
                [target, operator, leaf, body, datetime.now(UTC)],
            )

    def forget_unfixed_errors(self, target: str, operator: str) -> None:
        """An operator that ran to the end on the target: the errors it left before are gone."""
        with self._session() as session:
            session.run(
                "DELETE FROM unfixed_errors WHERE target = ? AND operator = ?", [target, operator]
            )

    def unfixed_errors(self, target: str) -> list[str]:
        """The errors earlier runs left unfixed on the target (JSON bodies), latest first."""
        with self._session() as session:
            rows = session.run(
                "SELECT body FROM unfixed_errors WHERE target = ? ORDER BY seen_at DESC, operator",
                [target],
            )
        return [r[0] for r in rows]

    def lessons(self, target: str) -> list[str]:
        """The target's lessons (JSON bodies), most successful first."""
        with self._session() as session:
            rows = session.run(
                "SELECT body FROM lessons WHERE target = ? ORDER BY successes DESC, used_at DESC",
                [target],
            )
        return [r[0] for r in rows]
