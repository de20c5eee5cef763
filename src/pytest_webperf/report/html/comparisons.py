"""The HTML report's comparisons across measurements: servers side by side per workload.

Measurements of one workload (catalogue servers serve the same routes) are grouped;
each group gets req/s by users per server, latency percentiles, and where recorded
server CPU, memory, CPU per request and MQTT throughput. Means and spreads come from
``table`` (``statistics`` underneath), like every other figure on the page.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_webperf.report.html.charts import PERCENTILE_COLOUR, PERCENTILE_STYLE, Figure
from pytest_webperf.report.html.svg import Bars, bar_chart, colour
from pytest_webperf.report.table import (
    MISSING,
    Entry,
    fmt,
    mean,
    mean_sd,
    number,
    present,
    rep_latency,
    rep_nested,
    rep_rps,
    repetitions,
)

Metric = Callable[[Entry], tuple[float | None, float | None]]  # value, spread
RepFigure = Callable[[Mapping[str, Any]], float | None]


@dataclass(frozen=True)
class Workload:
    name: str
    figures: tuple[Figure, ...]


def _test_function(entry: Entry) -> str:
    return re.sub(r"\[.*\]$", "", str(entry.get("nodeid", "")))


def groups(entries: Sequence[Entry]) -> dict[str, list[Entry]]:
    """Measurements of the same workload, in report order."""
    found: dict[str, list[Entry]] = {}
    for entry in entries:
        found.setdefault(str(entry.get("name", MISSING)), []).append(entry)
    return found


def _series_names(group: Sequence[Entry]) -> list[str]:
    """Server per measurement; with the test's name too when a server/users pair repeats."""
    plain = [str(e.get("server", MISSING)) for e in group]
    pairs = [(name, e.get("concurrency")) for name, e in zip(plain, group, strict=True)]
    if len(set(pairs)) == len(pairs):
        return plain
    return [
        f"{name} · {_test_function(e).split('::')[-1]}"
        for name, e in zip(plain, group, strict=True)
    ]


def _bars_figure(
    title: str, groups_: Sequence[str], series: Sequence[Bars], x: str, y: str
) -> Figure:
    svg = bar_chart(groups_, series, title=title, x_label=x, y_label=y)
    return Figure(title, svg, tuple((b.label, b.colour, "") for b in series))


def _by_users(group: Sequence[Entry], metric: Metric, title: str, y_label: str) -> Figure:
    """Grouped bars: one group per user count, one bar per server."""
    names = _series_names(group)
    users = sorted({int(c) for e in group if (c := number(e.get("concurrency"))) is not None})
    series = []
    for s, server in enumerate(dict.fromkeys(names)):
        cells: dict[int, tuple[float | None, float | None]] = {}
        for name, entry in zip(names, group, strict=True):
            c = number(entry.get("concurrency"))
            if name == server and c is not None:
                cells[int(c)] = metric(entry)
        values = [cells.get(u, (None, None)) for u in users]
        series.append(Bars(server, colour(s), [v for v, _ in values], [d for _, d in values]))
    return _bars_figure(title, [f"{u} users" for u in users], series, "concurrent users", y_label)


def _percentiles(group: Sequence[Entry], title: str) -> Figure:
    """Grouped bars: one group per server and user count, bars p50 / p95 / p99."""
    names = _series_names(group)
    labels = [
        f"{n}\n{fmt(number(e.get('concurrency')))} users" for n, e in zip(names, group, strict=True)
    ]
    series = [
        Bars(
            label,
            PERCENTILE_COLOUR[field],
            [mean([rep_latency(r, field) for r in repetitions(e)]) for e in group],
        )
        for field, (label, _) in PERCENTILE_STYLE.items()
    ]
    y_label = "latency (ms, mean of repetitions)"
    return _bars_figure(title, labels, series, "server · users", y_label)


def _rep_metric(get: RepFigure) -> Metric:
    return lambda e: mean_sd([get(r) for r in repetitions(e)])


def _peak(get: RepFigure) -> Metric:
    return lambda e: (max(present([get(r) for r in repetitions(e)]), default=None), None)


def _mqtt_tps(rep: Mapping[str, Any]) -> float | None:
    data = rep.get("mqtt")
    return number(data.get("tps")) if isinstance(data, Mapping) else None


OPTIONAL: tuple[tuple[str, str, RepFigure, bool], ...] = (
    (
        "Server CPU",
        "CPU % (mean, 100 = one core)",
        lambda r: rep_nested(r, "cpu_percent", "mean"),
        False,
    ),
    ("Server peak memory", "peak RSS (MB)", lambda r: rep_nested(r, "rss_mb", "max"), True),
    (
        "Server CPU per request",
        "CPU µs per request",
        lambda r: number(r.get("cpu_per_req_us")),
        False,
    ),
    ("MQTT throughput", "messages stored per second", _mqtt_tps, False),
)


def comparison(workload: str, group: Sequence[Entry]) -> Workload:
    figures = [
        _by_users(
            group,
            _rep_metric(rep_rps),
            f"{workload}: Requests per second",
            "req/s (mean ± sd of repetitions)",
        ),
        _percentiles(group, f"{workload}: Latency percentiles"),
    ]
    for title, unit, get, peak in OPTIONAL:
        if any(get(r) is not None for e in group for r in repetitions(e)):
            metric = _peak(get) if peak else _rep_metric(get)
            figures.append(_by_users(group, metric, f"{workload}: {title}", unit))
    return Workload(workload, tuple(figures))


def comparisons(entries: Sequence[Entry]) -> list[Workload]:
    return [comparison(name, group) for name, group in groups(entries).items()]
