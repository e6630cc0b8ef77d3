"""Root-cause diagnosis of a performance anomaly (D-Bot style): sample, detect, experts, cross review,
and with an LLM brain its experts after.

Importing this package registers the diagnosis operators.
"""

from dbcrew.operators.diagnose import (  # noqa: F401  (registration side effect)
    charts,
    incident_chart,
    llm_experts,
    steps,
    views,
)
