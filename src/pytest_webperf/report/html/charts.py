"""The HTML report's charts: what is drawn from a report entry, with the kit in ``svg``.

Per measurement: per-second load, latency and errors, server resources per part, the
load generator, the latency distribution. Per workload: servers side by side. Per A/B
entry: A and B per pair for each checked metric, and each check's change with its
interval against its threshold (the trend over a baseline's saves: ``trend``). Each
chart is a ``Figure``; the template lays it out.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from pytest_webperf.report import verdicts
from pytest_webperf.report.html.svg import (
    Axis,
    Bars,
    Interval,
    Line,
    bar_chart,
    change_chart,
    colour,
    index_axis,
    line_chart,
    values_of,
)
from pytest_webperf.report.table import MISSING, number
from pytest_webperf.stats.histogram import Histogram

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


def _per_second(row: Mapping[str, Any], field: str) -> float | None:
    """A count in a snapshot as a rate (its interval is normally, not always, 1 s)."""
    count, elapsed = number(row.get(field)), number(row.get("elapsed"))
    if count is None:
        return None
    return count / elapsed if elapsed else count


def _field(name: str) -> Callable[[Mapping[str, Any]], float | None]:
    return lambda row: number(row.get(name))


Field = tuple[str, str, Callable[[Mapping[str, Any]], float | None]]  # label, dash, getter


def _series_lines(
    reps: Sequence[Rep], key: str, fields: Sequence[Field], part: str | None = None
) -> list[Line]:
    """One line per repetition and field."""
    lines = []
    for i, rep in enumerate(reps):
        rows = [r for r in rows_of(rep, key) if part is None or r.get("part") == part]
        for label, dash, get in fields:
            points = [(t, get(r)) for r in rows if (t := number(r.get("t"))) is not None]
            name = f"{rep_label(rep, i)} {label}".strip()
            lines.append(Line(name, points, colour(i), dash, css=f"rep-{i + 1}"))
    return lines


def _key(reps: Sequence[Rep], dashes: Sequence[tuple[str, str]] = ()) -> tuple[LegendItem, ...]:
    """Legend: a colour per repetition, then a dash per field when there are several."""
    items = [(rep_label(rep, i), colour(i), "") for i, rep in enumerate(reps)]
    return (*items, *((label, "#555", dash) for label, dash in dashes))


def _per_second_figure(
    reps: Sequence[Rep], key: str, fields: Sequence[Field], title: str, unit: str, *, part: str = ""
) -> Figure:
    lines = _series_lines(reps, key, fields, part or None)
    x_label = "time (s; grey = warm-up)" if key != "series" else "time (s, end of each second)"
    dashes = [(label, dash) for label, dash, _ in fields] if len(fields) > 1 else []
    svg = line_chart(lines, title=title, x_label=x_label, y_label=unit)
    return Figure(title, svg, _key(reps, dashes))


def load_charts(reps: Sequence[Rep]) -> list[Figure]:
    """Per-second throughput, latency and errors as the generator saw them."""
    percentiles = [(label, dash, _field(f)) for f, (label, dash) in PERCENTILE_STYLE.items()]
    failures: list[Field] = [
        ("errors", "", lambda r: _per_second(r, "errors")),
        ("timeouts", "2 2", lambda r: _per_second(r, "timeouts")),
    ]
    rps: list[Field] = [("", "", lambda r: _per_second(r, "requests"))]
    return [
        _per_second_figure(reps, "series", rps, "Requests per second", "req/s"),
        _per_second_figure(reps, "series", percentiles, "Latency per second", "latency (ms)"),
        _per_second_figure(reps, "series", failures, "Errors per second", "errors/s"),
    ]


def _has(reps: Sequence[Rep], key: str, field: str) -> bool:
    return any(number(r.get(field)) is not None for rep in reps for r in rows_of(rep, key))


def resource_charts(reps: Sequence[Rep]) -> list[Figure]:
    """Server CPU and memory per second per part (seed 000), and the generator's CPU."""
    charts = []
    parts = {str(r.get("part", "")): None for rep in reps for r in rows_of(rep, "resources")}
    cpu_unit = "CPU % (100 = one core)"
    for part in parts:
        suffix = f" — {part}" if part else ""
        cpu: list[Field] = [("process tree", "", _field("cpu_percent"))]
        if _has(reps, "resources", "cgroup_cpu_percent"):
            cpu.append(("cgroup", "6 3", _field("cgroup_cpu_percent")))
        mem: list[Field] = [("RSS", "", _field("rss_mb"))]
        if _has(reps, "resources", "cgroup_memory_mb"):
            mem.append(("cgroup", "6 3", _field("cgroup_memory_mb")))
        charts.append(
            _per_second_figure(reps, "resources", cpu, f"Server CPU{suffix}", cpu_unit, part=part)
        )
        charts.append(
            _per_second_figure(
                reps, "resources", mem, f"Server memory{suffix}", "memory (MB)", part=part
            )
        )
    if any(rows_of(rep, "generator") for rep in reps):
        generator: list[Field] = [("", "", _field("cpu_percent"))]
        charts.append(
            _per_second_figure(reps, "generator", generator, "Load generator CPU", cpu_unit)
        )
    return charts


# Percentiles drawn on the latency distribution; the x axis is in "nines"
# (-log10 of the fraction above), so 90 %, 99 %, 99.9 % are evenly spaced.
CURVE_PERCENTILES = (
    *(0, 10, 20, 30, 40, 50, 60, 70, 75, 80, 85, 90, 92.5, 95, 96, 97, 98, 99),
    *(99.25, 99.5, 99.75, 99.9, 99.95, 99.99, 99.995, 99.999, 99.9995, 99.9999),
)


def nines(percent: float) -> float:
    return -math.log10(1 - percent / 100) if percent < 100 else math.inf


def _curve(histogram: Histogram) -> list[tuple[float, float | None]]:
    """The percentile curve up to the resolution the sample count allows, then the max."""
    if not histogram.count:
        return []
    last = nines(100 * (1 - 1 / histogram.count)) if histogram.count > 1 else 0.0
    points: list[tuple[float, float | None]] = [
        (nines(p), histogram.percentile(p) / 1000) for p in CURVE_PERCENTILES if nines(p) < last
    ]
    return [*points, (last, histogram.max() / 1000)]


def _nines_axis(lines: Sequence[Line]) -> Axis:
    top = max(1, math.ceil(max(values_of(lines, 0), default=1.0)))
    ticks = tuple(float(k) for k in range(top + 1))
    labels = tuple(
        "0%" if k == 0 else f"{100 - 100 / 10**k:.{max(k - 2, 0)}f}%" for k in range(top + 1)
    )
    return Axis(0.0, float(top), ticks, labels)


def distribution_chart(reps: Sequence[Rep]) -> Figure:
    lines = []
    for i, rep in enumerate(reps):
        data = rep.get("histogram")
        try:
            histogram = Histogram.from_dict(data if isinstance(data, Mapping) else {})
        except (ValueError, TypeError):  # an unknown layout: leave this one out, render the rest
            continue
        lines.append(Line(rep_label(rep, i), _curve(histogram), colour(i), css=f"rep-{i + 1}"))
    title = "Latency distribution"
    svg = line_chart(
        lines,
        title=title,
        x_label="percentile of requests",
        y_label="latency (ms)",
        x_axis=_nines_axis(lines),
    )
    return Figure(title, svg, _key(reps))


def measurement_charts(reps: Sequence[Rep]) -> list[Figure]:
    return [*load_charts(reps), distribution_chart(reps), *resource_charts(reps)]


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
    items = [
        Interval(
            label=str(c.get("check", c.get("metric", "-"))),
            change=number(c.get("change")),
            low=_within(number(c.get("low")), limit),
            high=_within(number(c.get("high")), limit),
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
