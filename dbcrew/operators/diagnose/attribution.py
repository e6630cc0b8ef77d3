"""Time attribution (ASH-style): where a window's database time went, and how much of it each cause explains.

Database time is counted in active-session samples: the sampler reads pg_stat_activity about ten
times a second, and each sample of a client backend (or parallel worker) in state `active` is one
sampling step of database time, on the CPU (no wait event) or waiting on its event. The review's own
sessions are left out by the sampler's query, autovacuum workers by the tally (their time is not the
workload's, vacuum_interference is judged from their progress). The samples are kept summed by wait,
statement (pglast's fingerprint: literals and $n parameters alike) and relation (`TimeSlice`).

Relation of a sample: for a lock wait, the relation of the lock the session waits for, read from
pg_locks in the same sample query, when that lock names one (relation, tuple, page, extend locks);
a row lock's waiter waits on the holder's transaction id, which names none, and every other sample
goes to the table the statement writes (or, a select, first reads) as its text names it, resolved
against the window's tables when the text leaves the schema out.

`cause_shares` scores candidate causes by the share of the time they explain; which samples each
cause explains is part of its declaration (`CauseTime`, dbcrew/operators/diagnose/causes/), gathered
into the registry's CAUSE_TIME (dbcrew/operators/diagnose/experts.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from dbcrew.models.report import TimeAttribution, TimeShare
from dbcrew.operators.window.evidence import TimeSlice, WindowEvidence, statement_identity
from dbcrew.operators.window.readers import EXTENSION_WAITS, WAL_FLUSH_WAITS
from dbcrew.vocabulary import Cause

# Fewer active samples than this (under half a session busy over a 5 s window) measure no share:
# one sample more or less would move a share by several points.
MIN_ACTIVE_SAMPLES = 20
TOP_LINES = 8  # lines of each list of the report's attribution
WRITES = ("insert", "update", "delete", "merge", "copy")
TRANSACTION = "transaction"  # the kind of BEGIN, COMMIT, END, ROLLBACK (`statement_kind`)


class Claimant(Protocol):
    """What the attribution reads of a candidate cause (dbcrew.operators.diagnose.experts.Candidate)."""

    @property
    def code(self) -> Cause: ...

    @property
    def objects(self) -> list[str]: ...

    @property
    def evidence(self) -> dict[str, object]: ...


def _resolver(window: WindowEvidence) -> Callable[[str], str]:
    """'table' as a statement's text names it -> 'schema.table' of the window's tables, when exactly one matches."""
    by_name: dict[str, list[str]] = {}
    for table in window.tables:
        by_name.setdefault(table.name.split(".", 1)[-1], []).append(table.name)

    def resolve(relation: str) -> str:
        if not relation or "." in relation:
            return relation
        found = by_name.get(relation, [])
        return found[0] if len(found) == 1 else relation

    return resolve


def slices(window: WindowEvidence) -> list[TimeSlice]:
    """The window's time slices, their statements' tables resolved to the window's qualified names."""
    resolve = _resolver(window)
    return [s.model_copy(update={"relation": resolve(s.relation)}) for s in window.time_slices]


def active_samples(window: WindowEvidence) -> int:
    return sum(s.samples for s in window.time_slices)


def measured(window: WindowEvidence) -> bool:
    """Whether the window's sessions were sampled one by one, often enough for a share to mean something."""
    return active_samples(window) >= MIN_ACTIVE_SAMPLES


def _shares(counts: Counter[str], total: int, top: int) -> list[TimeShare]:
    return [
        TimeShare(label=label, samples=n, share=round(n / total, 3))
        for label, n in counts.most_common(top)
    ]


def attribute(window: WindowEvidence, top: int = TOP_LINES) -> TimeAttribution | None:
    """The window's active time by wait class, wait event, statement and relation; None without samples."""
    parts = slices(window)
    total = sum(s.samples for s in parts)
    if not total:
        return None
    classes, events, statements, relations = (
        Counter[str](),
        Counter[str](),
        Counter[str](),
        Counter[str](),
    )
    for s in parts:
        classes[s.wait.split(":", 1)[0]] += s.samples
        events[s.wait] += s.samples
        statements[window.statement_texts.get(s.statement, s.statement) or "(no statement)"] += (
            s.samples
        )
        relations[s.relation or "(no relation)"] += s.samples
    return TimeAttribution(
        samples=total,
        by_wait_class=_shares(classes, total, top),
        by_wait_event=_shares(events, total, top),
        by_statement=_shares(statements, total, top),
        by_relation=_shares(relations, total, top),
    )


def lock_relations(window: WindowEvidence) -> list[tuple[str, int]]:
    """Relations whose locks the active sessions waited for, with their samples, most first ('' none named)."""
    waits = Counter[str]()
    for s in slices(window):
        if _lock(s):
            waits[s.relation] += s.samples
    return waits.most_common()


def _flush(s: TimeSlice) -> bool:
    return s.wait in WAL_FLUSH_WAITS


def _lock(s: TimeSlice) -> bool:
    """Waiting for a lock another session holds (the relation-extension lock is the writer's own work)."""
    return s.wait.startswith("Lock:") and s.wait not in EXTENSION_WAITS


def _own_work(s: TimeSlice) -> bool:
    """Time a statement spends doing its own work (on the CPU, reading, on a buffer's or WAL insert's
    lightweight lock, extending its table): not waiting for another session's lock, nor for its
    commit's WAL flush."""
    return not _lock(s) and not _flush(s)


def _evidence_texts(evidence: Mapping[str, object]) -> list[str]:
    """The statement texts a candidate's evidence blames (its 'query', or the 'query' of its listed statements)."""
    texts = [evidence["query"]] if isinstance(evidence.get("query"), str) else []
    for key in ("statements", "bulk_statements"):
        items = evidence.get(key)
        if isinstance(items, list):
            texts += [
                i["query"] for i in items if isinstance(i, dict) and isinstance(i.get("query"), str)
            ]
    return [t for t in texts if t]  # type: ignore[misc]


def blamed_statements(candidate: Claimant, window: WindowEvidence) -> set[str]:
    """The statement keys of the texts a candidate's evidence quotes: an evidence text is cut, so the
    full text it begins is looked up among the window's statements and sampled texts first."""
    full = (
        [s.query for s in window.statements]
        + list(window.running)
        + list(window.statement_texts.values())
    )
    keys = set()
    for text in _evidence_texts(candidate.evidence):
        whole = next((f for f in full if f.startswith(text)), text)
        keys.add(statement_identity(whole).key)
    return keys


Claim = Callable[[TimeSlice], bool]


def _of_kinds(*kinds: str) -> Claim:
    return lambda s: _own_work(s) and s.kind in kinds


def _writes_of_kinds(*kinds: str) -> Claim:
    """The writes' own work and the WAL flushes of their own commits: an autocommit write's commit is
    sampled under the write's text, so its flush is that statement's time (ASH's time by statement). A
    flush sampled under COMMIT (an explicit transaction's) is no single statement's: commit pressure's."""
    return lambda s: s.kind in kinds and not _lock(s)


def _share_of(window: WindowEvidence, claim: Claim) -> float | None:
    """The share of the window's active time in the slices `claim` takes; None unmeasured."""
    if not measured(window):
        return None
    parts = window.time_slices
    return sum(s.samples for s in parts if claim(s)) / sum(s.samples for s in parts)


def kinds_share(window: WindowEvidence, *kinds: str) -> float | None:
    """The share of the window's active time spent by statements of `kinds` (their own work and their own
    commits' flushes, not their lock waits); None where the window was not sampled one by one."""
    return _share_of(window, _writes_of_kinds(*kinds))


def commit_flush_share(window: WindowEvidence) -> float | None:
    """The share of the window's active time spent waiting on the WAL flushes of explicit transactions'
    commits (sampled under COMMIT or END: no single statement's time, the committing's own); None where
    the window was not sampled one by one."""
    return _share_of(window, lambda s: _flush(s) and s.kind == TRANSACTION)


def work_share(window: WindowEvidence, query: str) -> float | None:
    """The share of the window's own work (samples on the CPU or reading, not waiting for another
    session's lock or for a commit's flush) spent by `query` (literals and $n alike); None unmeasured.

    A heavy statement beside twenty sessions queued on a lock takes a small share of the statement
    time (the queue's waits count there) but most of the work the server did."""
    if not measured(window):
        return None
    work = [s for s in window.time_slices if _own_work(s)]
    total = sum(s.samples for s in work)
    if not total:
        return None
    key = statement_identity(query).key
    return sum(s.samples for s in work if s.statement == key) / total


def write_shares(window: WindowEvidence) -> list[tuple[str, float]]:
    """Tables by the share of the window's active time their writes took (own work and own flushes), most
    first; empty where the window was not sampled one by one."""
    if not measured(window):
        return []
    parts = slices(window)
    total = sum(s.samples for s in parts)
    claim = _writes_of_kinds(*WRITES)
    by_table = Counter[str]()
    for s in parts:
        if s.relation and claim(s):
            by_table[s.relation] += s.samples
    return [(table, n / total) for table, n in by_table.most_common()]


ClaimRule = Callable[[Claimant, WindowEvidence], Claim]


@dataclass(frozen=True)
class CauseTime:
    """Which of the window's active samples a cause explains: part of its declaration
    (dbcrew/operators/diagnose/causes/), read by `cause_time`.

    `claims`: the samples it takes, given the candidate (its objects, the statements its evidence
    quotes) and the window; None: the own work of the statements its evidence quotes (a plan cause's
    heavy statement, the statements holding the memory), not measured where it quotes none.
    `cpu_remainder`: the CPU samples no other candidate claims instead (CPU time spent by statements
    another cause claims is that cause's symptom, not a cause of its own).
    `unseen_unmeasured`: none of its samples seen is "not measured" (None) rather than none of the
    time (a client VACUUM that never ran while sampled)."""

    claims: ClaimRule | None = None
    cpu_remainder: bool = False
    unseen_unmeasured: bool = False


QUOTED_STATEMENTS = CauseTime()  # the time of a cause no declaration says more of


def flushes(_candidate: Claimant, _window: WindowEvidence) -> Claim:
    """Waiting for a commit's WAL flush (IO:WALSync, IO:WALWrite, LWLock:WALWrite), whichever
    statement's commit it is."""
    return _flush


def data_file_io(_candidate: Claimant, _window: WindowEvidence) -> Claim:
    """Waiting for data-file I/O (IO:* but the WAL flush)."""
    return lambda s: s.wait.startswith("IO:") and not _flush(s)


def writes_of(*kinds: str) -> ClaimRule:
    """The writes of `kinds`: their own work and the flushes of their own (autocommit) commits,
    sampled under their text (`_writes_of_kinds`); the lock waits they meet are the contention's."""
    return lambda _candidate, _window: _writes_of_kinds(*kinds)


def statements_or(*kinds: str) -> ClaimRule:
    """The own work of the statements the candidate blames; of every statement of `kinds` when it names none."""

    def claim(candidate: Claimant, window: WindowEvidence) -> Claim:
        keys = blamed_statements(candidate, window)
        if keys:
            return lambda s: _own_work(s) and s.statement in keys
        return _of_kinds(*kinds)

    return claim


def locks_on_objects(candidate: Claimant, _window: WindowEvidence) -> Claim:
    """Waiting for another session's lock on the candidate's relations (all lock waits when it names none)."""
    objects = set(candidate.objects)
    return lambda s: _lock(s) and (not objects or s.relation in objects)


def writes_to_objects(candidate: Claimant, _window: WindowEvidence) -> Claim:
    """Writes (own work and own flushes) to the candidate's tables."""
    objects = set(candidate.objects)
    writes = _writes_of_kinds(*WRITES)
    return lambda s: writes(s) and s.relation in objects


def client_vacuum(_candidate: Claimant, _window: WindowEvidence) -> Claim:
    """VACUUM run by a client (autovacuum's time is not sampled as the workload's)."""
    return lambda s: s.kind == "vacuum"


def _claim(candidate: Claimant, window: WindowEvidence, rule: CauseTime) -> Claim | None:
    if rule.cpu_remainder:
        return None
    if rule.claims is not None:
        return rule.claims(candidate, window)
    keys = blamed_statements(candidate, window)
    return (lambda s: _own_work(s) and s.statement in keys) if keys else None


@dataclass(frozen=True)
class Explained:
    """The time one cause explains: its share of the window's active samples, and that share by the
    statements of those samples (where most of one cause's time is spent by the statements of another,
    the two are one workload seen from two sides)."""

    share: float
    statements: Mapping[str, float] = field(default_factory=dict)

    def within(self, statements: Iterable[str]) -> float:
        """The share of the window this cause explains in `statements`."""
        return sum(self.statements.get(key, 0.0) for key in statements)


def cause_time(
    candidates: Sequence[Claimant], window: WindowEvidence, times: Mapping[Cause, CauseTime]
) -> dict[Cause, Explained | None]:
    """What each candidate cause explains of the window's active time, by its `CauseTime` in `times`
    (the registry's CAUSE_TIME; `QUOTED_STATEMENTS` for a code it lacks); None where the window was not
    sampled one by one, or the cause's time cannot be seen in the sessions' samples.

    Shares overlap where two causes explain the same samples (many inserts and a large insert: the rows
    per commit tell those apart), so they need not add up to one."""
    if not measured(window):
        return {c.code: None for c in candidates}
    parts = slices(window)
    total = sum(s.samples for s in parts)
    rules = {c.code: times.get(c.code, QUOTED_STATEMENTS) for c in candidates}
    claims = {c.code: _claim(c, window, rules[c.code]) for c in candidates}
    out: dict[Cause, Explained | None] = {}
    for candidate in candidates:
        code, claim = candidate.code, claims[candidate.code]
        if rules[code].cpu_remainder:
            claim = _unclaimed_cpu([c for c in claims.values() if c])
        if claim is None:
            out[code] = None
            continue
        seen = [s for s in parts if claim(s)]
        share = round(sum(s.samples for s in seen) / total, 3)
        if share:
            by_statement = Counter[str]()
            for s in seen:
                if s.statement:
                    by_statement[s.statement] += s.samples
            out[code] = Explained(share, {k: n / total for k, n in by_statement.items()})
        else:
            unseen = _unseen(candidate, rules[code])
            out[code] = None if unseen is None else Explained(unseen)
    return out


def cause_shares(
    candidates: Sequence[Claimant], window: WindowEvidence, times: Mapping[Cause, CauseTime]
) -> dict[Cause, float | None]:
    """Each candidate cause's share of the window's active time (`cause_time`)."""
    return {
        code: None if explained is None else explained.share
        for code, explained in cause_time(candidates, window, times).items()
    }


def _unclaimed_cpu(others: list[Claim]) -> Claim:
    return lambda s: s.wait == "CPU" and not any(claim(s) for claim in others)


def _unseen(candidate: Claimant, rule: CauseTime) -> float | None:
    """The share of a cause none of whose samples was seen: a plan cause's statement (finished between two
    samples) stands in with its share of the statements' execution time; a cause declared
    `unseen_unmeasured` (a client VACUUM that never ran while sampled) is not measured (None); any
    other cause explains none of the time."""
    fallback = candidate.evidence.get("share_of_statement_time")
    if isinstance(fallback, int | float):
        return float(fallback)
    return None if rule.unseen_unmeasured else 0.0
