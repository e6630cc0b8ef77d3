"""Connectors to the databases dbcrew reviews. Every session they open is read-only."""

from dbcrew.targets.postgres import PostgresTarget, own_pids, parse_target

__all__ = ["PostgresTarget", "own_pids", "parse_target"]
