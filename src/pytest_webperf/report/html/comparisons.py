"""The HTML report's comparisons across measurements: servers side by side per workload.

Measurements of one workload (catalogue servers serve the same routes) are grouped;
each group gets req/s by users per server, latency percentiles, and where recorded
server CPU, memory, CPU per request and MQTT throughput. In an A/B run every chart puts
A (grey, or a server's colour lightened) beside B. A counted measurement's timed figures
were taken under Valgrind: its group gets instructions, allocations and system calls per
request instead. Means and spreads come from ``table`` (``statistics`` underneath), like
every other figure on the page.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_webperf.report import counts, verdicts
from pytest_webperf.report.html.charts import (
    PERCENTILE_COLOUR,
    PERCENTILE_STYLE,
    SIDE_COLOUR,
    Figure,
)
from pytest_webperf.report.html.svg import Bars, bar_chart, colour
from pytest_webperf.report.table import (
    MISSING,
    Entry,
    fmt,
    is_counted,
    mean,
    mean_sd,
    number,
    present,
    rep_latency,
    rep_nested,
    rep_rps,
    repetitions,
)

Rep = Mapping[str, Any]
Metric = Callable[[Sequence[Rep]], tuple[float | None, float | None]]  # value, spread
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


def sides(entry: Entry) -> list[tuple[str, list[Rep]]]:
    """``[("", reps)]``, or for an A/B entry ``[("A", base reps), ("B", reps)]``."""
    if not verdicts.is_ab(entry):
        return [("", repetitions(entry))]
    return [("A", verdicts.base_repetitions(entry)), ("B", repetitions(entry))]


def lighter(hex_colour: str, amount: float = 0.55) -> str:
    """A colour mixed with white: side A of a server drawn in that server's colour."""
    rgb = [int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(c + (255 - c) * amount):02x}" for c in rgb)


def _series_colour(index: int, side: str, servers: int) -> str:
    if servers == 1 and side:
        return SIDE_COLOUR[side]
    return lighter(colour(index)) if side == "A" else colour(index)


def _bars_figure(
    title: str, groups_: Sequence[str], series: Sequence[Bars], x: str, y: str
) -> Figure:
    svg = bar_chart(groups_, series, title=title, x_label=x, y_label=y)
    return Figure(title, svg, tuple((b.label, b.colour, "") for b in series))


def _by_users(group: Sequence[Entry], metric: Metric, title: str, y_label: str) -> Figure:
    """Grouped bars: one group per user count, one bar per server (A beside B in A/B)."""
    names = _series_names(group)
    users = sorted({int(c) for e in group if (c := number(e.get("concurrency"))) is not None})
    servers = list(dict.fromkeys(names))
    series = []
    for s, server in enumerate(servers):
        found = [e for name, e in zip(names, group, strict=True) if name == server]
        labels = dict.fromkeys(side for e in found for side, _ in sides(e))
        for side in labels:
            cells: dict[int, tuple[float | None, float | None]] = {}
            for entry in found:
                c = number(entry.get("concurrency"))
                reps = dict(sides(entry)).get(side)
                if c is not None and reps is not None:
                    cells[int(c)] = metric(reps)
            values = [cells.get(u, (None, None)) for u in users]
            label = f"{server} {side}".strip()
            fill = _series_colour(s, side, len(servers))
            series.append(Bars(label, fill, [v for v, _ in values], [d for _, d in values]))
    return _bars_figure(title, [f"{u} users" for u in users], series, "concurrent users", y_label)


def _percentiles(group: Sequence[Entry], title: str) -> Figure:
    """Grouped bars: one group per server and user count (and side, A and B), bars p50 /
    p95 / p99."""
    names = _series_names(group)
    labels, reps = [], []
    for name, entry in zip(names, group, strict=True):
        for side, side_reps in sides(entry):
            users = fmt(number(entry.get("concurrency")))
            labels.append(f"{name} {side}".strip() + f"\n{users} users")
            reps.append(side_reps)
    series = [
        Bars(
            label,
            PERCENTILE_COLOUR[field],
            [mean([rep_latency(r, field) for r in side_reps]) for side_reps in reps],
        )
        for field, (label, _) in PERCENTILE_STYLE.items()
    ]
    y_label = "latency (ms, mean of repetitions)"
    return _bars_figure(title, labels, series, "server · users", y_label)


def _rep_metric(get: RepFigure) -> Metric:
    return lambda reps: mean_sd([get(r) for r in reps])


def _peak(get: RepFigure) -> Metric:
    return lambda reps: (max(present([get(r) for r in reps]), default=None), None)


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
    every = [r for e in group for _, reps in sides(e) for r in reps]
    for title, unit, get, peak in OPTIONAL:
        if any(get(r) is not None for r in every):
            metric = _peak(get) if peak else _rep_metric(get)
            figures.append(_by_users(group, metric, f"{workload}: {title}", unit))
    return Workload(workload, tuple(figures))


def counted_comparison(workload: str, group: Sequence[Entry]) -> Workload:
    """A counted group: each counted figure per request by server (A beside B), never
    the rates and times Valgrind slowed."""
    figures = [
        _by_users(
            group,
            _rep_metric(counts.reader(key)),
            f"{workload}: {name} per request (counted)",
            f"{name} per request",
        )
        for key, name, _ in counts.FIGURES
        if any(key in (counts.judged(e) or (key,)) for e in group)  # unjudged: not drawn
        and any(counts.reader(key)(r) is not None for e in group for r in repetitions(e))
    ]
    return Workload(f"{workload} (counted)", tuple(figures))


def comparisons(entries: Sequence[Entry]) -> list[Workload]:
    found = []
    for name, group in groups(entries).items():
        timed = [e for e in group if not is_counted(e)]
        counted = [e for e in group if is_counted(e)]
        if timed:
            found.append(comparison(name, timed))
        if counted:
            found.append(counted_comparison(name, counted))
    return found
