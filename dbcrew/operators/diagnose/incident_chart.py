"""Painter: a past interval that is one of the watcher's incidents, pictured as its detector saw it.

The diagnosis of an incident (`dbcrew watch`'s, a server's incident run, or `dbcrew diagnose --from
--to` over an incident) shows its strongest abnormal signals from a while before it to a while
after, each against the target's usual band, the range its detector judged the passes by
(dbcrew/operators/window/picture.py), with the incident's span shaded: what "z 40" looked like. A live
window, an interval read from Prometheus, or one the watcher saw no incident in has no such chart
(its summary says why); the window-against-baseline chart (charts.py) is drawn either way.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from dbcrew.artifacts import declare
from dbcrew.models import Role
from dbcrew.models.interval import PastInterval
from dbcrew.operators.diagnose.charts import CHART_MARGINS, hide_unused, panel
from dbcrew.operators.figures import chart_observation, figure, warm_up
from dbcrew.operators.registry import Observation, OperatorContext, OperatorMisfit, operator
from dbcrew.operators.window.incidents import Z_CLOSE, Z_OPEN
from dbcrew.operators.window.picture import IncidentPicture, picture_of
from dbcrew.store.samples import Incident, SampleStore, open_samples
from dbcrew.vocabulary import Category, Scenario

ARTIFACT = declare("chart_incident")
CHART = "charts/incident.png"  # in the run's folder


def incident_of(store: SampleStore, identity: str, interval: PastInterval) -> Incident | None:
    """The watcher's incident the interval is of: of those it overlaps, the one it overlaps most."""

    def overlap(i: Incident) -> timedelta:
        return min(i.ended_at, interval.end) - max(i.started_at, interval.start)

    found = [
        i
        for i in store.incidents(identity, interval.start)
        if i.started_at < interval.end and overlap(i) > timedelta(0)
    ]
    return max(found, key=overlap, default=None)


@operator(
    role=Role.PAINTER,
    category=Category.DIAGNOSE,
    produces=(ARTIFACT,),
    prepare=warm_up,
    planned_for=frozenset(
        {Scenario.DIAGNOSE}
    ),  # whatever the alert: an incident's interval is known at run time
)
def paint_incident(ctx: OperatorContext) -> Observation:
    """For a past interval that is one of the watcher's incidents: its abnormal signals around it against the
    target's usual band (the detector's baseline)."""
    if ctx.interval is None or ctx.prometheus is not None:
        why = "a live window" if ctx.interval is None else "an interval read from Prometheus"
        return Observation(summary=f"no incident chart: {why}", artifacts=[ARTIFACT])
    if ctx.brief is None:
        raise OperatorMisfit(
            "an incident is found in the store by the target's identity, which the run's brief holds"
        )
    store = open_samples(ctx.settings.store_url)
    incident = incident_of(store, ctx.brief.identity(ctx.target.address), ctx.interval)
    if incident is None or not incident.signals:
        return Observation(
            summary="no incident chart: the watcher saw no incident in the interval",
            artifacts=[ARTIFACT],
        )
    picture = picture_of(store, incident)
    path = ctx.run_dir / CHART
    draw(picture, path)
    banded = picture.normal_passes
    caption = (
        f"The incident from {incident.started_at:%Y-%m-%d %H:%M:%S} to {incident.ended_at:%H:%M:%S} UTC"
        " (shaded), its strongest abnormal signals pass by pass (red), against the target's usual band"
        f" (grey: {banded} normal passes of the hour before it, their median dashed, the edges where the"
        f" detector opens an incident, {Z_OPEN:g} robust deviations out; an open one stays open while a signal"
        f" is {Z_CLOSE:g} out, and where earlier days are known the same hour's range of those days also"
        " counts, neither drawn)."
        if banded
        else f"The incident from {incident.started_at:%Y-%m-%d %H:%M:%S} UTC (shaded), its strongest"
        " abnormal signals pass by pass; too few normal passes before it to draw its usual band."
    )
    return chart_observation(
        ctx, path, ARTIFACT, f"chart of the incident's {len(picture.signals)} signals", caption
    )


def draw(picture: IncidentPicture, path: Path) -> None:
    """Small multiples, two a row: each signal's passes, its band (from zero up for a signal never negative), the
    incident's span."""
    shown = picture.signals
    rows = (len(shown) + 1) // 2
    end = (picture.incident.ended_at - picture.incident.started_at).total_seconds() / 60
    with figure(path, rows, 2, CHART_MARGINS, figsize=(10, 2.4 * rows), squeeze=False) as (
        _,
        axes,
    ):
        for ax, signal in zip(axes.flat, shown):
            ax.axvspan(0, end, color="tab:orange", alpha=0.15, linewidth=0)
            if signal.band is not None:
                floor = 0.0 if min(signal.values, default=0.0) >= 0 else signal.band.low
                ax.axhspan(
                    max(signal.band.low, floor),
                    signal.band.high,
                    color="grey",
                    alpha=0.25,
                    linewidth=0,
                )
                ax.axhline(signal.band.centre, color="grey", linestyle="--", linewidth=1)
            ax.plot(signal.minutes, signal.values, color="tab:red", linewidth=1.2)
            ax.set_xlim(picture.shown_from, picture.shown_to)
            panel(ax, f"{signal.name} (z {signal.z:+.1f})", "minutes from the incident's start")
        hide_unused(axes, len(shown))
