"""What a stored pass keeps of its session samples' time: active samples by wait x statement x kind x relation.

The live sampler counts each active session sample under its wait, its statement (pglast's
fingerprint), the statement's kind and the relation (`ActivityTally.slices`, ASH's unit, the time
attribution's input, dbcrew/operators/diagnose/attribution.py); an autocommit write's commit flush is
sampled under the write's text, so a statement's own flushes are its time. The watcher keeps the
same counts per pass, bounded: the TOP_SLICES heaviest slices, and the rest summed by wait event
under OTHER (the wait classes and events stay exact, the statements and relations of the long
tail are one "other" line). Samples are counts, not rates: merging passes (a minute's bucket, an
hour's, a diagnosis window) sums them and bounds the sum again, so a merge of merges is the same
as one merge of the raw passes' slices wherever nothing fell into the remainder.

A statement is stored by its key, its text (cut at SHOWN_QUERY_CHARS, as the live attribution
shows it) by digest in the store's text table, once per target like every other text.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping

from pydantic import BaseModel, Field

from dbcrew.operators.window.evidence import TimeSlice

TOP_SLICES = (
    30  # slices kept per pass (and per bucket) by samples; the rest are summed by wait under OTHER
)
OTHER = "(other)"  # the statement and relation of the remainder's slices

SliceKey = tuple[str, str, str, str]  # wait, statement key, kind, relation


Row = tuple[str, str, str, str, int]  # a slice: wait, statement key, kind, relation, samples


class SessionTime(BaseModel):
    """A pass's (or a merge's) active session samples by slice, bounded, and the texts of their statements.

    Stored compact: each statement once in `statements` ([key, kind, relation, text digest]: its
    relation the one most of its samples went to), each slice as [wait, statement's index, relation
    or null for the statement's own, samples]. Most slices are a statement's time on its own table,
    so a slice is a few bytes, not its statement's key, kind and table again. `of` builds one from
    rows, `rows` gives them back."""

    statements: list[tuple[str, str, str, str]] = Field(default_factory=list)
    slices: list[tuple[str, int, str | None, int]] = Field(default_factory=list)

    @classmethod
    def of(cls, rows: list[Row], texts: Mapping[str, str]) -> SessionTime:
        """From slice rows and their statements' text digests (statement key -> digest; a key without one: '')."""
        by_statement: dict[tuple[str, str], Counter[str]] = {}
        for _wait, key, kind, relation, n in rows:
            by_statement.setdefault((key, kind), Counter())[relation] += n
        index = {statement: i for i, statement in enumerate(by_statement)}
        own = {statement: c.most_common(1)[0][0] for statement, c in by_statement.items()}
        return cls(
            statements=[(key, kind, own[(key, kind)], texts.get(key, "")) for key, kind in index],
            slices=[
                (wait, index[(key, kind)], None if relation == own[(key, kind)] else relation, n)
                for wait, key, kind, relation, n in rows
            ],
        )

    def rows(self) -> list[Row]:
        return [
            (
                wait,
                self.statements[i][0],
                self.statements[i][1],
                self.statements[i][2] if r is None else r,
                n,
            )
            for wait, i, r, n in self.slices
        ]

    @property
    def texts(self) -> dict[str, str]:
        """Statement key -> the digest of its sampled text, for those the store has a text of."""
        return {key: d for key, _kind, _relation, d in self.statements if d}

    @property
    def samples(self) -> int:
        return sum(row[3] for row in self.slices)

    def counts(self) -> Counter[SliceKey]:
        return Counter({(w, s, k, r): n for w, s, k, r, n in self.rows()})

    def time_slices(self) -> list[TimeSlice]:
        return [
            TimeSlice(wait=w, statement=s, kind=k, relation=r, samples=n)
            for w, s, k, r, n in self.rows()
        ]


def bounded(counts: Counter[SliceKey], top: int | None = TOP_SLICES) -> list[Row]:
    """The `top` heaviest slices (all of them with None), the rest summed by wait under OTHER; heaviest first.

    Ties are broken by the key, so the same counts always keep the same slices."""
    ranked = sorted(
        ((key, n) for key, n in counts.items() if n > 0), key=lambda kv: (-kv[1], kv[0])
    )
    kept = ranked if top is None else ranked[:top]
    rest = Counter[SliceKey]()
    for (wait, *_), n in ranked[len(kept) :]:
        rest[(wait, OTHER, "", OTHER)] += n
    # A remainder slice may meet a kept one of the same key (the bucket's earlier "other"): they add up.
    merged = Counter[SliceKey](dict(kept))
    merged.update(rest)
    return [(*key, n) for key, n in sorted(merged.items(), key=lambda kv: (-kv[1], kv[0]))]


def session_time_of(
    slices: Mapping[SliceKey, int], texts: Mapping[str, str], named: Callable[[str], str]
) -> SessionTime | None:
    """A pass's session time from a tally's slices and sampled texts (`named`: a text -> its digest, stored); None
    when no active session was sampled."""
    rows = bounded(Counter(slices))
    if not rows:
        return None
    keys = {row[1] for row in rows}
    return SessionTime.of(rows, {key: named(texts[key]) for key in sorted(keys) if key in texts})


def merged(parts: Iterable[SessionTime | None], top: int | None = TOP_SLICES) -> SessionTime | None:
    """Parts as one: samples summed by slice, bounded again to `top` (None: every slice, as a diagnosis window
    keeps them); None where no part has any."""
    counts = Counter[SliceKey]()
    texts: dict[str, str] = {}
    for part in parts:
        if part is None:
            continue
        counts.update(part.counts())
        texts.update(part.texts)
    rows = bounded(counts, top)
    return SessionTime.of(rows, texts) if rows else None
