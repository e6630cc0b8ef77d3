"""Matplotlib, loaded only when a chart is drawn.

Importing pyplot costs about a third of a second of CPU; every flow run in a process worker pays
its imports again, so the operators that draw import it through `pyplot()` at draw time instead
of at module import. The Agg backend: no display on servers, workers and CI.
"""

from __future__ import annotations

from types import ModuleType


def pyplot() -> ModuleType:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
