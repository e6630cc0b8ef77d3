"""Painter: the abnormal metrics, window against baseline (D-Bot's topMetrics), and the time attribution, as the report's charts."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from dbcrew.artifacts import declare
from dbcrew.models import Role
from dbcrew.operators.diagnose.attribution import attribute
from dbcrew.operators.diagnose.steps import (
    CITED_KEY,
    FACTS_KEY,
    CausesCited,
    causes_cited,
    load_facts,
)
from dbcrew.operators.figures import (
    TITLE_AT,
    Margins,
    chart_observation,
    figure,
    text_width,
    warm_up,
)
from dbcrew.operators.registry import Observation, OperatorContext, operator
from dbcrew.operators.window.anomaly import AbnormalMetric
from dbcrew.vocabulary import Category, Scenario

TOP_METRICS = 6
# Charts are drawn after the window, on the diagnosis's path, where an overloaded host gives this process
# a few percent of a core: each CPU-millisecond counts. Titles sit at a fixed height (figures.TITLE_AT), and
# four value ticks instead of up to nine draw half the tick objects (tick creation is a third).
VALUE_TICKS = 4
# Small (x-small) tick labels and axis labels: room for them beside and under each panel, a title above.
CHART_ABNORMAL_METRICS = declare("chart_abnormal_metrics")  # charts/abnormal_metrics.png
CHART_TIME_ATTRIBUTION = declare("chart_time_attribution")  # charts/time_attribution.png
CHART_MARGINS = Margins(
    left=0.6, bottom=0.5, top=0.35, right=0.15, between_columns=0.65, between_rows=0.7
)


class AbnormalChartParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cited_only: bool = Field(
        False,
        description="draw only the abnormal metrics the root causes rest on (a composed plan's chart);"
        " all the strongest ones when no cause was found or no cross review completed",
    )


def charted(
    abnormal: list[AbnormalMetric], cited: CausesCited | None
) -> tuple[list[AbnormalMetric], str]:
    """The metrics the chart draws: the strongest abnormal ones, or (`cited`: what the root causes rest on)
    only those the causes rest on, and then what was left out. A panel of a metric no root cause rests on
    serves no cause the diagnosis proposes; with no cause found the strongest abnormal metrics are what the
    reader needs, and with no cross review (`cited` None) they are drawn as ever: no chart silently missing."""
    strongest = abnormal[:TOP_METRICS]
    if cited is None or not cited.causes:
        return strongest, ""
    rests_on = set(cited.metrics)
    shown = [m for m in abnormal if m.name in rests_on][:TOP_METRICS]
    causes = f"the {cited.causes} root cause{'s' if cited.causes != 1 else ''}"
    if not shown:
        return [], (
            f"no chart of abnormal metrics: {causes} rest on none that left the baseline"
            " (the abnormal metrics are listed with the diagnosis)"
        )
    left = len([m for m in strongest if m.name not in rests_on])
    return shown, (
        f"what {causes} rest on; {left} other abnormal metric(s) not drawn (listed with the diagnosis)"
    )


@operator(
    role=Role.PAINTER,
    category=Category.DIAGNOSE,
    needs=(FACTS_KEY,),
    uses=(CITED_KEY,),
    produces=(CHART_ABNORMAL_METRICS,),
    prepare=warm_up,
    planned_for=frozenset({Scenario.DIAGNOSE}),
)
def paint_abnormal_metrics(ctx: OperatorContext, params: AbnormalChartParams) -> Observation:
    """Line charts of the most abnormal metrics over the window (or only those the root causes rest on), with the baseline's median for reference."""
    record = load_facts(ctx)
    shown, narrowed = charted(record.abnormal, causes_cited(ctx) if params.cited_only else None)
    if not shown:
        return Observation(
            summary=narrowed or "no abnormal metric to draw", artifacts=[CHART_ABNORMAL_METRICS]
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
            panel(ax, f"{metric.name} (z {metric.z:+.1f})", "seconds into the window")
        hide_unused(axes, len(shown))
        axes.flat[0].legend(fontsize="x-small")
    which = "that the root causes rest on" if narrowed else "that left the baseline most"
    caption = (
        f"The {len(shown)} metrics {which} (|z| in each title), sampled every {step:g} s over"
        " the window (red), against the baseline's median (dashed blue)."
    )
    summary = f"chart of {len(shown)} abnormal metrics" + (f" ({narrowed})" if narrowed else "")
    return chart_observation(ctx, path, CHART_ABNORMAL_METRICS, summary, caption)


SHOWN_LABEL_CHARS = 48  # of a statement's text beside its bar
ATTRIBUTION_ROWS = 4  # bars' room in a panel at least (one bar is as thin as one of four)
ATTRIBUTION_MARGINS = Margins(left=0.3, bottom=0.5, top=0.35, right=0.3, between_rows=0.75)


@operator(
    role=Role.PAINTER,
    category=Category.DIAGNOSE,
    needs=(FACTS_KEY,),
    produces=(CHART_TIME_ATTRIBUTION,),
    prepare=warm_up,
    planned_for=frozenset({Scenario.DIAGNOSE}),
)
def paint_time_attribution(ctx: OperatorContext) -> Observation:
    """Bar charts of where the window's active session time went: by wait event, by statement, by relation."""
    attribution = attribute(load_facts(ctx).window)
    if attribution is None:
        return Observation(
            summary="no sampled session time to draw", artifacts=[CHART_TIME_ATTRIBUTION]
        )
    panels = [
        ("by wait event (CPU: no wait)", attribution.by_wait_event),
        ("by statement", attribution.by_statement),
        ("by relation", attribution.by_relation),
    ]
    labels = [[_label(line.label) for line in lines] for _, lines in panels]
    margins = replace(
        ATTRIBUTION_MARGINS, left=text_width([t for ls in labels for t in ls], 8) + 0.6
    )
    heights = [0.6 + 0.22 * max(len(lines), ATTRIBUTION_ROWS) for _, lines in panels]
    path = ctx.run_dir / "charts" / "time_attribution.png"
    with figure(
        path,
        len(panels),
        1,
        margins,
        figsize=(margins.left + 5.0, sum(heights) + 2.2),
        squeeze=False,
    ) as (_, axes):
        for ax, (title, lines), names in zip(axes.flat, panels, labels, strict=True):
            positions = list(range(len(lines)))
            ax.barh(positions, [100 * line.share for line in lines], color="tab:purple")
            # Labels are data from the database: never parsed as mathtext ($1 is a parameter, not math).
            ax.set_yticks(positions, names, fontsize=8, parse_math=False)
            ax.set_ylim(
                max(len(lines), ATTRIBUTION_ROWS) - 0.5, -0.5
            )  # heaviest on top, bars as thin
            ax.set_xlim(0, 100)
            ax.set_title(title, fontsize="small", y=TITLE_AT)
            ax.set_xlabel("% of the active session time", fontsize="x-small")
            ax.tick_params(axis="x", labelsize="x-small")
    caption = (
        f"Where the window's active session time went, from {attribution.samples} samples of active"
        " sessions (the review's own left out): the heaviest wait events, statements and relations."
    )
    return chart_observation(
        ctx, path, CHART_TIME_ATTRIBUTION, "chart of the time attribution", caption
    )


def panel(ax: Any, title: str, xlabel: str) -> None:
    """One metric's panel, as every chart of a diagnosis draws it: the title names the metric (no y
    label to repeat it) at a fixed height (TITLE_AT: no measuring of tick labels to place it), four
    value ticks, small labels."""
    ax.set_title(title, fontsize="small", y=TITLE_AT)
    ax.set_xlabel(xlabel, fontsize="x-small")
    ax.locator_params(axis="y", nbins=VALUE_TICKS)
    ax.tick_params(labelsize="x-small")


def hide_unused(axes: Any, used: int) -> None:
    """Hide the grid's panels past the first `used`."""
    for ax in list(axes.flat)[used:]:
        ax.set_visible(False)


def _label(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= SHOWN_LABEL_CHARS else flat[: SHOWN_LABEL_CHARS - 1] + "…"
