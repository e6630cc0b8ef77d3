"""The workers' tools: plain functions with typed inputs and outputs, one module per category.

Importing this package registers every operator in `operators.registry`.
"""

# Each module registers its operators when imported (a side effect: noqa F401).
from operators import (  # noqa: F401
    advise,
    checks,
    collect,
    diagnose,
    lookups,
    paint,
    table_lookups,
)
from operators.registry import REGISTRY, Observation, Operator, OperatorContext, OperatorMisfit, get

__all__ = ["REGISTRY", "Observation", "Operator", "OperatorContext", "OperatorMisfit", "get"]
