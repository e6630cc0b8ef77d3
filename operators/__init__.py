"""The workers' tools: plain functions with typed inputs and outputs, one module per category.

Importing this package registers every operator in `operators.registry`.
"""

from operators import advise, checks, collect, diagnose, lookups, paint, table_lookups  # noqa: F401  (registration side effect)
from operators.registry import REGISTRY, Observation, Operator, OperatorContext, OperatorMisfit, get

__all__ = ["REGISTRY", "Observation", "Operator", "OperatorContext", "OperatorMisfit", "get"]
