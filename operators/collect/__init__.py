"""Extractor operators: the probe (the brief) and the collectors of a sampled window, by subject."""

from operators.collect import core, machine, replication, storage  # noqa: F401  (registration)
from operators.collect.core import probe

__all__ = ["probe"]
