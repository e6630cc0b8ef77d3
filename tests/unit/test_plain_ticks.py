"""A log axis's decades labelled in plain text, which no mathtext parser has to read."""

from __future__ import annotations

from io import BytesIO

import pytest

from dbcrew.operators.figures import _canvas_figure, plain_log_ticks, plain_number


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0, "0"),
        (1, "1"),
        (10, "10"),
        (100, "100"),
        (1_000, "1k"),
        (10_000, "10k"),
        (1_000_000, "1M"),
        (1e9, "1G"),
        (1e12, "1T"),
        (-1_000, "-1k"),
        (2_500, "2.5k"),
    ],
)
def test_a_decade_reads_as_a_plain_number(value: float, text: str):
    assert plain_number(value) == text


def test_a_symlog_axis_labels_its_decades_without_mathtext():
    fig = _canvas_figure(figsize=(4, 2))
    axes = fig.subplots()
    axes.barh([0, 1], [5, 200_000])
    axes.set_xscale("symlog")
    plain_log_ticks(axes.xaxis)
    fig.savefig(BytesIO(), format="png")  # draws: the labels are formatted
    labels = [t.get_text() for t in axes.get_xticklabels() if t.get_text()]
    assert {"0", "1", "10", "100", "1k", "10k", "100k"} <= set(labels), labels
    assert not any("$" in label for label in labels), labels
