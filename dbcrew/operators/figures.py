"""Matplotlib figures: loaded only when a chart is drawn, saved and closed in one place.

Figures are made with matplotlib's object API on an Agg canvas, never through pyplot: pyplot
keeps global state (its list of open figures) that concurrent reviews in one worker process,
and concurrent chart tasks of one review, would share; and importing it costs about a third of
a second of CPU that every worker process would pay.

Each chart sets its margins in inches (`Margins`) instead of calling `tight_layout`: that layout
pass measured every tick label and title, about half of a chart's CPU (0.5 of 1.15 CPU-s for the
trends chart, profiled). The one margin that depends on data, the width of table names beside a
bar chart, is measured for those labels only (`text_width`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from io import BytesIO
from pathlib import Path
from threading import Lock
from typing import Any

from dbcrew.artifacts import Artifact
from dbcrew.operators.registry import Observation, OperatorContext

DPI = 80
# Drawing is serialized: matplotlib's mathtext parser (log-scale tick labels) is one per process and keeps
# per-parse state, and a worker process draws the charts of concurrent reviews and the warm-up at once.
DRAWING = Lock()
# Every chart's titles sit at the top of their axes (`set_title(..., y=TITLE_AT)`): a title at a fixed height
# skips matplotlib's measuring of every tick label to lift it above them (a quarter of a panel's drawing,
# profiled), and no chart here has tick labels above its axes.
TITLE_AT = 1.0


@dataclass(frozen=True)
class Margins:
    """Space around the axes and between them, in inches (titles above, tick labels and axis labels beside)."""

    left: float
    bottom: float
    top: float = 0.4
    right: float = 0.2
    between_columns: float = 0.0
    between_rows: float = 0.0


def text_width(texts: list[str], points: float = 10.0) -> float:
    """Inches the widest of `texts` takes in matplotlib's default font at `points` (tick labels: 10)."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextToPath

    font, measure = FontProperties(size=points), TextToPath()
    return max(
        (measure.get_text_width_height_descent(t, font, ismath=False)[0] / 72 for t in texts),
        default=0.0,
    )


def _canvas_figure(**options: Any) -> Any:
    """A matplotlib Figure on an Agg canvas of its own (no pyplot state)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(**options)
    FigureCanvasAgg(fig)
    return fig


def new_figure(rows: int, columns: int, margins: Margins, **options: Any) -> tuple[Any, Any]:
    """(figure, axes) as `plt.subplots(rows, columns, **options)` gives them, placed by `margins`."""
    subplot_options = {
        k: options.pop(k) for k in ("sharex", "sharey", "squeeze", "subplot_kw") if k in options
    }
    fig = _canvas_figure(**options)
    width, height = fig.get_size_inches()
    axis_width = (
        width - margins.left - margins.right - (columns - 1) * margins.between_columns
    ) / columns
    axis_height = (height - margins.top - margins.bottom - (rows - 1) * margins.between_rows) / rows
    axes = fig.subplots(
        rows,
        columns,
        gridspec_kw={
            "left": margins.left / width,
            "right": 1 - margins.right / width,
            "bottom": margins.bottom / height,
            "top": 1 - margins.top / height,
            "wspace": margins.between_columns / axis_width,
            "hspace": margins.between_rows / axis_height,
        },
        **subplot_options,
    )
    return fig, axes


def save(fig: Any, path: Path) -> None:
    """`fig` drawn into the PNG file `path` (its folder made)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with DRAWING:
        fig.savefig(path, dpi=DPI)


@contextmanager
def figure(path: Path, rows: int, columns: int, margins: Margins, **options: Any) -> Iterator[Any]:
    """(figure, axes) as `new_figure` makes them; saved to `path` on exit (`save` makes its folder)."""
    fig, axes = new_figure(rows, columns, margins, **options)
    yield fig, axes
    save(fig, path)


SI_PREFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def plain_number(value: float) -> str:
    """A tick of a log axis as plain text: 0, 1, 10, 100, 1k, 10k, 1M; negative ones with a minus."""
    size = abs(value)
    for scale, prefix in SI_PREFIXES:
        if size >= scale:
            return f"{value / scale:g}{prefix}"
    return f"{value:g}"


def plain_log_ticks(axis: Any) -> None:
    """Label a (sym)log axis's decades in plain text (`plain_number`) instead of matplotlib's "$10^{3}$".

    Those labels are mathtext: each new one is parsed by matplotlib's mathtext grammar (pyparsing),
    about half of the table activity chart's CPU in a profile of a fleet of reviews."""
    from matplotlib.ticker import FuncFormatter

    axis.set_major_formatter(FuncFormatter(lambda value, _position: plain_number(value)))


@cache
def warm_up() -> None:
    """Load what a process's first chart waits for: matplotlib and its Agg canvas (~0.5 s of imports on
    2 cores), the default font and text layout. (No mathtext: the log axes are labelled in plain text,
    `plain_log_ticks`.) A painter's task runs after the window it draws; done while the window's samplers
    sleep (dbcrew/roles/crew/preparing.py), the report no longer waits for it. Once per process."""
    text_width(["warm"])
    fig = _canvas_figure(figsize=(1, 1))
    axes = fig.subplots()
    axes.set_title("warm")
    axes.set_xlabel("warm")
    axes.plot([0, 1], [0, 1])
    with DRAWING:
        fig.savefig(BytesIO(), dpi=DPI, format="png")


def chart_observation(
    ctx: OperatorContext, path: Path, artifact: Artifact, summary: str, caption: str
) -> Observation:
    """The observation of an operator that drew one chart: its path in the run directory, with its caption."""
    chart = str(path.relative_to(ctx.run_dir))
    return Observation(
        summary=summary, artifacts=[artifact], charts=[chart], captions={chart: caption}
    )
