"""Painter: the abnormal metrics, window against baseline, as the report's charts (D-Bot's topMetrics)."""

from __future__ import annotations

from dbcrew.models import Role
from dbcrew.vocabulary import Category
from operators.diagnose.steps import FACTS_KEY, load_facts
from operators.figures import Margins, chart_observation, figure, warm_up
from operators.registry import Observation, OperatorContext, operator

TOP_METRICS = 6
# Small (x-small) tick labels and axis labels: room for them beside and under each panel, a title above.
CHART_MARGINS = Margins(
    left=0.8, bottom=0.5, top=0.35, right=0.15, between_columns=0.85, between_rows=0.7
)


@operator(
    role=Role.PAINTER,
    category=Category.DIAGNOSE,
    needs=(FACTS_KEY,),
    produces=("chart_abnormal_metrics",),
    prepare=warm_up,
)
def paint_abnormal_metrics(ctx: OperatorContext) -> Observation:
    """Line charts of the most abnormal metrics over the window, with the baseline's median for reference."""
    record = load_facts(ctx)
    shown = record.abnormal[:TOP_METRICS]
    if not shown:
        return Observation(
            summary="no abnormal metric to draw", artifacts=["chart_abnormal_metrics"]
        )
    path = ctx.run_dir / "charts" / "abnormal_metrics.png"
    rows = (len(shown) + 1) // 2
    with figure(path, rows, 2, CHART_MARGINS, figsize=(10, 2.4 * rows), squeeze=False) as (_, axes):
        step = record.window.interval
        for ax, metric in zip(axes.flat, shown):
            values = record.window.series[metric.name]
            ax.plot(
                [step * (i + 1) for i in range(len(values))],
                values,
                color="tab:red",
                label="window",
            )
            ax.axhline(
                metric.baseline_median, color="tab:blue", linestyle="--", label="baseline median"
            )
            ax.set_title(f"{metric.name} (z {metric.z:+.1f})", fontsize="small")
            ax.set_xlabel("seconds into the window", fontsize="x-small")
            ax.set_ylabel(metric.name, fontsize="x-small")
            ax.tick_params(labelsize="x-small")
        for ax in list(axes.flat)[len(shown) :]:
            ax.set_visible(False)
        axes.flat[0].legend(fontsize="x-small")
    caption = (
        f"The {len(shown)} metrics that left the baseline most (|z| in each title), sampled every {step:g} s over"
        " the window (red), against the baseline's median (dashed blue)."
    )
    return chart_observation(
        ctx, path, "chart_abnormal_metrics", f"chart of {len(shown)} abnormal metrics", caption
    )
