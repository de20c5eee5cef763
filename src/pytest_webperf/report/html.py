"""The HTML report: one self-contained page, charts as inline SVG drawn here.

No script, font or stylesheet is fetched (CI machines and the lab are offline); the
only JavaScript is a few lines that hide or show repetitions. Like every renderer it
renders what the report holds and decides nothing: verdicts come from the report.

Layout: header (created, config, machine), summary table, side-by-side comparisons
per workload (req/s by users per server, latency percentiles, server CPU and memory),
then one section per measurement with its repetitions table and per-second charts.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

from pytest_webperf.fileio import write_text_atomic
from pytest_webperf.histogram import Histogram
from pytest_webperf.report.table import (
    COLUMNS,
    MISSING,
    NUMERIC,
    Entry,
    fmt,
    mean,
    number,
    present,
    rep_latency,
    rep_nested,
    rep_rps,
    repetitions,
    short_test,
    status,
    status_counts,
    tests,
    verdict_texts,
)

# Okabe-Ito: distinguishable with the common colour-vision deficiencies (yellow left out:
# too pale on white). Repetition n and server n always get the same colour on a page.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#999999")
PERCENTILE_STYLE = {"p50_ms": ("p50", ""), "p95_ms": ("p95", "7 3"), "p99_ms": ("p99", "2 2")}
PERCENTILE_COLOUR = {"p50_ms": "#56B4E9", "p95_ms": "#0072B2", "p99_ms": "#D55E00"}
# Charts are collapsed beyond this many measurements, so a big report opens quickly.
OPEN_SECTIONS_UP_TO = 12


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def colour(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


# ---------------------------------------------------------------- scales and axes


@dataclass(frozen=True)
class Axis:
    """A linear axis: the domain ``lo..hi`` and its labelled ticks."""

    lo: float
    hi: float
    ticks: tuple[float, ...]
    labels: tuple[str, ...]

    def frac(self, value: float) -> float:
        """Where ``value`` lies from ``lo`` (0) to ``hi`` (1), clamped. Halving first
        keeps the span finite for any finite domain."""
        span = self.hi / 2 - self.lo / 2
        if not span > 0 or math.isnan(value):
            return 0.5
        return min(max((value / 2 - self.lo / 2) / span, 0.0), 1.0)


def _nice_step(lo: float, hi: float, count: int) -> float | None:
    """A 1, 2, 2.5 or 5 times a power of ten step giving about ``count`` intervals."""
    raw = (hi / 2 - lo / 2) * 2 / count
    if not (math.isfinite(raw) and raw > 0):
        return None
    magnitude = 10.0 ** math.floor(math.log10(raw))
    if not magnitude > 0:
        return None
    return next((m * magnitude for m in (1, 2, 2.5, 5) if m * magnitude >= raw), 10 * magnitude)


def tick_label(value: float, step: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1e7 or step < 1e-4:
        return f"{value:.3g}"
    decimals = max(0, -math.floor(math.log10(step)))
    if round(step * 10**decimals, 6) % 1:  # 2.5, 0.25...: one more place
        decimals += 1
    return f"{value:,.{decimals}f}"


def _widen(value: float) -> tuple[float, float]:
    """A non-empty domain around a constant."""
    if value == 0:
        return 0.0, 1.0
    pad = abs(value) / 10
    lo, hi = value - pad, value + pad
    return (lo if math.isfinite(lo) else value), (hi if math.isfinite(hi) else value)


def nice_axis(values: Iterable[float], *, zero: bool = True, count: int = 5) -> Axis:
    """An axis covering every finite value (and 0 when ``zero``), with round ticks."""
    finite = [v for v in values if math.isfinite(v)]
    lo, hi = (min(finite), max(finite)) if finite else (0.0, 1.0)
    if zero:
        lo, hi = min(lo, 0.0), max(hi, 0.0)
    if lo == hi:
        lo, hi = _widen(lo)
    step = _nice_step(lo, hi, count)
    if step is None:
        return Axis(lo, hi, (lo, hi), (f"{lo:.3g}", f"{hi:.3g}"))
    low, high = math.floor(lo / step) * step, math.ceil(hi / step) * step
    low, high = (low - step if low > lo else low), (high + step if high < hi else high)
    intervals = round((high - low) / step) if math.isfinite(high - low) else 0
    if not (math.isfinite(low) and math.isfinite(high) and 0 < intervals <= 50):
        return Axis(lo, hi, (lo, hi), (f"{lo:.3g}", f"{hi:.3g}"))
    ticks = tuple(low + i * step for i in range(intervals + 1))
    return Axis(low, high, ticks, tuple(tick_label(t, step) for t in ticks))


@dataclass(frozen=True)
class Box:
    """The plot area inside an SVG, in pixels (y grows downwards)."""

    left: float
    top: float
    width: float
    height: float

    def x(self, axis: Axis, value: float) -> float:
        return self.left + axis.frac(value) * self.width

    def y(self, axis: Axis, value: float) -> float:
        return self.top + (1 - axis.frac(value)) * self.height


WIDTH, HEIGHT = 440, 230
BOX = Box(left=60, top=12, width=WIDTH - 60 - 26, height=HEIGHT - 12 - 48)


def _n(value: float) -> str:
    """An SVG coordinate: one decimal is finer than a pixel and keeps the page small."""
    return f"{value:.1f}"


# ---------------------------------------------------------------- SVG charts


@dataclass(frozen=True)
class Line:
    """One line of a chart; ``None`` in ``points`` is a gap (a second with no data)."""

    label: str
    points: Sequence[tuple[float, float | None]]
    colour: str
    dash: str = ""
    css: str = ""  # e.g. "rep-2", so the repetition toggles can hide it


@dataclass(frozen=True)
class Bars:
    """One series of a grouped bar chart: a value (and optional ± spread) per group."""

    label: str
    colour: str
    values: Sequence[float | None]
    spreads: Sequence[float | None] = ()


def _frame(box: Box, x: Axis | None, y: Axis, x_label: str, y_label: str) -> list[str]:
    """Grid, ticks and axis titles."""
    parts = []
    for tick, label in zip(y.ticks, y.labels, strict=True):
        py = _n(box.y(y, tick))
        parts.append(
            f'<line class="grid" x1="{_n(box.left)}" x2="{_n(box.left + box.width)}" '
            f'y1="{py}" y2="{py}"/>'
        )
        parts.append(
            f'<text class="tick" x="{_n(box.left - 6)}" y="{py}" text-anchor="end" '
            f'dominant-baseline="middle">{esc(label)}</text>'
        )
    bottom = _n(box.top + box.height)
    if x is not None:
        for tick, label in zip(x.ticks, x.labels, strict=True):
            px = _n(box.x(x, tick))
            parts.append(
                f'<line class="axis" x1="{px}" x2="{px}" y1="{bottom}" '
                f'y2="{_n(box.top + box.height + 4)}"/>'
            )
            parts.append(
                f'<text class="tick" x="{px}" y="{_n(box.top + box.height + 16)}" '
                f'text-anchor="middle">{esc(label)}</text>'
            )
    parts.append(
        f'<line class="axis" x1="{_n(box.left)}" x2="{_n(box.left + box.width)}" '
        f'y1="{bottom}" y2="{bottom}"/>'
    )
    parts.append(
        f'<text class="label" x="{_n(box.left + box.width / 2)}" '
        f'y="{_n(box.top + box.height + 43)}" text-anchor="middle">{esc(x_label)}</text>'
    )
    middle = _n(box.top + box.height / 2)
    parts.append(
        f'<text class="label" x="12" y="{middle}" text-anchor="middle" '
        f'transform="rotate(-90 12 {middle})">{esc(y_label)}</text>'
    )
    return parts


def _svg(parts: Sequence[str], title: str) -> str:
    return (
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{esc(title)}"><title>{esc(title)}</title>{"".join(parts)}</svg>'
    )


def _path(line: Line, box: Box, x: Axis, y: Axis) -> str:
    """One ``M``/``L`` path; a gap starts a new sub-path. Round caps draw a lone point
    (a sub-path of length zero) as a dot."""
    commands, pen_down = [], False
    for px, py in line.points:
        if py is None or not (math.isfinite(px) and math.isfinite(py)):
            pen_down = False
            continue
        commands.append(f"{'L' if pen_down else 'M'}{_n(box.x(x, px))} {_n(box.y(y, py))}")
        pen_down = True
    if not commands:
        return ""
    dash = f' stroke-dasharray="{line.dash}"' if line.dash else ""
    css = f' class="{esc(line.css)}"' if line.css else ""
    return (
        f'<path{css} d="{"".join(commands)}" stroke="{line.colour}"{dash}>'
        f"<title>{esc(line.label)}</title></path>"
    )


def _values(lines: Sequence[Line], index: int) -> list[float]:
    """Every x (index 0) or y (index 1) that is drawn."""
    return [v for line in lines for p in line.points if (v := p[index]) is not None]


def line_chart(
    lines: Sequence[Line], *, title: str, x_label: str, y_label: str, x_axis: Axis | None = None
) -> str:
    """Lines over a shared x axis; a grey band marks negative x (the warm-up)."""
    x = x_axis or nice_axis(_values(lines, 0))
    y = nice_axis(_values(lines, 1))
    parts = _frame(BOX, x, y, x_label, y_label)
    if x.lo < 0 < x.hi:
        left, zero = BOX.x(x, x.lo), BOX.x(x, 0.0)
        parts.insert(
            0,
            f'<rect class="warmup" x="{_n(left)}" y="{_n(BOX.top)}" '
            f'width="{_n(zero - left)}" height="{_n(BOX.height)}">'
            f"<title>warm-up (not counted)</title></rect>",
        )
    drawn = [p for line in lines if (p := _path(line, BOX, x, y))]
    if drawn:
        parts.append(f'<g class="lines">{"".join(drawn)}</g>')
    else:
        parts.append(_no_data())
    return _svg(parts, title)


def _no_data() -> str:
    return (
        f'<text class="nodata" x="{_n(BOX.left + BOX.width / 2)}" '
        f'y="{_n(BOX.top + BOX.height / 2)}" text-anchor="middle">no data</text>'
    )


def _short(text: str, limit: int = 16) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def bar_chart(
    groups: Sequence[str], series: Sequence[Bars], *, title: str, x_label: str, y_label: str
) -> str:
    """Grouped bars (one group per label, one bar per series), with ± spread whiskers."""
    tops = [
        (v or 0.0) + (s or 0.0)
        for b in series
        for v, s in zip(b.values, [*b.spreads, *[None] * len(b.values)], strict=False)
    ]
    y = nice_axis(tops)
    parts = _frame(BOX, None, y, x_label, y_label)
    slot = BOX.width / max(len(groups), 1)
    bar = min(slot * 0.8 / max(len(series), 1), 64.0)  # a lone bar need not fill the plot
    inset = (slot - bar * len(series)) / 2
    drawn = 0
    for g, group in enumerate(groups):
        centre = BOX.left + slot * (g + 0.5)
        parts.append(_group_label(group, centre, int(slot / 6.5)))
        for s, bars in enumerate(series):
            value = bars.values[g] if g < len(bars.values) else None
            if value is None or not math.isfinite(value):
                continue
            spread = bars.spreads[g] if g < len(bars.spreads) else None
            left = BOX.left + slot * g + inset + bar * s
            label = f"{bars.label}, {' '.join(group.split())}"
            parts.append(_bar(left, bar, y, value, spread=spread, label=label, fill=bars.colour))
            drawn += 1
    if not drawn:
        parts.append(_no_data())
    return _svg(parts, title)


def _group_label(group: str, centre: float, chars: int) -> str:
    """A group's name under its bars: one line per ``\n``, each cut to the slot's width."""
    lines = "".join(
        f'<tspan x="{_n(centre)}" dy="{0 if i == 0 else 12}">'
        f"{esc(_short(line, max(chars, 4)))}</tspan>"
        for i, line in enumerate(group.split("\n"))
    )
    return (
        f'<text class="tick" x="{_n(centre)}" y="{_n(BOX.top + BOX.height + 15)}" '
        f'text-anchor="middle"><title>{esc(" ".join(group.split()))}</title>{lines}'
        f"</text>"
    )


def _bar(
    left: float, width: float, y: Axis, value: float, *, spread: float | None, label: str, fill: str
) -> str:
    top, base = BOX.y(y, max(value, 0.0)), BOX.y(y, 0.0)
    text = f"{label}: {value:,.2f}" + (f" ± {spread:,.2f}" if spread else "")
    out = (
        f'<rect x="{_n(left)}" y="{_n(top)}" width="{_n(max(width - 1, 0.5))}" '
        f'height="{_n(max(base - top, 0.0))}" fill="{fill}"><title>{esc(text)}</title></rect>'
    )
    if spread and math.isfinite(spread):
        mid = _n(left + width / 2)
        high, low = _n(BOX.y(y, value + spread)), _n(BOX.y(y, max(value - spread, 0.0)))
        out += (
            f'<path class="whisker" d="M{mid} {low}V{high}M{_n(left + width / 4)} {high}'
            f'H{_n(left + width * 3 / 4)}"/>'
        )
    return out


# ---------------------------------------------------------------- legends and charts


def _swatch(fill: str, dash: str = "") -> str:
    dashed = f' stroke-dasharray="{dash}"' if dash else ""
    return (
        f'<svg class="swatch" viewBox="0 0 24 10" aria-hidden="true"><line x1="1" y1="5" '
        f'x2="23" y2="5" stroke="{fill}"{dashed}/></svg>'
    )


def legend(items: Sequence[tuple[str, str, str]]) -> str:
    """HTML legend under a chart: (label, colour, dash) per item; wraps, escapes, zooms."""
    cells = "".join(f"<li>{_swatch(c, d)}{esc(label)}</li>" for label, c, d in items)
    return f'<ul class="legend">{cells}</ul>'


def figure(title: str, svg: str, key: str = "") -> str:
    return f"<figure><figcaption>{esc(title)}</figcaption>{svg}{key}</figure>"


def rep_label(rep: Mapping[str, Any], index: int) -> str:
    n = number(rep.get("repetition"))
    return f"rep {int(n) if n is not None else index + 1}"


def _rows(rep: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    rows = rep.get(key)
    return [r for r in rows if isinstance(r, Mapping)] if isinstance(rows, list) else []


def _per_second(row: Mapping[str, Any], field: str) -> float | None:
    """A count in a snapshot as a rate (its interval is normally, not always, 1 s)."""
    value, elapsed = number(row.get(field)), number(row.get("elapsed"))
    if value is None:
        return None
    return value / elapsed if elapsed else value


def _series_lines(
    reps: Sequence[Mapping[str, Any]],
    key: str,
    fields: Sequence[tuple[str, str, Callable[[Mapping[str, Any]], float | None]]],
    part: str | None = None,
) -> list[Line]:
    """One line per repetition and field (field = a label, a dash and a getter)."""
    lines = []
    for i, rep in enumerate(reps):
        rows = [r for r in _rows(rep, key) if part is None or r.get("part") == part]
        for label, dash, get in fields:
            points = [(t, get(r)) for r in rows if (t := number(r.get("t"))) is not None]
            name = f"{rep_label(rep, i)} {label}".strip()
            lines.append(Line(name, points, colour(i), dash, css=f"rep-{i + 1}"))
    return lines


def _key(reps: Sequence[Mapping[str, Any]], dashes: Sequence[tuple[str, str]] = ()) -> str:
    """Legend: a colour per repetition, then a dash per field when there are several."""
    items = [(rep_label(rep, i), colour(i), "") for i, rep in enumerate(reps)]
    items += [(label, "#555", dash) for label, dash in dashes]
    return legend(items)


def _field(name: str) -> Callable[[Mapping[str, Any]], float | None]:
    return lambda row: number(row.get(name))


def _parts(reps: Sequence[Mapping[str, Any]]) -> list[str]:
    seen = {str(r.get("part", "")): None for rep in reps for r in _rows(rep, "resources")}
    return list(seen)


def _has(reps: Sequence[Mapping[str, Any]], key: str, field: str) -> bool:
    return any(number(r.get(field)) is not None for rep in reps for r in _rows(rep, key))


def load_charts(reps: Sequence[Mapping[str, Any]]) -> list[str]:
    """Per-second throughput, latency and errors as the generator saw them."""
    rps = _series_lines(reps, "series", [("", "", lambda r: _per_second(r, "requests"))])
    pct = [(label, dash, _field(f)) for f, (label, dash) in PERCENTILE_STYLE.items()]
    latency = _series_lines(reps, "series", pct)
    failures = [
        ("errors", "", lambda r: _per_second(r, "errors")),
        ("timeouts", "2 2", lambda r: _per_second(r, "timeouts")),
    ]
    errors = _series_lines(reps, "series", failures)
    time = "time (s, end of each second)"
    return [
        figure(
            "Requests per second",
            line_chart(rps, title="Requests per second", x_label=time, y_label="req/s"),
            _key(reps),
        ),
        figure(
            "Latency per second",
            line_chart(latency, title="Latency per second", x_label=time, y_label="latency (ms)"),
            _key(reps, [(label, dash) for label, dash in PERCENTILE_STYLE.values()]),
        ),
        figure(
            "Errors per second",
            line_chart(errors, title="Errors per second", x_label=time, y_label="errors/s"),
            _key(reps, [("errors", ""), ("timeouts", "2 2")]),
        ),
    ]


def resource_charts(reps: Sequence[Mapping[str, Any]]) -> list[str]:
    """Server CPU and memory per second per part (seed 000), and the generator's CPU."""
    charts, time = [], "time (s; grey = warm-up)"
    for part in _parts(reps):
        suffix = f" — {part}" if part else ""
        cpu = [("process tree", "", _field("cpu_percent"))]
        if _has(reps, "resources", "cgroup_cpu_percent"):
            cpu.append(("cgroup", "6 3", _field("cgroup_cpu_percent")))
        mem = [("RSS", "", _field("rss_mb"))]
        if _has(reps, "resources", "cgroup_memory_mb"):
            mem.append(("cgroup", "6 3", _field("cgroup_memory_mb")))
        for title, fields, unit in (
            (f"Server CPU{suffix}", cpu, "CPU % (100 = one core)"),
            (f"Server memory{suffix}", mem, "memory (MB)"),
        ):
            lines = _series_lines(reps, "resources", fields, part)
            dashes = [(label, dash) for label, dash, _ in fields] if len(fields) > 1 else []
            charts.append(
                figure(
                    title,
                    line_chart(lines, title=title, x_label=time, y_label=unit),
                    _key(reps, dashes),
                )
            )
    if any(_rows(rep, "generator") for rep in reps):
        lines = _series_lines(reps, "generator", [("", "", _field("cpu_percent"))])
        charts.append(
            figure(
                "Load generator CPU",
                line_chart(
                    lines,
                    title="Load generator CPU",
                    x_label=time,
                    y_label="CPU % (100 = one core)",
                ),
                _key(reps),
            )
        )
    return charts


# Percentiles drawn on the latency distribution; the x axis is in "nines"
# (-log10 of the fraction above), so 90 %, 99 %, 99.9 % are evenly spaced.
CURVE_PERCENTILES = (
    0,
    10,
    20,
    30,
    40,
    50,
    60,
    70,
    75,
    80,
    85,
    90,
    92.5,
    95,
    96,
    97,
    98,
    99,
    99.25,
    99.5,
    99.75,
    99.9,
    99.95,
    99.99,
    99.995,
    99.999,
    99.9995,
    99.9999,
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
    top = max(1, math.ceil(max(_values(lines, 0), default=1.0)))
    ticks = tuple(float(k) for k in range(top + 1))
    labels = tuple(
        "0%" if k == 0 else f"{100 - 100 / 10**k:.{max(k - 2, 0)}f}%" for k in range(top + 1)
    )
    return Axis(0.0, float(top), ticks, labels)


def distribution_chart(reps: Sequence[Mapping[str, Any]]) -> str:
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
    return figure(title, svg, _key(reps))


# ---------------------------------------------------------------- tables and sections


def _cell(text: str, numeric: bool = False) -> str:
    return f'<td class="num">{esc(text)}</td>' if numeric else f"<td>{esc(text)}</td>"


def verdict_badge(entry: Entry) -> str:
    state = status(entry)
    if state is None:
        return '<span class="badge none">no verdict</span>'
    css = re.sub(r"[^a-z-]", "", state.lower()) or "none"
    return f'<span class="badge {css}">{esc(state)}</span>'


def _verdict_list(entry: Entry) -> str:
    items = [f'<li class="reason">{esc(t)}</li>' for t in verdict_texts(entry, "reasons")]
    items += [f'<li class="note">{esc(t)}</li>' for t in verdict_texts(entry, "notes")]
    return f'<ul class="verdict">{"".join(items)}</ul>' if items else ""


def summary_table(entries: Sequence[Entry]) -> str:
    head = "".join(f'<th class="{"num" if n in NUMERIC else ""}">{esc(n)}</th>' for n, _ in COLUMNS)
    rows = []
    for i, entry in enumerate(entries):
        cells = [
            f'<td><a href="#m{i}" title="{esc(entry.get("nodeid", ""))}">'
            f"{esc(short_test(entry))}</a></td>"
        ]
        cells += [_cell(render(entry), name in NUMERIC) for name, render in COLUMNS[1:]]
        cells.append(f"<td>{verdict_badge(entry)}</td>")
        rows.append(f"<tr>{''.join(cells)}</tr>")
        why = _verdict_list(entry)
        if why:  # reasons get a row of their own: a narrow verdict column cannot hold them
            rows.append(f'<tr class="why"><td></td><td colspan="{len(COLUMNS)}">{why}</td></tr>')
    return _scroll(
        f'<table class="summary"><thead><tr>{head}<th>verdict</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _scroll(table: str) -> str:
    """A wide table scrolls sideways on its own instead of widening the page."""
    return f'<div class="scroll">{table}</div>' if table else ""


def _pair(first: float | None, second: float | None) -> str:
    return MISSING if first is None and second is None else f"{fmt(first)} / {fmt(second)}"


REP_COLUMNS: tuple[tuple[str, Callable[[Mapping[str, Any]], str]], ...] = (
    ("duration s", lambda r: fmt(number(r.get("duration_s")), 1)),
    ("req/s", lambda r: fmt(rep_rps(r))),
    ("requests", lambda r: fmt(number(r.get("requests")))),
    ("errors", lambda r: fmt(number(r.get("errors")))),
    ("timeouts", lambda r: fmt(number(r.get("timeouts")))),
    ("connect errors", lambda r: fmt(number(r.get("connect_errors")))),
    ("p50 ms", lambda r: fmt(rep_latency(r, "p50_ms"), 2)),
    ("p95 ms", lambda r: fmt(rep_latency(r, "p95_ms"), 2)),
    ("p99 ms", lambda r: fmt(rep_latency(r, "p99_ms"), 2)),
    ("p99.9 ms", lambda r: fmt(rep_latency(r, "p999_ms"), 2)),
    ("max ms", lambda r: fmt(rep_latency(r, "max_ms"), 2)),
    (
        "cpu % mean/max",
        lambda r: _pair(rep_nested(r, "cpu_percent", "mean"), rep_nested(r, "cpu_percent", "max")),
    ),
    ("peak rss MB", lambda r: fmt(rep_nested(r, "rss_mb", "max"))),
    ("generator cpu %", lambda r: fmt(number(r.get("generator_cpu_percent")))),
    ("cpu/req µs", lambda r: fmt(number(r.get("cpu_per_req_us")))),
)


def _error_kinds(rep: Mapping[str, Any]) -> str:
    kinds = rep.get("error_kinds")
    if not isinstance(kinds, Mapping) or not kinds:
        return ""
    return "; ".join(f"{kind}: {count}" for kind, count in kinds.items())


def repetitions_table(reps: Sequence[Mapping[str, Any]]) -> str:
    head = "".join(f'<th class="num">{esc(n)}</th>' for n, _ in REP_COLUMNS)
    rows = []
    for i, rep in enumerate(reps):
        cells = [
            f'<td><span class="dot" style="background:{colour(i)}"></span>'
            f"{esc(rep_label(rep, i))}</td>"
        ]
        cells += [_cell(render(rep), True) for _, render in REP_COLUMNS]
        notes = rep.get("notes") if isinstance(rep.get("notes"), list) else []
        remarks = [_error_kinds(rep), *(str(n) for n in notes or ())]
        cells.append(_cell(" | ".join(r for r in remarks if r)))
        rows.append(f'<tr class="rep-{i + 1}">{"".join(cells)}</tr>')
    return (
        f'<table class="reps"><thead><tr><th>repetition</th>{head}<th>errors by kind, '
        f"notes</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _delivery(data: object) -> str:
    if not isinstance(data, Mapping):
        return MISSING
    figures = ("delivered", "duplicates", "lost", "backlog", "unexpected")
    text = ", ".join(f"{name} {fmt(number(data.get(name)))}" for name in figures)
    latency = data.get("latency")
    if isinstance(latency, Mapping):
        text += f", p99 {fmt(number(latency.get('p99_ms')), 1)} ms"
    return text


MQTT_COLUMNS: tuple[tuple[str, Callable[[Mapping[str, Any]], str]], ...] = (
    ("QoS", lambda m: fmt(number(m.get("qos")))),
    ("users", lambda m: fmt(number(m.get("users")))),
    ("published", lambda m: fmt(number(m.get("published")))),
    ("acked", lambda m: fmt(number(m.get("acked")))),
    ("unacked", lambda m: fmt(number(m.get("unacked")))),
    ("tps", lambda m: fmt(number(m.get("tps")), 1)),
    ("observer", lambda m: _delivery(m.get("observer"))),
    ("store", lambda m: _delivery(m.get("store"))),
)


def mqtt_table(reps: Sequence[Mapping[str, Any]]) -> str:
    rows = []
    for i, rep in enumerate(reps):
        data = rep.get("mqtt")
        if isinstance(data, Mapping):
            cells = "".join(
                _cell(render(data), n not in {"observer", "store"}) for n, render in MQTT_COLUMNS
            )
            rows.append(f'<tr class="rep-{i + 1}"><td>{esc(rep_label(rep, i))}</td>{cells}</tr>')
    if not rows:
        return ""
    head = "".join(f"<th>{esc(n)}</th>" for n, _ in MQTT_COLUMNS)
    return (
        f'<h4>MQTT accounting</h4><table class="reps"><thead><tr><th>repetition</th>{head}'
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _toggles(reps: Sequence[Mapping[str, Any]]) -> str:
    """Checkboxes that hide a repetition everywhere in its section (script in the page)."""
    if len(reps) < 2:
        return ""
    boxes = "".join(
        f'<label><input type="checkbox" checked data-rep="rep-{i + 1}">'
        f"{_swatch(colour(i))}{esc(rep_label(rep, i))}</label>"
        for i, rep in enumerate(reps)
    )
    return f'<div class="toggles">Show: {boxes}</div>'


def _target(entry: Entry) -> str:
    target = entry.get("target")
    if not isinstance(target, Mapping):
        return ""
    facts = [
        f"{k}: {v}"
        for k, v in target.items()
        if isinstance(v, str | int | float) and not isinstance(v, bool)
    ]
    parts = target.get("parts")
    if isinstance(parts, Mapping):
        for name, part in parts.items():
            image = part.get("image") if isinstance(part, Mapping) else None
            facts.append(f"{name}: {image}" if image else str(name))
    return f'<p class="facts">{esc(" · ".join(facts))}</p>' if facts else ""


def measurement_section(index: int, entry: Entry, open_charts: bool) -> str:
    reps = repetitions(entry)
    heading = (
        f'<h3><span class="mono">{esc(entry.get("nodeid", MISSING))}</span> '
        f"{verdict_badge(entry)}</h3>"
    )
    what = (
        f'<p class="facts">workload <b>{esc(entry.get("name", MISSING))}</b> · server '
        f"<b>{esc(entry.get('server', MISSING))}</b> · users "
        f"<b>{esc(fmt(number(entry.get('concurrency'))))}</b> · "
        f"{len(reps)} repetition{'' if len(reps) == 1 else 's'}</p>"
    )
    charts = [*load_charts(reps), distribution_chart(reps), *resource_charts(reps)]
    body = (
        f"<details{' open' if open_charts else ''}><summary>Charts</summary>"
        f'{_toggles(reps)}<div class="grid">{"".join(charts)}</div></details>'
    )
    if not reps:
        body = '<p class="nodata">No repetition was recorded.</p>'
    tables = _scroll(repetitions_table(reps)) + _scroll(mqtt_table(reps)) if reps else ""
    return (
        f'<section class="measurement" id="m{index}">{heading}{what}{_target(entry)}'
        f"{_verdict_list(entry)}{tables}{body}</section>"
    )


# ---------------------------------------------------------------- comparisons


def _test_function(entry: Entry) -> str:
    return re.sub(r"\[.*\]$", "", str(entry.get("nodeid", "")))


def _workloads(entries: Sequence[Entry]) -> dict[str, list[Entry]]:
    """Measurements of the same workload (catalogue servers serve the same routes)."""
    groups: dict[str, list[Entry]] = {}
    for entry in entries:
        groups.setdefault(str(entry.get("name", MISSING)), []).append(entry)
    return groups


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


Metric = Callable[[Entry], tuple[float | None, float | None]]  # value, spread


def _mean_sd(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    got = present(values)
    if not got:
        return None, None
    centre = sum(got) / len(got)
    sd = math.sqrt(sum((v - centre) ** 2 for v in got) / (len(got) - 1)) if len(got) > 1 else None
    return centre, sd


def _by_users(group: Sequence[Entry], metric: Metric, title: str, y_label: str) -> str:
    """Grouped bars: one group per user count, one bar per server."""
    names = _series_names(group)
    users = sorted({int(c) for e in group if (c := number(e.get("concurrency"))) is not None})
    servers = list(dict.fromkeys(names))
    series = []
    for s, server in enumerate(servers):
        cells: dict[int, tuple[float | None, float | None]] = {}
        for name, entry in zip(names, group, strict=True):
            c = number(entry.get("concurrency"))
            if name == server and c is not None:
                cells[int(c)] = metric(entry)
        values = [cells.get(u, (None, None)) for u in users]
        series.append(Bars(server, colour(s), [v for v, _ in values], [d for _, d in values]))
    svg = bar_chart(
        [f"{u} users" for u in users],
        series,
        title=title,
        x_label="concurrent users",
        y_label=y_label,
    )
    return figure(title, svg, legend([(b.label, b.colour, "") for b in series]))


def _percentiles(group: Sequence[Entry], title: str) -> str:
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
    svg = bar_chart(
        labels,
        series,
        title=title,
        x_label="server · users",
        y_label="latency (ms, mean of repetitions)",
    )
    return figure(title, svg, legend([(b.label, b.colour, "") for b in series]))


def _rep_metric(get: Callable[[Mapping[str, Any]], float | None]) -> Metric:
    return lambda e: _mean_sd([get(r) for r in repetitions(e)])


def _peak(get: Callable[[Mapping[str, Any]], float | None]) -> Metric:
    return lambda e: (max(present([get(r) for r in repetitions(e)]), default=None), None)


def _mqtt_tps(rep: Mapping[str, Any]) -> float | None:
    data = rep.get("mqtt")
    return number(data.get("tps")) if isinstance(data, Mapping) else None


OPTIONAL_COMPARISONS: tuple[
    tuple[str, str, Callable[[Mapping[str, Any]], float | None], bool], ...
] = (
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


def comparison(workload: str, group: Sequence[Entry]) -> str:
    charts = [
        _by_users(
            group,
            _rep_metric(rep_rps),
            f"{workload}: Requests per second",
            "req/s (mean ± sd of repetitions)",
        ),
        _percentiles(group, f"{workload}: Latency percentiles"),
    ]
    for title, unit, get, peak in OPTIONAL_COMPARISONS:
        if any(get(r) is not None for e in group for r in repetitions(e)):
            metric = _peak(get) if peak else _rep_metric(get)
            charts.append(_by_users(group, metric, f"{workload}: {title}", unit))
    return f'<h3>{esc(workload)}</h3><div class="grid">{"".join(charts)}</div>'


# ---------------------------------------------------------------- page


def _scalar(value: object) -> bool:
    return isinstance(value, str | int | float | bool) or value is None


def _facts(title: str, data: object) -> str:
    if not isinstance(data, Mapping) or not data:
        return ""
    rows = "".join(f"<dt>{esc(k)}</dt><dd>{esc(_plain(v))}</dd>" for k, v in data.items())
    return f'<div class="meta"><h4>{esc(title)}</h4><dl>{rows}</dl></div>'


def _plain(value: object) -> str:
    if isinstance(value, list | tuple):
        return ", ".join(_plain(v) for v in value)
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={_plain(v)}" for k, v in value.items())
    return MISSING if value is None else str(value)


def header(report: Mapping[str, Any], entries: Sequence[Entry]) -> str:
    counts = " ".join(
        f'<span class="count">{n} {esc(state)}</span>' for state, n in status_counts(entries)
    )
    run = {
        k: v for k, v in report.items() if k not in {"tests", "config", "machine"} and _scalar(v)
    }
    return (
        f'<header><h1>pytest-webperf report</h1><p class="counts">{len(entries)} '
        f"measurement{'' if len(entries) == 1 else 's'} {counts}</p>"
        f'<div class="metas">{_facts("Run", run)}{_facts("Config", report.get("config"))}'
        f"{_facts('Machine', report.get('machine'))}</div></header>"
    )


def render_body(report: Mapping[str, Any]) -> str:
    entries = tests(report)
    parts = [header(report, entries)]
    if not entries:
        return "".join([*parts, '<p class="nodata">Nothing was measured.</p>'])
    parts.append(f"<h2>Summary</h2>{summary_table(entries)}")
    groups = _workloads(entries)
    parts.append(
        "<h2>Comparison</h2>" + "".join(comparison(name, group) for name, group in groups.items())
    )
    open_charts = len(entries) <= OPEN_SECTIONS_UP_TO
    parts.append(
        "<h2>Measurements</h2>"
        + "".join(measurement_section(i, e, open_charts) for i, e in enumerate(entries))
    )
    return "".join(parts)


def _template() -> Template:
    text = resources.files("pytest_webperf.report").joinpath("report.html").read_text("utf-8")
    return Template(text)


def render_html(report: Mapping[str, Any]) -> str:
    """The whole page: self-contained, every text from the report escaped."""
    created = report.get("created")
    title = "pytest-webperf report" + (f" {created}" if created else "")
    return _template().substitute(title=esc(title), body=render_body(report))


def write_html(path: Path, report: Mapping[str, Any]) -> None:
    """Write atomically: a reader never sees half a page."""
    write_text_atomic(path, render_html(report))
