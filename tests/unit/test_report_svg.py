"""The chart kit: axes cover the data with round ticks, every coordinate is finite,
missing data says so, and a change is drawn with its interval and threshold."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st
from test_report_html import assert_finite, check

from pytest_webperf.report.html.svg import (
    BOX,
    Axis,
    Bars,
    Interval,
    Line,
    bar_chart,
    change_chart,
    index_axis,
    line_chart,
    nice_axis,
)

# ---------------------------------------------------------------- chart scaling

finite = st.floats(allow_nan=False, allow_infinity=False)


@given(st.lists(finite, max_size=30), st.booleans())
def test_any_finite_series_maps_inside_the_plot_box(values: list[float], zero: bool) -> None:
    axis = nice_axis(values, zero=zero)
    assert math.isfinite(axis.lo) and math.isfinite(axis.hi) and axis.lo <= axis.hi
    assert list(axis.ticks) == sorted(axis.ticks) and len(axis.ticks) == len(axis.labels) >= 2
    for value in values:
        assert axis.lo <= value <= axis.hi  # the axis covers the data: nothing is clipped
        assert BOX.left <= BOX.x(axis, value) <= BOX.left + BOX.width
        assert BOX.top <= BOX.y(axis, value) <= BOX.top + BOX.height
    for tick in axis.ticks:
        assert BOX.top <= BOX.y(axis, tick) <= BOX.top + BOX.height


@given(finite, finite)
def test_the_mapping_keeps_order(a: float, b: float) -> None:
    axis = nice_axis([a, b], zero=False)
    low, high = sorted((a, b))
    assert axis.frac(low) <= axis.frac(high)


def test_round_ticks_for_ordinary_data() -> None:
    axis = nice_axis([3.2, 987.0])
    assert axis.ticks == (0.0, 200.0, 400.0, 600.0, 800.0, 1000.0)
    assert axis.labels == ("0", "200", "400", "600", "800", "1,000")
    assert nice_axis([0.0, 0.25]).labels[:3] == ("0", "0.05", "0.10")


@given(st.lists(st.one_of(finite, st.none()), max_size=20), finite)
def test_constant_and_gappy_series_draw_finite_coordinates(
    ys: list[float | None], constant: float
) -> None:
    lines = [
        Line("gappy", [(float(i), y) for i, y in enumerate(ys)], "#000"),
        Line("flat", [(float(i), constant) for i in range(len(ys))], "#111"),
        Line("empty", [], "#222"),
    ]
    svg = line_chart(lines, title="t", x_label="x", y_label="y")
    check(svg)
    assert_finite(svg)


def test_axis_of_nothing_is_a_unit_axis() -> None:
    assert nice_axis([]) == nice_axis([0.0])
    assert nice_axis([]).lo == 0 and nice_axis([]).hi == 1
    assert Axis(5.0, 5.0, (5.0,), ("5",)).frac(5.0) == 0.5


def test_bar_chart_of_missing_values_says_no_data() -> None:
    svg = bar_chart(
        ["a", "b"], [Bars("s", "#000", [None, None])], title="t", x_label="x", y_label="y"
    )
    check(svg)
    assert "no data" in svg


maybe = st.one_of(st.none(), st.floats(min_value=-10, max_value=10))


@given(st.lists(st.tuples(maybe, maybe, maybe, maybe), max_size=6))
def test_change_charts_draw_finite_coordinates(
    rows: list[tuple[float | None, float | None, float | None, float | None]],
) -> None:
    items = [Interval(f"c{i}", *row) for i, row in enumerate(rows)]
    svg = change_chart(items, title="t", y_label="change (%)")
    check(svg)
    if not any(i.change is not None for i in items):
        assert "no data" in svg


def test_a_change_below_zero_is_a_bar_downwards_with_its_whisker() -> None:
    svg = change_chart(
        [Interval("rps:5%", -0.04, -0.07, -0.01, threshold=-0.05)],
        title="t",
        y_label="change (%)",
    )
    check(svg)
    assert_finite(svg)
    assert 'class="threshold"' in svg and 'class="whisker"' in svg
    assert "<title>rps:5% -4.0 % [-7.0, -1.0]</title>" in svg
    assert "<title>threshold -5.0 %</title>" in svg


def test_an_index_axis_has_one_tick_per_item() -> None:
    axis = index_axis(3)
    assert axis.labels == ("1", "2", "3") and axis.lo < 1 and axis.hi > 3
    assert index_axis(0).labels == ("1",)


def test_chart_text_is_escaped() -> None:
    svg = line_chart([Line("<b>", [(0, 1)], "#000")], title="a<b", x_label="&", y_label='"')
    check(svg)
    assert "<b>" not in svg and "a&lt;b" in svg
