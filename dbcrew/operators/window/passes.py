"""What one sampling pass of the watcher keeps, how passes merge, and how stored passes become a diagnosis window.

A pass holds per-second rates over its span (the counters of dbcrew/operators/window/readers.py, and
the session gauges of its one pg_stat_activity read), the tally of that read (waits, blocked
sessions, running statements by text digest), and the statements and busiest tables with their
counters per second. Merging passes (downsampling, or an interval) weights every rate by the
seconds it spans, sums the tallies, and keeps the latest sizes; so a one-minute bucket is the
minute's mean rates and a diagnosis window built from buckets has one value per bucket. Beside the
means, a merge keeps the lowest and highest pass of each of the incident detector's signals
(`lows`, `highs`) where they lie at least the signal's floor from the mean: the detector judges
single passes against the same hour of earlier days read from minute buckets, and a minute's mean
is narrower than the passes it merged (a bursty batch's passes swing around it), so a range built
from means can call the batch's own ordinary passes abnormal. A swing under the floor is left out: the
detector's deviation is never under the floor, so it would move a score by under one deviation.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Iterable
from datetime import datetime
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, BeforeValidator, Field, PlainSerializer

from dbcrew.models.report import SkipCause
from dbcrew.operators.window.evidence import (
    BlockedSession,
    StatementDelta,
    TableDelta,
    WindowEvidence,
)
from dbcrew.operators.window.metrics import floors
from dbcrew.operators.window.session_time import SessionTime, merged
from dbcrew.store.samples import StoredPass

TOP_STATEMENTS = 20  # statements kept per pass (by execution time in its span); the rest are noise for a diagnosis
TOP_TABLES = 10  # tables kept per pass (by rows read and written)
TOP_RUNNING = 10  # running statement texts kept per pass
MAX_BLOCKED = 20
SIGNIFICANT_DIGITS = 6  # rates are estimates: more digits are bytes, not information
# The detector's signals (name -> floor), whose lowest and highest pass a merge keeps.
EXTREMES = floors()


def digest(text: str) -> str:
    """A query text's key in the store's text table (the text itself is kept once per target)."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def rounded(value: float) -> float:
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}")


M = TypeVar("M", bound=BaseModel)


def as_rows(model: type[M]) -> tuple[BeforeValidator, PlainSerializer]:
    """A list of `model`s stored as rows: each item its fields' values in declaration order, trailing defaults left out.

    A pass keeps up to 20 statements, 10 tables and 20 blocked sessions, and as objects their field names were half
    their bytes, in every pass and every bucket. Read back, a row is zipped with the fields again and a dict (a body
    stored before) is taken as it is; so the fields' order is part of the stored format: a new field goes last, with
    a default."""
    names = list(model.model_fields)
    defaults = [f.default for f in model.model_fields.values()]

    def row(item: M) -> list[Any]:
        values = [getattr(item, name) for name in names]
        while values and values[-1] == defaults[len(values) - 1]:
            values.pop()
        return values

    def read(items: Any) -> Any:
        if not isinstance(items, list):
            return items
        return [dict(zip(names, i, strict=False)) if isinstance(i, list) else i for i in items]

    return BeforeValidator(read), PlainSerializer(
        lambda items: [row(i) for i in items], when_used="json"
    )


class StatementRate(BaseModel):
    """One pg_stat_statements entry (queryid, userid) over a pass: counters per second, its text by digest."""

    queryid: int
    userid: int
    digest: str
    calls: float
    total_exec_time_ms: float
    rows: float
    shared_blks_read: float = 0.0
    temp_blks_written: float = 0.0


RATE_FIELDS = ("calls", "total_exec_time_ms", "rows", "shared_blks_read", "temp_blks_written")
TABLE_COUNTERS = ("seq_scan", "seq_tup_read", "idx_scan", "n_tup_ins", "n_tup_upd", "n_tup_del")


class TargetFacts(BaseModel):
    """What a diagnosis window needs of the target besides its rates: kept per target, refreshed on each connection."""

    settings: dict[str, str] = Field(default_factory=dict)
    cpu_count: int | None = None
    memory_total_bytes: int | None = None
    server_version_num: int = 0


class StatementsUnread(BaseModel):
    """Passes that could not read pg_stat_statements (not installed, not preloaded, not granted): their empty
    statements are unknown, not quiet, and a diagnosis of their interval says so."""

    cause: SkipCause = Field(description="why, as the latest such pass found it")
    passes: int = Field(1, description="raw passes merged that could not read it")


class PassBody(BaseModel):
    """One pass, or a merge of passes. Tables carry counters per second and their sizes at the end.

    Stored with its defaults and its zero rates left out (`as_stored`): most of a quiet pass is zeros; its
    statements, tables and blocked sessions as rows (`as_rows`).
    """

    rates: dict[str, float] = Field(default_factory=dict)
    waits: dict[str, int] = Field(default_factory=dict)
    session_samples: int = 0
    flusher_idle_between: int = 0
    blocked: Annotated[list[BlockedSession], *as_rows(BlockedSession)] = Field(default_factory=list)
    running: dict[str, int] = Field(
        default_factory=dict, description="digest of an active session's query text -> samples"
    )
    statements: Annotated[list[StatementRate], *as_rows(StatementRate)] = Field(
        default_factory=list
    )
    tables: Annotated[list[TableDelta], *as_rows(TableDelta)] = Field(default_factory=list)
    reconnects: int = Field(
        0,
        description="times the server ended the watcher's session and it resumed on a new one since the"
        " last pass (in the pass's reads or its session samples between passes)",
    )
    passes: int = Field(1, description="raw passes merged into this one")
    session_time: SessionTime | None = Field(
        None,
        description="the active session samples by wait, statement, kind and relation, bounded"
        " (dbcrew/operators/window/session_time.py); None where no active session was sampled",
    )
    statements_unread: StatementsUnread | None = Field(
        None,
        description="why the pass holds no statements where it could not read them; None when it read them",
    )
    lows: dict[str, float] = Field(
        default_factory=dict,
        description="a merge's lowest pass rate of a detector signal, where at least its floor under the mean",
    )
    highs: dict[str, float] = Field(
        default_factory=dict,
        description="a merge's highest pass rate of a detector signal, where at least its floor over the mean",
    )

    def lowest(self, name: str) -> float:
        """The lowest pass rate of `name` this body merged (a raw pass, or a swing under the floor: its rate)."""
        return self.lows.get(name, self.rates.get(name, 0.0))

    def highest(self, name: str) -> float:
        """The highest pass rate of `name` this body merged (a raw pass, or a swing under the floor: its rate)."""
        return self.highs.get(name, self.rates.get(name, 0.0))


def as_stored(body: PassBody) -> str:
    """The JSON the store keeps of a body: its defaults left out (they come back when it is read)."""
    return body.model_dump_json(exclude_defaults=True)


def merge(parts: list[tuple[float, PassBody]]) -> PassBody:
    """Passes (each with the seconds it spans) as one: rates weighted by seconds, tallies summed, latest sizes kept."""
    total = sum(seconds for seconds, _ in parts) or 1.0
    rates: defaultdict[str, float] = defaultdict(float)
    statements: dict[tuple[int, int], dict[str, float]] = {}
    digests: dict[tuple[int, int], str] = {}
    tables: dict[str, dict[str, float]] = {}
    sizes: dict[str, TableDelta] = {}
    out = PassBody(passes=0)
    waits: Counter[str] = Counter()
    running: Counter[str] = Counter()
    blocked: dict[tuple[int, int], BlockedSession] = {}
    for seconds, body in parts:
        for name, value in body.rates.items():
            rates[name] += value * seconds
        waits.update(body.waits)
        running.update(body.running)
        out.session_samples += body.session_samples
        out.flusher_idle_between += body.flusher_idle_between
        out.reconnects += body.reconnects
        out.passes += body.passes
        for b in body.blocked:
            blocked[(b.pid, b.blocker_pid)] = b
        for s in body.statements:
            key = (s.queryid, s.userid)
            digests[key] = s.digest
            sums = statements.setdefault(key, dict.fromkeys(RATE_FIELDS, 0.0))
            for f in RATE_FIELDS:
                sums[f] += getattr(s, f) * seconds
        for t in body.tables:
            sums = tables.setdefault(t.name, dict.fromkeys(TABLE_COUNTERS, 0.0))
            for f in TABLE_COUNTERS:
                sums[f] += getattr(t, f) * seconds
            sizes[t.name] = t
    out.rates = {name: rounded(v / total) for name, v in rates.items() if v}
    out.statements_unread = unread_of(parts)
    out.lows, out.highs = extremes(out.rates, [body for _seconds, body in parts])
    out.waits, out.running = dict(waits), dict(running.most_common(TOP_RUNNING))
    out.session_time = merged(body.session_time for _seconds, body in parts)
    out.blocked = list(blocked.values())[-MAX_BLOCKED:]
    out.statements = sorted(
        (
            StatementRate(
                queryid=q,
                userid=u,
                digest=digests[(q, u)],
                **{f: rounded(v / total) for f, v in sums.items()},
            )
            for (q, u), sums in statements.items()
        ),
        key=lambda s: -s.total_exec_time_ms,
    )[:TOP_STATEMENTS]
    busiest = sorted(tables.items(), key=lambda kv: -sum(kv[1].values()))[:TOP_TABLES]
    out.tables = [
        sizes[name].model_copy(update={f: rounded(v / total) for f, v in sums.items()})
        for name, sums in busiest
    ]
    return out


def unread_of(parts: list[tuple[float, PassBody]]) -> StatementsUnread | None:
    """The passes of `parts` that could not read pg_stat_statements, with the latest one's cause; None when all read it."""
    unread = [body.statements_unread for _seconds, body in parts if body.statements_unread]
    if not unread:
        return None
    return StatementsUnread(cause=unread[-1].cause, passes=sum(u.passes for u in unread))


def extremes(
    means: dict[str, float], parts: list[PassBody]
) -> tuple[dict[str, float], dict[str, float]]:
    """The lowest and highest pass of each detector signal over `parts` (merged into `means`), where at least the
    signal's floor from its mean."""
    lows: dict[str, float] = {}
    highs: dict[str, float] = {}
    if not parts:
        return lows, highs
    for name, floor in EXTREMES.items():
        mean = means.get(name, 0.0)
        low, high = min(p.lowest(name) for p in parts), max(p.highest(name) for p in parts)
        if mean - low >= floor:
            lows[name] = rounded(low)
        if high - mean >= floor:
            highs[name] = rounded(high)
    return lows, highs


def bodies(passes: Iterable[StoredPass]) -> list[tuple[float, PassBody]]:
    return [(p.seconds, PassBody.model_validate_json(p.body)) for p in passes]


def rate_names(parts: list[tuple[float, PassBody]]) -> frozenset[str]:
    """Every rate some pass of `parts` holds."""
    return frozenset(name for _seconds, body in parts for name in body.rates)


def window_of(
    passes: list[StoredPass],
    texts: dict[str, str],
    facts: TargetFacts,
    started_at: datetime,
    also: frozenset[str] = frozenset(),
) -> WindowEvidence:
    """The diagnosis window of stored passes: one series value per pass, statements and tables as deltas over all of them.

    A pass stores only the rates and tallies it saw (no session waiting on a lock: no act.wait_lock),
    so a rate left out is zero, over these passes and over the names in `also` (the rates of the
    window a baseline is compared with: a quiet baseline's missing tallies are zeros to compare with,
    not metrics it cannot judge).

    A statement whose text the store does not have (it never does for a digest it did not keep) is
    left out: a diagnosis cannot EXPLAIN or name what it cannot read.
    """
    return window_of_parts(bodies(passes), texts, facts, started_at, also)


def window_of_parts(
    parts: list[tuple[float, PassBody]],
    texts: dict[str, str],
    facts: TargetFacts,
    started_at: datetime,
    also: frozenset[str] = frozenset(),
) -> WindowEvidence:
    """The diagnosis window of passes (each with the seconds it spans), wherever they were read: the store, Prometheus."""
    whole = merge(parts)
    names = sorted({name for _seconds, body in parts for name in body.rates} | set(also))
    series = {name: [body.rates.get(name, 0.0) for _seconds, body in parts] for name in names}
    seconds = sum(s for s, _ in parts)
    statements = [
        StatementDelta(
            queryid=s.queryid,
            userid=s.userid,
            query=texts[s.digest],
            **{f: getattr(s, f) * seconds for f in RATE_FIELDS},
        )
        for s in whole.statements
        if s.digest in texts
    ]
    tables = [
        t.model_copy(update={f: getattr(t, f) * seconds for f in TABLE_COUNTERS})
        for t in whole.tables
    ]
    spans = sorted(s for s, _ in parts)
    # Every slice of every pass: the window's attribution is as fine as the passes kept it.
    sampled = merged((body.session_time for _seconds, body in parts), top=None)
    return WindowEvidence(
        started_at=started_at.timestamp(),
        seconds=seconds,
        interval=spans[len(spans) // 2] if spans else 0.0,
        series=series,
        waits=whole.waits,
        session_samples=whole.session_samples,
        flusher_idle_between=whole.flusher_idle_between,
        blocked=whole.blocked,
        statements=statements,
        tables=tables,
        settings=facts.settings,
        running={texts[d]: n for d, n in whole.running.items() if d in texts},
        time_slices=sampled.time_slices() if sampled else [],
        statement_texts={k: texts[d] for k, d in sampled.texts.items() if d in texts}
        if sampled
        else {},
        cpu_count=facts.cpu_count,
        memory_total_bytes=facts.memory_total_bytes,
        server_version_num=facts.server_version_num,
        reconnects=whole.reconnects,
    )
