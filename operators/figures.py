"""Matplotlib figures: loaded only when a chart is drawn, saved and closed in one place.

Importing pyplot costs about a third of a second of CPU; every flow run in a process worker pays
its imports again, so the operators that draw import it through `figure()` at draw time instead
of at module import. The Agg backend: no display on servers, workers and CI.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from operators.registry import Observation, OperatorContext

DPI = 80


@contextmanager
def figure(path: Path, rows: int, columns: int, **options: Any) -> Iterator[Any]:
    """`plt.subplots(rows, columns, **options)` as (figure, axes); on exit laid out, saved to `path`, closed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(rows, columns, **options)
    try:
        yield fig, axes
        fig.tight_layout()
        fig.savefig(path, dpi=DPI)
    finally:
        plt.close(fig)


def chart_observation(ctx: OperatorContext, path: Path, artifact: str, summary: str, caption: str) -> Observation:
    """The observation of an operator that drew one chart: its path in the run directory, with its caption."""
    chart = str(path.relative_to(ctx.run_dir))
    return Observation(summary=summary, artifacts=[artifact], charts=[chart], captions={chart: caption})
