"""The HTML report's trend over a stored baseline's saves: each relative check's metric
over the saves (oldest first), this run as the last point, and where the check's threshold
lies from the baseline; the saves' own figures for the table beside it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pytest_webperf.report import verdicts
from pytest_webperf.report.html.charts import SIDE_COLOUR, Figure, LegendItem
from pytest_webperf.report.html.svg import Axis, Line, colour, line_chart
from pytest_webperf.report.table import MISSING, code, mean, number, short_sha

# The metrics the gate compares as rates per request (metrics.METRICS' count metrics):
# a save's summary holds counts per repetition and no request totals, so no trend.
COUNT_METRICS = frozenset(
    {"errors", "timeouts", "error_rate", "lost", "dup"}
    | {"ws_lost", "ws_dup", "ws_out_of_order", "ws_abnormal", "sse_lost", "sse_reconnects"}
)
TREND_COLOUR, NOW_COLOUR, THRESHOLD_COLOUR = colour(0), SIDE_COLOUR["B"], "#cf222e"


def saves(entry: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The entry's ``history``: the baseline's saves, oldest first."""
    found = entry.get("history")
    return [s for s in found if isinstance(s, Mapping)] if isinstance(found, list) else []


def save_value(save: Mapping[str, Any], metric: str) -> float | None:
    """A save's figure for a metric: the mean of its repetitions that measured it (what
    the gate compares a relative check against)."""
    summary = save.get("summary")
    values = summary.get(metric) if isinstance(summary, Mapping) else None
    return mean([number(v) for v in values]) if isinstance(values, list) else None


def save_code(save: Mapping[str, Any]) -> str:
    """``0123456789+dirty`` (the commit saved from), the image, or ``-``."""
    git = save.get("git")
    commit = git.get("commit") if isinstance(git, Mapping) else None
    parts = [
        short_sha(commit) + ("+dirty" if isinstance(git, Mapping) and git.get("dirty") else "")
        if commit
        else "",
        str(save.get("image") or ""),
    ]
    return " ".join(p for p in parts if p) or MISSING


def save_when(save: Mapping[str, Any]) -> str:
    """``2026-11-20 14:03`` from the save's ISO time."""
    return str(save.get("saved_at") or MISSING)[:16].replace("T", " ")


def trend_metrics(entry: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The relative checks (they have a threshold) whose metric a save's summary holds,
    first check of each metric; none for an A/B entry (its base is not a save)."""
    if verdicts.is_ab(entry) or not saves(entry):
        return []
    found: dict[str, Mapping[str, Any]] = {}
    for check in verdicts.checks(entry):
        metric = str(check.get("metric") or "")
        whole_run = verdicts.endpoint(check) is None  # a save's summary holds the run's figures
        threshold = number(check.get("threshold"))
        if metric and metric not in COUNT_METRICS and threshold is not None and whole_run:
            found.setdefault(metric, check)
    return list(found.values())


def _trend_axis(count: int) -> Axis:
    """Saves 1..count, then this run: about ten labels, the last one ``now``."""
    step = max(1, math.ceil((count + 1) / 10))
    ticks = tuple(float(i) for i in range(1, count + 2))
    labels = tuple(
        "now" if i == count + 1 else str(i) if (i - 1) % step == 0 and count + 1 - i >= step else ""
        for i in range(1, count + 2)
    )
    return Axis(0.5, count + 1.5, ticks, labels)


def trend_figure(entry: Mapping[str, Any], check: Mapping[str, Any]) -> Figure:
    """One metric over the saves (a tooltip per save: when, which commit or image),
    this run as a distinct last point, and where the check's threshold lies from the
    baseline (the latest save)."""
    metric = str(check.get("metric"))
    unit = verdicts.METRICS[metric][0] if metric in verdicts.METRICS else metric
    history = saves(entry)
    count = len(history)
    values = [save_value(s, metric) for s in history]
    tips = [
        f"save {i + 1}, {save_when(s)}, {save_code(s)}: {verdicts.value(v)}"
        for i, (s, v) in enumerate(zip(history, values, strict=True))
    ]
    current = number(check.get("current"))
    lines = [
        Line(
            "baseline saves",
            [(i + 1.0, v) for i, v in enumerate(values)],
            TREND_COLOUR,
            markers=True,
            tips=tips,
        ),
        Line(
            "this run",
            [(count + 1.0, current)],
            NOW_COLOUR,
            markers=True,
            tips=[f"this run, {code(entry)}: {verdicts.value(current)}"],
        ),
    ]
    legend: list[LegendItem] = [("baseline saves", TREND_COLOUR, ""), ("this run", NOW_COLOUR, "")]
    baseline, threshold = number(check.get("baseline")), verdicts.signed_threshold(check)
    if baseline is not None and threshold is not None:
        level = baseline * (1 + threshold)
        lines.append(
            Line(
                f"threshold {threshold:+.0%} from the baseline",
                [(0.5, level), (count + 1.5, level)],
                THRESHOLD_COLOUR,
                "4 3",
            )
        )
        legend.append((f"{check.get('check', metric)} threshold", THRESHOLD_COLOUR, "4 3"))
    title = f"{metric}: baseline saves and this run"
    svg = line_chart(
        lines,
        title=title,
        x_label=f"save (oldest first, last {count}), then this run",
        y_label=unit,
        x_axis=_trend_axis(count),
        zero=False,
    )
    return Figure(title, svg, tuple(legend))


def trend_figures(entry: Mapping[str, Any]) -> list[Figure]:
    return [trend_figure(entry, check) for check in trend_metrics(entry)]
