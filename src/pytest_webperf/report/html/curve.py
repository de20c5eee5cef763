"""The HTML report's capacity and stage charts: a ``webperf.capacity`` search's
latency-throughput curve (p50 and p99 against the offered rate, the SLO's latency
limit, the knee: the first rate that broke it) and what the server completed against
what was offered, the base's search (A, grey) beside the change's (B) in an A/B run;
``webperf.staged``'s stages over time, one after the other."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_webperf.report.html.charts import PERCENTILE_COLOUR, SIDE_COLOUR, Figure, LegendItem
from pytest_webperf.report.html.svg import Line, colour, line_chart, values_of
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
    if not rates:  # no probe measured anything (a search that never ran): no curve
        return []
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


_STAGE = re.compile(r"^(?P<base>.*) stage (?P<i>\d+)/(?P<n>\d+): (?P<level>.*)$")


def stage_groups(entries: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """``webperf.staged``'s measurements, by test and workload, in stage order."""
    groups: dict[str, list[tuple[int, Mapping[str, Any]]]] = {}
    for entry in entries:
        match = _STAGE.match(str(entry.get("name", "")))
        if match is not None:
            key = f"{entry.get('nodeid', '')} {match['base']}"
            groups.setdefault(key, []).append((int(match["i"]), entry))
    return {k: [e for _, e in sorted(g, key=lambda x: x[0])] for k, g in groups.items()}


def stage_figures(stages: Sequence[Mapping[str, Any]]) -> list[Figure]:
    """The stages over time (the first repetition of each, one after the other): each
    second's requests and p99, a line per stage, so the step between levels shows."""
    rps: list[Line] = []
    p99: list[Line] = []
    offset = 0.0
    for index, entry in enumerate(stages):
        reps = entry.get("repetitions")
        first = reps[0] if isinstance(reps, list) and reps else {}
        series = [s for s in first.get("series", ()) if isinstance(s, Mapping)]
        match = _STAGE.match(str(entry.get("name", "")))
        label = match["level"] if match else str(index + 1)
        tint = colour(index)
        times = [offset + float(s.get("t", 0.0)) for s in series]
        seconds = [number(s.get("elapsed")) or 0.0 for s in series]
        rps.append(
            Line(
                label,
                [
                    (t, (number(s.get("requests")) or 0.0) / e if e else None)
                    for t, s, e in zip(times, series, seconds, strict=True)
                ],
                tint,
                markers=True,
            )
        )
        p99.append(
            Line(
                label,
                [(t, number(s.get("p99_ms"))) for t, s in zip(times, series, strict=True)],
                tint,
                markers=True,
            )
        )
        offset = max(times, default=offset)
    legend = tuple((line.label, line.colour, "") for line in rps)
    x_label = "time (s, stages one after the other)"
    return [
        Figure(
            "Requests per second by stage",
            line_chart(rps, title="Requests per second by stage", x_label=x_label, y_label="req/s"),
            legend,
        ),
        Figure(
            "p99 per second by stage",
            line_chart(p99, title="p99 per second by stage", x_label=x_label, y_label="p99 (ms)"),
            legend,
        ),
    ]
