"""The HTML report's capacity charts: a ``webperf.capacity`` search's latency-throughput
curve (p50 and p99 against the offered rate, the SLO's latency limit, the knee: the
first rate that broke it) and what the server completed against what was offered.
In an A/B run the base's search (A, grey) is drawn beside the change's (B)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_webperf.report.charts import PERCENTILE_COLOUR, SIDE_COLOUR, Figure, LegendItem
from pytest_webperf.report.svg import Line, line_chart, values_of
from pytest_webperf.report.table import number

_LATENCY_LIMIT = re.compile(r"(p50|p99)(?:_ms)?<=?(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)")
SLO_COLOUR, KNEE_COLOUR = "#009E73", "#CC79A7"


def _probes(search: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The search's probes by offered rate (a rate probed twice: its last probe)."""
    probes = search.get("probes")
    rows = [p for p in probes if isinstance(p, Mapping)] if isinstance(probes, list) else []
    by_rate = {number(p.get("rate")): p for p in rows if number(p.get("rate")) is not None}
    return [by_rate[rate] for rate in sorted(by_rate)]  # type: ignore[type-var]


def _searches(entry: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    found = [
        (side, entry[key])
        for side, key in (("B", "capacity"), ("A", "base_capacity"))
        if isinstance(entry.get(key), Mapping)
    ]
    return found if len(found) > 1 else [("", s) for _, s in found]


def _points(probes: Sequence[Mapping[str, Any]], field: str) -> list[tuple[float, float | None]]:
    return [(float(p["rate"]), number(p.get(field))) for p in probes]


def curve_figures(entry: Mapping[str, Any]) -> list[Figure]:
    """The curve and the throughput of each search in ``entry``; none without one."""
    searches = _searches(entry)
    if not searches:
        return []
    latency: list[Line] = []
    completed: list[Line] = []
    legend: list[LegendItem] = []
    for side, search in searches:
        probes = _probes(search)
        tips = [f"{p.get('rate'):,.0f}/s offered: {p.get('decision')}" for p in probes]
        name = f"{side} " if side else ""
        for field, dash in (("p50_ms", "7 3"), ("p99_ms", "")):
            tint = SIDE_COLOUR[side] if side else PERCENTILE_COLOUR[field]
            label = f"{name}{field.removesuffix('_ms')}"
            points = _points(probes, field)
            latency.append(Line(label, points, tint, dash, markers=True, tips=tips))
            legend.append((label, tint, dash))
        tint = SIDE_COLOUR[side] if side else PERCENTILE_COLOUR["p95_ms"]
        completed.append(Line(f"{name}completed", _points(probes, "achieved"), tint, markers=True))
    rates = [float(p[0]) for line in latency for p in line.points]
    top = max([*values_of(latency, 1), 1.0])
    limit = _LATENCY_LIMIT.search(str(searches[0][1].get("slo", "")))
    if limit is not None:
        slo = float(limit[2])
        latency.append(
            Line(
                f"SLO {limit[1]} < {slo:g} ms",
                [(min(rates), slo), (max(rates), slo)],
                SLO_COLOUR,
                "2 2",
            )
        )
        legend.append((f"SLO {limit[1]} {slo:g} ms", SLO_COLOUR, "2 2"))
        top = max(top, slo)
    knee = number(searches[0][1].get("high"))
    if knee is not None:
        latency.append(Line(f"knee {knee:,.0f}/s", [(knee, 0.0), (knee, top)], KNEE_COLOUR))
        legend.append((f"knee (first rate that broke the SLO) {knee:,.0f}/s", KNEE_COLOUR, ""))
    offered = sorted(set(rates))
    completed.append(Line("offered", [(r, r) for r in offered], SLO_COLOUR, "2 2"))
    return [
        Figure(
            "Latency against offered rate",
            line_chart(
                latency,
                title="Latency against offered rate",
                x_label="offered (req/s)",
                y_label="latency (ms)",
            ),
            tuple(legend),
        ),
        Figure(
            "Completed against offered rate",
            line_chart(
                completed,
                title="Completed against offered rate",
                x_label="offered (req/s)",
                y_label="completed (req/s)",
            ),
            tuple((line.label, line.colour, line.dash) for line in completed),
        ),
    ]
