"""Health-check operators (tasker role): each reads workspace tables and returns findings.

Checks never touch the target: the extractor already landed what they judge, so a check is a
pure function of the workspace and the thresholds and can be unit-tested on its own.
"""

# Importing each module registers its checks with the operator registry.
from dbcrew.operators.checks import (  # noqa: F401  # noqa: F401
    bloat,
    configuration,
    database,
    indexes,
    replication,
    sessions,
    statements,
    tables,
)
