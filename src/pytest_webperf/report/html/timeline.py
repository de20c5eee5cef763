"""The HTML report's charts of a measurement over time: per-second load, latency and
errors, server resources per part, the load generator, and the latency distribution.
Each repetition is a line in its own colour; in an A/B run both sides' repetitions are
drawn, A grey beside B orange (``runs_of``), and the page's boxes show or hide a side.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_webperf.report.html.charts import (
    PERCENTILE_STYLE,
    SIDE_COLOUR,
    Figure,
    LegendItem,
    rep_label,
    rows_of,
)
from pytest_webperf.report.html.svg import Axis, Line, colour, line_chart, values_of
from pytest_webperf.report.table import number
from pytest_webperf.stats.histogram import Histogram

Rep = Mapping[str, Any]


def _per_second(row: Mapping[str, Any], field: str) -> float | None:
    """A count in a snapshot as a rate (its interval is normally, not always, 1 s)."""
    count, elapsed = number(row.get(field)), number(row.get("elapsed"))
    if count is None:
        return None
    return count / elapsed if elapsed else count


def _field(name: str) -> Callable[[Mapping[str, Any]], float | None]:
    return lambda row: number(row.get(name))


Field = tuple[str, str, Callable[[Mapping[str, Any]], float | None]]  # label, dash, getter


@dataclass(frozen=True)
class Run:
    """One repetition as drawn: its colour, the class its toggle hides, its label."""

    rep: Rep
    colour: str
    css: str
    label: str


@dataclass(frozen=True)
class Runs:
    """The repetitions of a measurement's charts (both sides' in an A/B run) and the
    legend's colours: one per repetition, or one per side."""

    runs: Sequence[Run]
    key: Sequence[LegendItem]
    boxes: Sequence[tuple[str, str, str]] = ()  # the page's show/hide boxes: css, colour, label

    @property
    def reps(self) -> list[Rep]:
        return [run.rep for run in self.runs]


def runs_of(reps: Sequence[Rep], base: Sequence[Rep] = (), ref: str = "") -> Runs:
    """Each repetition in its own colour; in an A/B run (``base``: side A's), each side in
    its colour, A grey and B orange, as in every A/B chart."""
    if not base:
        runs = [Run(r, colour(i), f"rep-{i + 1}", rep_label(r, i)) for i, r in enumerate(reps)]
        boxes = [(run.css, run.colour, run.label) for run in runs] if len(runs) > 1 else []
        return Runs(runs, [(run.label, run.colour, "") for run in runs], boxes)
    sides = (("A", base, f"A ({ref or 'base'})"), ("B", reps, "B (working tree)"))
    runs = [
        Run(r, SIDE_COLOUR[side], f"side-{side.lower()}", f"{side} {rep_label(r, i)}")
        for side, side_reps, _ in sides
        for i, r in enumerate(side_reps)
    ]
    key = [(label, SIDE_COLOUR[side], "") for side, _, label in sides]
    boxes = [(f"side-{side.lower()}", SIDE_COLOUR[side], label) for side, _, label in sides]
    return Runs(runs, key, boxes)


def _series_lines(
    runs: Runs, key: str, fields: Sequence[Field], part: str | None = None
) -> list[Line]:
    """One line per repetition and field."""
    lines = []
    for run in runs.runs:
        rows = [r for r in rows_of(run.rep, key) if part is None or r.get("part") == part]
        for label, dash, get in fields:
            points = [(t, get(r)) for r in rows if (t := number(r.get("t"))) is not None]
            name = f"{run.label} {label}".strip()
            lines.append(Line(name, points, run.colour, dash, css=run.css))
    return lines


def _key(runs: Runs, dashes: Sequence[tuple[str, str]] = ()) -> tuple[LegendItem, ...]:
    """Legend: a colour per repetition (or side), then a dash per field when several."""
    return (*runs.key, *((label, "#555", dash) for label, dash in dashes))


def _per_second_figure(
    runs: Runs, key: str, fields: Sequence[Field], title: str, unit: str, *, part: str = ""
) -> Figure:
    lines = _series_lines(runs, key, fields, part or None)
    x_label = "time (s; grey = warm-up)" if key != "series" else "time (s, end of each second)"
    dashes = [(label, dash) for label, dash, _ in fields] if len(fields) > 1 else []
    svg = line_chart(lines, title=title, x_label=x_label, y_label=unit)
    return Figure(title, svg, _key(runs, dashes))


def load_charts(runs: Runs) -> list[Figure]:
    """Per-second throughput, latency and errors as the generator saw them."""
    percentiles = [(label, dash, _field(f)) for f, (label, dash) in PERCENTILE_STYLE.items()]
    failures: list[Field] = [
        ("errors", "", lambda r: _per_second(r, "errors")),
        ("timeouts", "2 2", lambda r: _per_second(r, "timeouts")),
    ]
    rps: list[Field] = [("", "", lambda r: _per_second(r, "requests"))]
    return [
        _per_second_figure(runs, "series", rps, "Requests per second", "req/s"),
        _per_second_figure(runs, "series", percentiles, "Latency per second", "latency (ms)"),
        _per_second_figure(runs, "series", failures, "Errors per second", "errors/s"),
    ]


def _has(reps: Sequence[Rep], key: str, field: str) -> bool:
    return any(number(r.get(field)) is not None for rep in reps for r in rows_of(rep, key))


def resource_charts(runs: Runs) -> list[Figure]:
    """Server CPU and memory per second per part (seed 000), and the generator's CPU."""
    charts, reps = [], runs.reps
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
            _per_second_figure(runs, "resources", cpu, f"Server CPU{suffix}", cpu_unit, part=part)
        )
        charts.append(
            _per_second_figure(
                runs, "resources", mem, f"Server memory{suffix}", "memory (MB)", part=part
            )
        )
    if any(rows_of(rep, "generator") for rep in reps):
        generator: list[Field] = [("", "", _field("cpu_percent"))]
        charts.append(
            _per_second_figure(runs, "generator", generator, "Load generator CPU", cpu_unit)
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


def distribution_chart(runs: Runs) -> Figure:
    lines = []
    for run in runs.runs:
        data = run.rep.get("histogram")
        try:
            histogram = Histogram.from_dict(data if isinstance(data, Mapping) else {})
        except (ValueError, TypeError):  # an unknown layout: leave this one out, render the rest
            continue
        lines.append(Line(run.label, _curve(histogram), run.colour, css=run.css))
    title = "Latency distribution"
    svg = line_chart(
        lines,
        title=title,
        x_label="percentile of requests",
        y_label="latency (ms)",
        x_axis=_nines_axis(lines),
    )
    return Figure(title, svg, _key(runs))


def measurement_charts(runs: Runs) -> list[Figure]:
    return [*load_charts(runs), distribution_chart(runs), *resource_charts(runs)]
