"""Extractor operators: the probe (the brief) and the collectors of a sampled window, by subject."""

from dbcrew.operators.collect import catalog, machine, replication, storage, window  # noqa: F401  (registration)
from dbcrew.operators.collect.probe import probe

__all__ = ["probe"]
