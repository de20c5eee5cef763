"""The HTML report's charts: what is drawn from a report entry, with the kit in ``svg``.

Per measurement over time: ``timeline``. Per workload: servers side by side
(``comparisons``). Per request mix: each endpoint's latency and share. Per A/B entry: A
and B per pair for each checked metric, and each check's change with its interval
against its threshold (the trend over a baseline's saves: ``trend``). Each chart is a
``Figure``; the template lays it out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from pytest_webperf.report import verdicts
from pytest_webperf.report.html.svg import (
    Bars,
    Interval,
    Line,
    bar_chart,
    change_chart,
    colour,
    index_axis,
    line_chart,
)
from pytest_webperf.report.table import MISSING, number

Rep = Mapping[str, Any]
LegendItem = tuple[str, str, str]  # label, colour, dash

PERCENTILE_STYLE = {"p50_ms": ("p50", ""), "p95_ms": ("p95", "7 3"), "p99_ms": ("p99", "2 2")}
PERCENTILE_COLOUR = {"p50_ms": "#56B4E9", "p95_ms": "#0072B2", "p99_ms": "#D55E00"}
SIDE_COLOUR = {"A": "#999999", "B": "#D55E00"}  # the base in grey, the change in colour


@dataclass(frozen=True)
class Figure:
    title: str
    svg: Markup
    legend: tuple[LegendItem, ...] = ()


def rep_label(rep: Rep, index: int) -> str:
    n = number(rep.get("repetition"))
    return f"rep {int(n) if n is not None else index + 1}"


def rows_of(rep: Rep, key: str) -> list[Mapping[str, Any]]:
    rows = rep.get(key)
    return [r for r in rows if isinstance(r, Mapping)] if isinstance(rows, list) else []


# ---------------------------------------------------------------- a request mix's endpoints


def _endpoint_rows(entry: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    rows = entry.get(key)
    return [r for r in rows if isinstance(r, Mapping)] if isinstance(rows, list) else []


def endpoint_charts(entry: Mapping[str, Any]) -> list[Figure]:
    """A request mix's endpoints (the entry's ``endpoints`` rows): latency percentiles
    per endpoint (in an A/B run, p95 of A beside B), and each endpoint's share of the
    requests beside the share asked. None for a single request shape."""
    rows = _endpoint_rows(entry, "endpoints")
    if not rows:
        return []
    names = [str(r.get("name", MISSING)) for r in rows]
    base = {str(r.get("name")): r for r in _endpoint_rows(entry, "base_endpoints")}
    if base:
        title = "p95 per endpoint: A and B"
        series = [
            Bars(
                "A (base)",
                SIDE_COLOUR["A"],
                [number(base.get(n, {}).get("p95_ms")) for n in names],
            ),
            Bars("B (working tree)", SIDE_COLOUR["B"], [number(r.get("p95_ms")) for r in rows]),
        ]
    else:
        title = "Latency per endpoint"
        series = [
            Bars(label, PERCENTILE_COLOUR[key], [number(r.get(key)) for r in rows])
            for key, (label, _) in PERCENTILE_STYLE.items()
        ]
    latency = Figure(
        title,
        bar_chart(names, series, title=title, x_label="endpoint", y_label="ms"),
        tuple((b.label, b.colour, "") for b in series),
    )

    def percent(value: object) -> float | None:
        n = number(value)
        return None if n is None else 100 * n

    shares = [
        Bars("measured", colour(0), [percent(r.get("share")) for r in rows]),
        Bars("asked", colour(1), [percent(r.get("weight")) for r in rows]),
    ]
    title = "Share of the requests per endpoint" + (" (B)" if base else "")
    share = Figure(
        title,
        bar_chart(names, shares, title=title, x_label="endpoint", y_label="% of requests"),
        tuple((b.label, b.colour, "") for b in shares),
    )
    return [latency, share]


# ---------------------------------------------------------------- A/B


def pair_charts(entry: Mapping[str, Any]) -> list[Figure]:
    """A and B per pair for each checked metric (rps when nothing was checked): the
    y axis fits the values, so a few % between the sides show."""
    figures = []
    sides = tuple((f"{side} ({name})", SIDE_COLOUR[side], "") for side, name in _sides(entry))
    for metric in verdicts.metric_names(entry) or ["rps"]:
        values = verdicts.pairs(entry, metric)
        unit = verdicts.unit(metric)
        lines = [
            Line(label, [(i + 1.0, v[s]) for i, v in enumerate(values)], fill, markers=True)
            for s, (label, fill, _) in enumerate(sides)
        ]
        title = f"{metric}: A and B per pair"
        svg = line_chart(
            lines,
            title=title,
            x_label="pair",
            y_label=unit,
            x_axis=index_axis(len(values)),
            zero=False,
        )
        figures.append(Figure(title, svg, sides))
    return figures


def _sides(entry: Mapping[str, Any]) -> list[tuple[str, str]]:
    against = entry.get("against")
    ref = against.get("ref") if isinstance(against, Mapping) else None
    return [("A", str(ref or "base")), ("B", "working tree")]


def reach(checks: Sequence[Mapping[str, Any]]) -> float:
    """How far from 0 the change chart reaches: 5 times the widest threshold, twice the
    largest change, at least 10 %. An interval of a check with one or two instances can
    run to thousands of percent; drawn whole, it flattens every other check."""
    thresholds = [abs(t) for c in checks if (t := number(c.get("threshold"))) is not None]
    changes = [abs(v) for c in checks if (v := number(c.get("change"))) is not None]
    return max(5 * max(thresholds, default=0.0), 2 * max(changes, default=0.0), 0.1)


def _within(value: float | None, limit: float) -> float | None:
    return None if value is None else max(-limit, min(limit, value))


def change_figure(entry: Mapping[str, Any]) -> Figure | None:
    """Each check's change (B against A, or against the baseline) with its interval, cut
    at the chart's reach (``reach``)."""
    found = [c for c in verdicts.checks(entry) if number(c.get("change")) is not None]
    limit = reach(found)

    def end(check: Mapping[str, Any], key: str) -> float | None:
        """An end of the interval, when both are known (an error rate's upper end can
        be infinite: half an interval is not drawn)."""
        low, high = number(check.get("low")), number(check.get("high"))
        return None if low is None or high is None else _within(number(check.get(key)), limit)

    items = [
        Interval(
            label=str(c.get("check", c.get("metric", "-"))),
            change=number(c.get("change")),
            low=end(c, "low"),
            high=end(c, "high"),
            threshold=verdicts.signed_threshold(c),
            colour=SIDE_COLOUR["B"] if verdicts.is_ab(entry) else colour(0),
        )
        for c in found
    ]
    if not items:
        return None
    cut = any(abs(v) > limit for c in found for k in ("low", "high") if (v := number(c.get(k))))
    title = "Change per check, with its interval"
    whisker = f"interval (whisker, cut at ±{100 * limit:,.0f}%)" if cut else "interval (whisker)"
    legend = (
        (f"change (bar), {whisker}", items[0].colour, ""),
        ("threshold", "#cf222e", "4 3"),
    )
    return Figure(title, change_chart(items, title=title, y_label="change (%)"), legend)
