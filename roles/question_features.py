"""Concept features for the ask router: what a question is about, beyond the words it happens to use.

A few hundred training questions cannot hold every word a user may pick ("footprint", "heaviest",
"build", "pooler"), so the classifiers also read concept tokens added to the text: one per concept
of a small thesaurus of database vocabulary whose words or word stems occur in the question. The
route classifier learns from `__db__` / `__nodb__` that a question without a word of database
vocabulary is rarely about databases, from `__pg__` that it names something of PostgreSQL's own,
from `__here__` that it points at one particular server; the look-up classifier learns from
`__size__`, `__locks__`, `__rank__` and the rest what a question asks of the catalogue. The
thesaurus was written from the domain (the manual's and the look-ups' vocabulary), not from the
benchmark's test questions.
"""

from __future__ import annotations

import re

# concept -> word stems (a stem matches a word that starts with it) and exact phrases.
CONCEPTS: dict[str, tuple[str, ...]] = {
    "db": ("database", "db", "dbms", "sql", "table", "tabl", "index", "indic", "query", "queri", "column", "row ", "rows",
           "record", "schema", "transaction", "commit", "rollback", "lock", "deadlock", "join", "primary key",
           "foreign key", "constraint", "normaliz", "denormaliz", "acid", "isolation", "replica", "shard", "partition",
           "vacuum", "autovacuum", "postgres", "pg_", "mysql", "oracle", "sqlite", "planner", "optimizer", "wal",
           "write-ahead", "write ahead", "checkpoint", "buffer", "cache hit", "tuple", "bloat", "cardinality",
           "selectivity", "view", "trigger", "stored procedure", "cursor", "sequence", "connection", "connected",
           "pool", "session", "backend", "olap", "oltp", "warehouse", "relational", "nosql", "b-tree", "btree", "hash join",
           "scan", "explain", "select", "insert", "update", "delete", "upsert", "mvcc", "snapshot", "xid",
           "wraparound", "extension", "setting", "config", "parameter", "server", "instance", "cluster", "dba",
           "latency", "throughput", "slow", "workload", "backup", "restore", "dump", "key", "field", "storage",
           "disk", "space", "data"),
    "pg": ("postgres", "pg_", "psql", "autovacuum", "vacuum", "toast", "heap-only", "hot update", "brin", "gin ", "gist",
           "spgist", "visibility map", "fillfactor", "hypopg", "wal_", "pg_hba", "tablespace", "mvcc", "reindex",
           "extension", "logical replication", "streaming replication", "xid", "relfrozenxid", "explain analyze"),
    "here": ("here", "this server", "this database", "this instance", "this box", "this cluster", "this db", "our ",
             "we ", "my database", "my db", "right now", "currently", "at the moment", "on the target", "the shop",
             "installed", "running", "configured"),
    "size": ("size", "big", "large", "footprint", "space", "disk", "bytes", "storage", "heav", "weigh", "consum",
             "take up", "takes up", "occup", "mb", "gb"),
    "count": ("how many", "number of", "count", "rows", "records", "entries"),
    "shape": ("column", "field", "attribute", "type", "structure", "schema of", "look like", "defined as", "layout",
              "describe"),
    "indexes": ("index", "indexes", "indices", "indexed"),
    "locks": ("lock", "block", "contention", "waiting", "wait", "stuck"),
    "sessions": ("session", "connection", "connected", "client", "backend", "idle", "activity", "who is", "logged in"),
    "version": ("version", "release", "build", "major", "minor", "upgrade"),
    "extensions": ("extension", "module", "plugin", "add-on", "installed"),
    "maintenance": ("vacuum", "autovacuum", "analyz", "analys", "dead", "clean", "bloat", "maintenance", "stale",
                    "statistic"),
    "wraparound": ("wraparound", "wrap around", "xid", "frozen", "freeze", "relfrozenxid", "transaction id"),
    "rank": ("largest", "biggest", "heaviest", "smallest", "top ", "most", "rank", "order by", "sorted", "greatest"),
    "setting": ("setting", "parameter", "configured", "config", "value of", "set to", "switched", "turned on",
                "enabled"),
    "review": ("review", "health", "diagnos", "audit", "checkup", "check-up", "investigat", "root cause", "report",
               "assess", "examine", "what is wrong", "problem", "tune", "recommend"),
}
_PATTERNS = {concept: re.compile(r"(?<![a-z0-9])(?:" + "|".join(re.escape(w) for w in words) + ")", re.IGNORECASE)
             for concept, words in CONCEPTS.items()}
_SLOT_WORDS = re.compile(r"\b(?:tablename|indexname|settingname)\b")


_IDENTIFIER = re.compile(r"\b\w*_\w*\b")


def annotate(text: str) -> str:
    """`text` followed by the concept tokens of the concepts it touches (`__nodb__` when none of databases).
    Concepts are read from the words outside snake_case identifiers ("audit_log" is no audit), except
    PostgreSQL's own prefixes (pg_, wal_) that only identifiers carry."""
    plain = f" {_IDENTIFIER.sub(' ', text)} "
    found = [concept for concept, pattern in _PATTERNS.items() if pattern.search(f" {text} " if concept == "pg" else plain)]
    if "db" not in found and (_SLOT_WORDS.search(text) or "_" in text):
        found.append("db")  # a catalogue name or a snake_case setting name is database vocabulary
    tokens = [f"__{c}__" for c in found] + ([] if "db" in found else ["__nodb__"])
    return f"{text} {' '.join(tokens)}"


def annotate_all(texts: list[str]) -> list[str]:
    """`annotate` over a batch: the first step of the classifiers' pipelines."""
    return [annotate(t) for t in texts]
