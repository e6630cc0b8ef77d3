"""Root-cause diagnosis of a performance anomaly (D-Bot style): sample, detect, experts, cross review.

Importing this package registers the diagnosis operators.
"""

from dbcrew.operators.diagnose import charts, incident_chart, steps, views  # noqa: F401  (registration side effect)
