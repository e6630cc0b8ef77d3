"""Questions over the whole catalogue ("which tables have no primary key?"): a per-table look-up chained over every table.

A question that names no table but asks which tables have some property is the per-table look-up
that shows the property, asked of every table: the look-ups run over the catalogue in one statement
each (dbcrew/operators/every_table.py, at most TABLE_CAP tables, said in the answer when the cap cut the
catalogue), and the answer lists the tables whose rows show the property, with what in the rows
shows it, and names the look-ups it came from. A property may need two look-ups ("foreign keys no
index serves": the keys and the indexes), chained per table.

A property is recognized by its cues, written from the catalogue's vocabulary (the look-ups' columns
and the manual's words for them); a question that negates it ("no", "never", "without", ...) asks
for the tables where it does not hold, when the property reads both ways. A size or a row count
with a number ("larger than 5 MB", "more than 50,000 rows") is a threshold. The question is data
throughout: it picks a property and a number, and nothing of it reaches the SQL.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg

from dbcrew.operators.every_table import TABLE_CAP, EveryTable, every_table
from dbcrew.operators.lookups import Rows, when
from dbcrew.vocabulary import Lookup

TableRows = dict[Lookup, Rows]
MAX_LISTED = 50  # tables an answer names; the count says how many more hold the property


@dataclass(frozen=True)
class Threshold:
    """A number a question compares tables with: bytes or rows, above or below."""

    above: bool
    value: float
    unit: str  # "bytes" or "rows"
    said: str  # as the question wrote it ("5 MB")

    def passes(self, value: float) -> bool:
        return value > self.value if self.above else value < self.value

    def phrase(self) -> str:
        return f"{'more' if self.above else 'less'} than {self.said}"


_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
_THRESHOLD = re.compile(
    r"\b(?P<op>more|larger|bigger|greater|over|above|exceed\w*|at least|less|smaller|fewer|under|below)"
    r"\s+(?:than\s+)?(?:about\s+|roughly\s+)?(?P<n>\d[\d,_]*(?:\.\d+)?)\s*"
    r"(?:(?P<scale>[kmgt])?i?b\b|(?P<bytes>bytes)\b|(?P<rows>(?:\w+\s+)?(?:rows?|records?|tuples?|entries|row versions))\b)?",
    re.IGNORECASE,
)


def threshold(question: str) -> Threshold | None:
    """The first comparison with a number and a unit the question makes, or None."""
    for found in _THRESHOLD.finditer(question):
        value = float(found.group("n").replace(",", "").replace("_", ""))
        above = not found.group("op").lower().startswith(("less", "small", "few", "under", "below"))
        said = found.group(0)[len(found.group("op")) :].strip()
        said = re.sub(r"^than\s+", "", said, flags=re.IGNORECASE)
        if found.group("rows"):
            return Threshold(above, value, "rows", said)
        if (
            found.group("bytes")
            or found.group("scale") is not None
            or re.search(r"\d\s*i?b\b", found.group(0), re.IGNORECASE)
        ):
            scale = _UNITS[(found.group("scale") or "").lower()]
            return Threshold(above, value * scale, "bytes", said)
    return None


# -- reading one table's rows ----------------------------------------------------------------------
Judge = Callable[[TableRows, Threshold | None], str | None]


def _columns(definition: str, after: str) -> list[str]:
    """The column list in parentheses after `after` in a catalogue definition, unquoted."""
    found = re.search(re.escape(after) + r"\s*\(([^)]*)\)", definition)
    if not found:
        return []
    return [c.strip().strip('"').split(" ")[0] for c in found.group(1).split(",")]


def _unindexed_foreign_keys(rows: TableRows, _t: Threshold | None) -> str | None:
    """The table's own foreign keys whose columns no valid index leads with."""
    leading = [
        _columns(r["definition"], "USING btree") for r in rows[Lookup.TABLE_INDEXES] if r["valid"]
    ]
    bare = []
    for key in (r for r in rows[Lookup.TABLE_KEYS] if r["kind"] == "f" and r["own"]):
        columns = _columns(key["definition"], "FOREIGN KEY")
        if not any(set(index[: len(columns)]) == set(columns) for index in leading):
            bare.append(f"{key['name']} ({', '.join(columns)})")
    return ", ".join(bare) if bare else None


def _primary_key(rows: TableRows, _t: Threshold | None) -> str | None:
    keys = [r for r in rows[Lookup.TABLE_KEYS] if r["kind"] == "p" and r["own"]]
    return keys[0]["definition"] if keys else None


def _invalid_indexes(rows: TableRows, _t: Threshold | None) -> str | None:
    bad = [r["name"] for r in rows[Lookup.TABLE_INDEXES] if not r["valid"]]
    return ", ".join(bad) if bad else None


def _unused_indexes(rows: TableRows, _t: Threshold | None) -> str | None:
    unused = [r["name"] for r in rows[Lookup.TABLE_INDEXES] if not r["scans"]]
    return ", ".join(f"{name} (0 scans)" for name in unused) if unused else None


def _index_scans(rows: TableRows, _t: Threshold | None) -> str | None:
    scans = sum(r["scans"] or 0 for r in rows[Lookup.TABLE_INDEXES])
    return f"{scans} index scans" if scans else None


def _has_index(rows: TableRows, _t: Threshold | None) -> str | None:
    names = [r["name"] for r in rows[Lookup.TABLE_INDEXES]]
    return ", ".join(names) if names else None


def _autovacuum_on(rows: TableRows, _t: Threshold | None) -> str | None:
    switch = next((r for r in rows[Lookup.TABLE_AUTOVACUUM] if r["name"] == "autovacuum"), None)
    if switch is None:
        return None
    value = switch["table_value"] or switch["server_value"]
    return None if str(value).lower() in ("off", "false") else ""


def _autovacuum_overrides(rows: TableRows, _t: Threshold | None) -> str | None:
    own = [
        f"{'autovacuum_enabled' if r['name'] == 'autovacuum' else r['name']}={r['table_value']}"
        for r in rows[Lookup.TABLE_AUTOVACUUM]
        if r["table_value"] is not None
    ]
    return ", ".join(own) if own else None


def _options(rows: TableRows) -> list[str]:
    stats = rows[Lookup.TABLE_STATS]
    return [o for o in (stats[0]["options"] if stats else "").split(", ") if o]


def _fillfactor(rows: TableRows, _t: Threshold | None) -> str | None:
    own = [o for o in _options(rows) if o.startswith("fillfactor=")]
    return own[0] if own else None


def _storage_options(rows: TableRows, _t: Threshold | None) -> str | None:
    return ", ".join(_options(rows)) or None


def _analyzed(rows: TableRows, _t: Threshold | None) -> str | None:
    stats = rows[Lookup.TABLE_STATS]
    if not stats:
        return None
    last = [v for v in (stats[0]["last_analyze"], stats[0]["last_autoanalyze"]) if v is not None]
    return f"last {when(max(last))}" if last else None


def _vacuumed(rows: TableRows, _t: Threshold | None) -> str | None:
    stats = rows[Lookup.TABLE_STATS]
    if not stats:
        return None
    last = [v for v in (stats[0]["last_vacuum"], stats[0]["last_autovacuum"]) if v is not None]
    return f"last {when(max(last))}" if last else None


def _dead_rows(rows: TableRows, limit: Threshold | None) -> str | None:
    stats = rows[Lookup.TABLE_STATS]
    dead = stats[0]["dead"] if stats else None
    if dead is None:
        return None
    held = limit.passes(dead) if limit is not None and limit.unit == "rows" else dead > 0
    return f"{dead:,} dead rows" if held else None


def _size(rows: TableRows, limit: Threshold | None) -> str | None:
    size = rows[Lookup.TABLE_SIZE]
    if not size or limit is None:
        return None
    r = size[0]
    if limit.unit == "bytes":
        return r["total"] if limit.passes(r["total_bytes"]) else None
    estimated = r["estimated_rows"]
    if estimated < 0:
        return None  # never analyzed: no estimate to compare
    return f"about {estimated:,} rows" if limit.passes(estimated) else None


# -- the properties a question may ask about --------------------------------------------------------
_NEGATION = r"\b(?:no|not|never|none|nobody|without|lack\w*|missing|nothing)\b|n't\b"
_INDEX = r"\bind(?:ex|exes|ices|exed)\b"


@dataclass(frozen=True)
class Property:
    """A property of a table some look-ups' rows show, and the words that ask for it."""

    name: str
    lookups: tuple[Lookup, ...]
    cues: tuple[str, ...]  # every one must match (regexes)
    holds: str  # "have a primary key": the answer's phrase for the tables it lists
    judge: Judge  # what in the table's rows shows the property, or None where it does not hold
    lacks: str = ""  # the phrase when the question negates it; empty: the property reads one way
    negation: str = _NEGATION  # what negates it in a question
    needs: str = ""  # "bytes" or "rows": a threshold the question must give

    def asked(self, question: str) -> bool:
        return all(re.search(cue, question, re.IGNORECASE) for cue in self.cues)

    def negated(self, question: str) -> bool:
        """A negation asks for the tables where the property does not hold. Counted once however often
        it is said: "and if not, which ones were not?" repeats one negation, it does not undo it."""
        return bool(self.lacks) and bool(re.search(self.negation, question, re.IGNORECASE))


# Most specific first: the first property a question asks for is the one answered.
PROPERTIES: tuple[Property, ...] = (
    Property(
        "unindexed_foreign_keys",
        (Lookup.TABLE_KEYS, Lookup.TABLE_INDEXES),
        (r"foreign[- ]keys?|\bfks?\b|referencing col", _INDEX),
        "have a foreign key whose columns no index leads with",
        _unindexed_foreign_keys,
    ),
    Property(
        "primary_key",
        (Lookup.TABLE_KEYS,),
        (r"primary[- ]keys?|\bpkeys?\b|\bpks?\b",),
        "have a primary key",
        _primary_key,
        lacks="have no primary key",
    ),
    Property(
        "invalid_indexes",
        (Lookup.TABLE_INDEXES,),
        (_INDEX, r"invalid|broken|unusable|not valid|failed"),
        "have an invalid index",
        _invalid_indexes,
    ),
    Property(
        "unused_indexes",
        (Lookup.TABLE_INDEXES,),
        (
            _INDEX,
            r"\bunused\b|never (?:been )?(?:used|scanned)|not (?:been )?(?:used|scanned)|zero scans|\b0 scans",
        ),
        "have an index that was never scanned (since the statistics were last reset)",
        _unused_indexes,
    ),
    Property(
        "index_scans",
        (Lookup.TABLE_INDEXES,),
        (r"index[- ]scans?|(?:through|via|by|using) (?:an |their )?index",),
        "were read through an index scan (since the statistics were last reset)",
        _index_scans,
        lacks="were never read through an index scan (since the statistics were last reset)",
    ),
    Property(
        "autovacuum_on",
        (Lookup.TABLE_AUTOVACUUM,),
        (r"auto-?\s?vacuum", r"\boff\b|disabl|enabl|\bon\b|switched|turned|running|active"),
        "have autovacuum on",
        _autovacuum_on,
        lacks="have autovacuum off",
        negation=_NEGATION + r"|\boff\b|disabl",
    ),
    Property(
        "autovacuum_overrides",
        (Lookup.TABLE_AUTOVACUUM,),
        (
            r"vacuum|analy[sz]",
            r"overrid|per[- ]table|\bown\b|custom|non-?default|specific|tuned|reloptions?|storage param",
        ),
        "override autovacuum settings",
        _autovacuum_overrides,
    ),
    Property(
        "fillfactor",
        (Lookup.TABLE_STATS,),
        (r"fill\s?factor",),
        "set a fillfactor of their own",
        _fillfactor,
        lacks="keep the default fillfactor",
    ),
    Property(
        "storage_options",
        (Lookup.TABLE_STATS,),
        (
            r"storage (?:param|option|setting)|reloptions?|"
            r"(?:own|custom|non-?default|per[- ]table) (?:\w+ )?(?:settings?|param\w*|options?)",
        ),
        "have storage parameters of their own",
        _storage_options,
        lacks="have no storage parameter of their own",
    ),
    Property(
        "analyzed",
        (Lookup.TABLE_STATS,),
        (r"analy[sz]",),
        "have been analyzed",
        _analyzed,
        lacks="were never analyzed",
    ),
    Property(
        "vacuumed",
        (Lookup.TABLE_STATS,),
        (r"vacuum",),
        "have been vacuumed",
        _vacuumed,
        lacks="were never vacuumed",
    ),
    Property(
        "dead_rows",
        (Lookup.TABLE_STATS,),
        (r"dead (?:rows?|tuples?|row versions?)",),
        "hold dead rows",
        _dead_rows,
        lacks="hold no dead rows",
    ),
    Property(
        "size",
        (Lookup.TABLE_SIZE,),
        (),
        "are",
        _size,
        needs="bytes",
    ),
    Property(
        "row_count",
        (Lookup.TABLE_SIZE,),
        (),
        "hold",
        _size,
        needs="rows",
    ),
    Property(
        "has_index",
        (Lookup.TABLE_INDEXES,),
        (_INDEX,),
        "have an index",
        _has_index,
        lacks="have no index",
    ),
)
_OVER_TABLES = re.compile(
    r"\b(?:tables|relations|which|any|every|all|list|name|show|are there|is there)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class WideQuestion:
    """A question over every table: the property it asks about, which way, and its threshold."""

    property: Property
    negated: bool
    limit: Threshold | None

    def phrase(self) -> str:
        if self.property.needs:
            assert self.limit is not None
            unit = "" if self.limit.unit == "bytes" else " (planner estimate)"
            larger = "larger" if self.limit.above else "smaller"
            said = (
                f"{larger} than {self.limit.said}"
                if self.limit.unit == "bytes"
                else self.limit.phrase()
            )
            return f"{self.property.holds} {said}{unit}"
        return self.property.lacks if self.negated else self.property.holds


def recognized(question: str, names_an_object: bool) -> WideQuestion | None:
    """The catalogue-wide question `question` asks, or None: it names no table or index of the target
    and asks which tables (or whether any) have a property the look-ups show."""
    if names_an_object or not _OVER_TABLES.search(question):
        return None
    limit = threshold(question)
    for prop in PROPERTIES:
        if prop.needs:
            if limit is not None and limit.unit == prop.needs:
                return WideQuestion(prop, False, limit)
            continue
        if prop.asked(question):
            return WideQuestion(prop, prop.negated(question), limit)
    return None


@dataclass(frozen=True)
class WideAnswer:
    text: str
    looked_up: list[EveryTable]


def answer(conn: psycopg.Connection[Any], wide: WideQuestion, cap: int = TABLE_CAP) -> WideAnswer:
    """Run the property's look-ups over every table (at most `cap`) and list the tables it asks for."""
    looked = [every_table(conn, lookup, cap) for lookup in wide.property.lookups]
    tables = list(looked[0].rows)
    total = looked[0].total
    listed: list[str] = []
    for table in tables:
        rows = {done.lookup: done.rows.get(table, []) for done in looked}
        shown = wide.property.judge(rows, wide.limit)
        if (shown is None) == wide.negated:  # held, or (negated) not held
            name = f"{table[0]}.{table[1]}"
            listed.append(f"{name} ({shown})" if shown and not wide.negated else name)
    read = (
        f"the {len(tables)} tables"
        if len(tables) == total
        else f"the first {len(tables)} of {total} tables"
    )
    phrase = wide.phrase()
    if not listed:
        text = f"None of {read} {phrase}."
    else:
        shown_names = "; ".join(listed[:MAX_LISTED])
        more = f" and {len(listed) - MAX_LISTED} more" if len(listed) > MAX_LISTED else ""
        text = f"{len(listed)} of {read} {phrase}: {shown_names}{more}."
    if len(tables) < total:
        text += (
            f" Only the first {len(tables)} tables by schema and name were looked at (the cap of {cap}"
            f" a catalogue-wide question reads); the other {total - len(tables)} were not."
        )
    sources = " and ".join(done.lookup.value for done in looked)
    text += f" From {sources}, run over every table in one catalogue query each."
    return WideAnswer(text=text, looked_up=looked)
