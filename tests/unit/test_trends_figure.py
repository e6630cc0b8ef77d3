"""The trends chart drawn again on the process's one figure is the PNG a new figure gives (paint.TrendsFigure)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from dbcrew.operators.paint import TrendsFigure, paint_trends
from dbcrew.store import Vitals

START = datetime(2026, 11, 1, 2, 0)


def history(
    runs: int, scale: float = 1.0, missing: tuple[str, ...] = ()
) -> list[tuple[datetime, Vitals]]:
    """`runs` points a day apart; the vitals named in `missing` unmeasured in every run."""
    return [
        (
            START + timedelta(days=i, minutes=7 * i),
            Vitals(
                cache_hit_ratio=None if "cache_hit_ratio" in missing else 0.99 - i * 0.001 * scale,
                dead_tuples=None if "dead_tuples" in missing else int(1000 * scale) + 37 * i,
                oldest_xid_age=None
                if "oldest_xid_age" in missing
                else 10**6 + int(12345 * i * scale),
                database_bytes=None if "database_bytes" in missing else (50 + i) * 2**20,
                critical=i % 2,
                warning=int(3 * scale) + i % 3,
                info=5,
            ),
        )
        for i in range(runs)
    ]


def test_a_chart_drawn_again_is_the_chart_a_new_figure_draws(tmp_path: Path) -> None:
    histories = [
        history(30, 100.0),  # many runs, large values
        history(2),  # fewer runs than ticks shown before
        history(5, 3.0, ("cache_hit_ratio", "dead_tuples")),  # panels left without a point
        history(12, 0.2),  # those panels with points again
        history(2, 7.0, ("cache_hit_ratio", "dead_tuples", "oldest_xid_age", "database_bytes")),
    ]
    for i, points in enumerate(histories):
        again, new = tmp_path / f"again{i}.png", tmp_path / f"new{i}.png"
        paint_trends(
            points, again
        )  # the process's figure, drawn with every history before this one
        TrendsFigure().draw(points, new)
        assert again.read_bytes() == new.read_bytes(), f"history {i} of {len(points)} runs"
    assert len({(tmp_path / f"new{i}.png").read_bytes() for i in range(len(histories))}) == len(
        histories
    )
