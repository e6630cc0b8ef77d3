"""Matplotlib figures: loaded only when a chart is drawn, saved and closed in one place.

Figures are made with matplotlib's object API on an Agg canvas, never through pyplot: pyplot
keeps global state (its list of open figures) that concurrent reviews in one worker process,
and concurrent chart tasks of one review, would share; and importing it costs about a third of
a second of CPU that every worker process would pay.
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
    """(figure, axes) as `plt.subplots(rows, columns, **options)` gives them; on exit laid out and saved to `path`."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    path.parent.mkdir(parents=True, exist_ok=True)
    subplot_options = {k: options.pop(k) for k in ("sharex", "sharey", "squeeze", "subplot_kw", "gridspec_kw") if k in options}
    fig = Figure(**options)
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, columns, **subplot_options)
    yield fig, axes
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)


def chart_observation(ctx: OperatorContext, path: Path, artifact: str, summary: str, caption: str) -> Observation:
    """The observation of an operator that drew one chart: its path in the run directory, with its caption."""
    chart = str(path.relative_to(ctx.run_dir))
    return Observation(summary=summary, artifacts=[artifact], charts=[chart], captions={chart: caption})
