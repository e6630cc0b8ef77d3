"""The workers' tools: plain functions with typed inputs and outputs, one module per category.

Importing this package registers every operator in `dbcrew.operators.registry`.
"""

# Each module registers its operators when imported (a side effect: noqa F401).
from dbcrew.operators import (  # noqa: F401
    advise,
    checks,
    collect,
    diagnose,
    lookups,
    paint,
    table_lookups,
)
from dbcrew.operators.registry import (
    REGISTRY,
    Observation,
    Operator,
    OperatorContext,
    OperatorMisfit,
    get,
)

__all__ = ["REGISTRY", "Observation", "Operator", "OperatorContext", "OperatorMisfit", "get"]
