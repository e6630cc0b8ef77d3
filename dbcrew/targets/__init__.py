"""Connectors to the databases dbcrew reviews. Every session they open is read-only."""

from dbcrew.targets.postgres import OWN_STATEMENT_MARKER, PostgresTarget, own_pids, parse_target
from dbcrew.targets.resumable import Resumable, resumable, resumed_note

__all__ = [
    "OWN_STATEMENT_MARKER",
    "PostgresTarget",
    "Resumable",
    "own_pids",
    "parse_target",
    "resumable",
    "resumed_note",
]
