"""Painter operators: charts as PNG files in the run directory, embedded later in the report."""

from __future__ import annotations

import threading
from datetime import datetime
from functools import cache
from pathlib import Path

from dbcrew.artifacts import declare
from dbcrew.models import Role
from dbcrew.operators.figures import (
    TITLE_AT,
    Margins,
    chart_observation,
    figure,
    new_figure,
    plain_log_ticks,
    save,
    text_width,
    warm_up,
)
from dbcrew.operators.registry import Observation, OperatorContext, operator
from dbcrew.operators.stat_views import TABLE_STATS
from dbcrew.store import Vitals
from dbcrew.vocabulary import Category

TOP_TABLES = 10
CHART_TABLE_ACTIVITY = declare("chart_table_activity")  # charts/table_activity.png


@operator(
    role=Role.PAINTER,
    category=Category.PAINT,
    needs=(TABLE_STATS.table,),
    produces=(CHART_TABLE_ACTIVITY,),
    prepare=warm_up,
)
def paint_table_activity(ctx: OperatorContext) -> Observation:
    """Bar chart of the busiest tables: sequential vs index scans and dead tuples."""
    rows = ctx.workspace.query(
        "SELECT schemaname || '.' || relname AS name, seq_scan, idx_scan, n_dead_tup FROM table_stats"
        " ORDER BY seq_scan + idx_scan + n_dead_tup DESC LIMIT ?",
        [TOP_TABLES],
    )
    path = ctx.run_dir / "charts" / "table_activity.png"
    names = [r["name"] for r in rows][::-1]
    margins = Margins(
        left=text_width(names) + 0.35, bottom=0.65, between_columns=0.25
    )  # the names sit left of the scans
    with figure(path, 1, 2, margins, figsize=(10, 0.45 * max(len(rows), 3) + 1.5), sharey=True) as (
        _,
        (scans, dead),
    ):
        positions = range(len(names))
        scans.barh(
            [p - 0.2 for p in positions],
            [r["seq_scan"] for r in rows][::-1],
            height=0.4,
            label="sequential scans",
        )
        scans.barh(
            [p + 0.2 for p in positions],
            [r["idx_scan"] for r in rows][::-1],
            height=0.4,
            label="index scans",
        )
        scans.set_yticks(list(positions), names)
        scans.set_xscale("symlog")
        plain_log_ticks(scans.xaxis)
        scans.set_title("Scans since statistics began", y=TITLE_AT)
        scans.set_xlabel("scans (symmetric log scale)")
        scans.legend(loc="lower right", fontsize="small")
        dead.barh(list(positions), [r["n_dead_tup"] for r in rows][::-1], color="tab:red")
        dead.set_xscale("symlog")
        plain_log_ticks(dead.xaxis)
        dead.set_title("Dead tuples", y=TITLE_AT)
        dead.set_xlabel("dead tuples (symmetric log scale)")
    caption = (
        f"The {len(rows)} busiest tables (schema.table): sequential and index scans since the statistics began,"
        " and dead tuples now; both axes on a symmetric log scale, so small and large tables read side by side."
    )
    return chart_observation(
        ctx, path, CHART_TABLE_ACTIVITY, f"chart of {len(rows)} tables", caption
    )


# Room for 10-digit plain tick labels (an XID age) and the next panel's axis label between panels, and for the
# run times rotated under each panel.
TRENDS_MARGINS = Margins(left=0.95, bottom=1.15, right=0.15, between_columns=1.3)
TREND_PANELS = (  # (vital, panel title, y-axis label, scale to the label's unit)
    ("cache_hit_ratio", "Cache hit ratio", "hit ratio (%)", 100.0),
    ("dead_tuples", "Dead tuples", "dead tuples (all tables)", 1.0),
    ("oldest_xid_age", "Oldest transaction ID age", "XID age (transactions)", 1.0),
    ("database_bytes", "Database size", "size (MiB)", 1 / 2**20),
)
# Run times labelled under each panel, at most: a panel is about 2 inches wide, and 30 rotated times overlapped
# into one smudge while each label (a tick: two lines and two texts, made and drawn) cost the chart ~16 ms of
# CPU (30 runs: 548 ms a chart; a nightly fleet's chart holds 30 after a month).
TIME_TICKS = 6


def labelled_runs(count: int, most: int = TIME_TICKS) -> list[int]:
    """Which of `count` runs (oldest first) get their time under the axis: all of them up to `most`, else `most`
    spread evenly, the first and the latest always among them."""
    if count <= most:
        return list(range(count))
    return sorted({round(i * (count - 1) / (most - 1)) for i in range(most)})


SEVERITY_COLOURS = (("critical", "tab:red"), ("warning", "tab:orange"), ("info", "tab:gray"))


class TrendsFigure:
    """The trends chart's figure, made once and drawn again with each chart's points.

    Its five panels, titles, axis labels, legend and tick formats are the same for every chart; only the
    lines' points and the run times under the axes change. A figure made anew for each chart (its axes, and
    their ticks: three lines and two texts each, some 80 a chart) took 157 ms of CPU for 12 runs; drawn
    again, 101 ms (29 Nov 2026, the chart alone, 20 times). The chart is a third of a review's CPU from a
    target's second review on (a nightly fleet's second night). Drawing again sets the lines' data, resets
    each panel's limits to a new panel's and autoscales them, so the PNG is byte for byte the one a new
    figure gives (tests/unit/test_trends_figure.py). One chart is drawn
    on it at a time (`lock`).
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.fig, self.axes = new_figure(
            1, 1 + len(TREND_PANELS), TRENDS_MARGINS, figsize=(16, 3.6)
        )
        counts = self.axes[0]
        self.severities = [
            counts.plot([], [], marker="o", color=colour, label=severity)[0]
            for severity, colour in SEVERITY_COLOURS
        ]
        counts.set_title("Findings by severity", y=TITLE_AT)
        counts.set_ylabel("findings")
        counts.yaxis.get_major_locator().set_params(integer=True)
        counts.legend(fontsize="small")
        self.vitals = []
        for ax, (field, title, unit, _) in zip(self.axes[1:], TREND_PANELS, strict=True):
            self.vitals.append(ax.plot([], [], marker="o", color="tab:blue")[0])
            ax.set_title(title, y=TITLE_AT)
            ax.set_ylabel(unit)
            ax.ticklabel_format(axis="y", style="plain", useOffset=False)
            if field in ("dead_tuples", "oldest_xid_age"):  # counts: no fractional ticks
                ax.yaxis.get_major_locator().set_params(integer=True)
        for ax in self.axes:
            ax.set_xlabel("run start (UTC)")
            ax.grid(alpha=0.3)

    def draw(self, points: list[tuple[datetime, Vitals]], path: Path) -> None:
        from matplotlib.transforms import Bbox

        labels = [started.strftime("%m-%d %H:%M:%S") for started, _ in points]
        positions = list(range(len(points)))
        for line, (severity, _) in zip(self.severities, SEVERITY_COLOURS, strict=True):
            line.set_data(positions, [getattr(v, severity) for _, v in points])
        for line, (field, _, _, scale) in zip(self.vitals, TREND_PANELS, strict=True):
            values = [getattr(v, field) for _, v in points]
            line.set_data(
                [p for p, v in zip(positions, values, strict=True) if v is not None],
                [v * scale for v in values if v is not None],
            )
        shown = labelled_runs(len(points))
        for ax in self.axes:
            # A panel's limits as a new one has them (unset), then from its points: a panel with none keeps
            # matplotlib's default limits, not the last chart's.
            ax.viewLim.set(Bbox.unit())
            ax.relim()
            ax.autoscale_view()
            ax.set_xticks(
                [positions[i] for i in shown],
                [labels[i] for i in shown],
                rotation=35,
                ha="right",
                fontsize="small",
            )
        save(self.fig, path)


@cache
def trends_figure() -> TrendsFigure:
    """This process's trends figure (made at its first chart)."""
    return TrendsFigure()


def paint_trends(points: list[tuple[datetime, Vitals]], path: Path) -> Path:
    """Findings by severity and the vital signs across runs, one point per run (x: run start, UTC; at most
    TIME_TICKS runs labelled).

    A plain function rather than an operator: it draws the target's history from the store after
    the review, not something the plan's tasks collect.
    """
    chart = trends_figure()
    with chart.lock:
        chart.draw(points, path)
    return path
