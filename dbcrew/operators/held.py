"""Relations another session holds ACCESS EXCLUSIVE, found without taking a lock: they are left out, not waited on.

A migration, `VACUUM FULL`, `CLUSTER` or `REINDEX` holds (or queues for) an ACCESS EXCLUSIVE
lock, and every size function and definition deparser (`pg_relation_size`,
`pg_total_relation_size`, `pg_get_indexdef`, `pg_get_expr`) takes ACCESS SHARE on the relation, so
one such relation made a whole collector time out. pg_locks and pg_class are read without a
relation lock: the collectors read them first and leave the held relations out of the statements
that would wait (`WHERE relid <> ALL(%(held)s)`), so a locked table costs that table only. A lock
taken between the two reads still ends the statement with lock_timeout: the held set is read
again and the statement retried, a bounded number of times.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pgerrors
from psycopg.rows import tuple_row

T = TypeVar("T")
RACE_RETRIES = 3

# A held index or TOAST table counts for its table too: the table's total size opens them, and an
# index definition is deparsed under a lock on its table. A waiting ACCESS EXCLUSIVE request counts
# as held: a new ACCESS SHARE request queues behind it.
HELD_SQL = """
SELECT DISTINCT c.oid::bigint AS relid, coalesce(i.indrelid, t.oid, c.oid)::bigint AS table_relid,
       format('%I.%I', n.nspname, c.relname) AS name,
       CASE WHEN l.granted THEN 'held' ELSE 'awaited' END || ' ACCESS EXCLUSIVE by pid ' || l.pid AS why
FROM pg_locks l
JOIN pg_class c ON c.oid = l.relation
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_index i ON i.indexrelid = c.oid
LEFT JOIN pg_class t ON t.reltoastrelid = c.oid
WHERE l.locktype = 'relation' AND l.mode = 'AccessExclusiveLock' AND l.pid <> pg_backend_pid()
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
ORDER BY 3, 4
"""


@dataclass(frozen=True)
class Held:
    """Relations a collector leaves out: their oids (with their tables') and, per held relation, why."""

    oids: frozenset[int] = frozenset()
    reasons: dict[str, str] = field(default_factory=dict)

    def __or__(self, other: Held) -> Held:
        return Held(self.oids | other.oids, {**self.reasons, **other.reasons})

    def __bool__(self) -> bool:
        return bool(self.oids)

    @property
    def args(self) -> dict[str, list[int]]:
        """The statement parameter: `%(held)s` is the oid list a guarded statement leaves out."""
        return {"held": sorted(self.oids)}

    def describe(self) -> str:
        """The coverage note: which relations were left out, and who holds them."""
        named = ", ".join(f"{name} ({why})" for name, why in sorted(self.reasons.items()))
        return f"left out, locked by another session: {named}"


def held_relations(conn: psycopg.Connection[Any]) -> Held:
    """The relations of this database another session holds or awaits ACCESS EXCLUSIVE (no relation lock taken)."""
    with conn.cursor(row_factory=tuple_row) as cur:
        rows = cur.execute(HELD_SQL).fetchall()
    reasons: dict[str, list[str]] = {}
    for _, _, name, why in rows:
        reasons.setdefault(name, []).append(why)
    return Held(
        frozenset(oid for relid, table in ((r[0], r[1]) for r in rows) for oid in (relid, table)),
        {name: ", ".join(whys) for name, whys in reasons.items()},
    )


def guarded(
    conn: psycopg.Connection[Any], held: Held, read: Callable[[dict[str, list[int]]], T]
) -> tuple[Held, T]:
    """`read(held.args)`, with the held set grown and the read retried when a lock taken meanwhile times it out."""
    races = 0
    while True:
        try:
            return held, read(held.args)
        except pgerrors.LockNotAvailable:
            grown = held | held_relations(conn)
            races += 1
            if races > RACE_RETRIES or grown.oids == held.oids:
                raise  # not an ACCESS EXCLUSIVE holder this review can see: the monitor decides
            held = grown
