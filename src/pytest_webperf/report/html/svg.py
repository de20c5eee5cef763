"""A small chart kit: axes with round ticks, line, bar and interval charts as inline SVG.

Pure SVG, no script and nothing fetched, so a page works offline. It knows nothing of
reports: callers hand it numbers and labels. Charts come back as ``Markup`` (every text
in them escaped here), so a Jinja2 template inserts them as they are.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

# Okabe-Ito: distinguishable with the common colour-vision deficiencies (yellow left out:
# too pale on white). Repetition n and server n always get the same colour on a page.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#999999")


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


def index_axis(count: int) -> Axis:
    """An axis for the items 1..count (pairs, repetitions): one tick per item."""
    ticks = tuple(float(i) for i in range(1, max(count, 1) + 1))
    return Axis(0.5, len(ticks) + 0.5, ticks, tuple(str(int(t)) for t in ticks))


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


# ---------------------------------------------------------------- series


@dataclass(frozen=True)
class Line:
    """One line of a chart; ``None`` in ``points`` is a gap (a second with no data)."""

    label: str
    points: Sequence[tuple[float, float | None]]
    colour: str
    dash: str = ""
    css: str = ""  # e.g. "rep-2", so the repetition toggles can hide it
    markers: bool = False  # a dot on every point (few points: pairs, repetitions)
    tips: Sequence[str] = ()  # with markers: a tooltip per point (e.g. a save's commit)


@dataclass(frozen=True)
class Bars:
    """One series of a grouped bar chart: a value (and optional ± spread) per group."""

    label: str
    colour: str
    values: Sequence[float | None]
    spreads: Sequence[float | None] = ()


@dataclass(frozen=True)
class Interval:
    """A relative change with its confidence interval and the threshold it is held to."""

    label: str
    change: float | None
    low: float | None = None
    high: float | None = None
    threshold: float | None = None  # signed: where "worse" starts (e.g. -0.05 for rps)
    colour: str = PALETTE[0]


# ---------------------------------------------------------------- drawing


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
            f'dominant-baseline="middle">{escape(label)}</text>'
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
                f'text-anchor="middle">{escape(label)}</text>'
            )
    parts.append(
        f'<line class="axis" x1="{_n(box.left)}" x2="{_n(box.left + box.width)}" '
        f'y1="{bottom}" y2="{bottom}"/>'
    )
    parts.append(
        f'<text class="label" x="{_n(box.left + box.width / 2)}" '
        f'y="{_n(box.top + box.height + 43)}" text-anchor="middle">{escape(x_label)}</text>'
    )
    middle = _n(box.top + box.height / 2)
    parts.append(
        f'<text class="label" x="12" y="{middle}" text-anchor="middle" '
        f'transform="rotate(-90 12 {middle})">{escape(y_label)}</text>'
    )
    return parts


def _svg(parts: Sequence[str], title: str) -> Markup:
    return Markup(
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(title)}"><title>{escape(title)}</title>{"".join(parts)}</svg>'
    )


def _path(line: Line, box: Box, x: Axis, y: Axis) -> str:
    """One ``M``/``L`` path; a gap starts a new sub-path. Round caps draw a lone point
    (a sub-path of length zero) as a dot."""
    commands, dots, pen_down = [], [], False
    for i, (px, py) in enumerate(line.points):
        if py is None or not (math.isfinite(px) and math.isfinite(py)):
            pen_down = False
            continue
        cx, cy = _n(box.x(x, px)), _n(box.y(y, py))
        commands.append(f"{'L' if pen_down else 'M'}{cx} {cy}")
        tip = f"<title>{escape(line.tips[i])}</title>" if i < len(line.tips) else ""
        dots.append(f'<circle cx="{cx}" cy="{cy}" r="3" fill="{line.colour}">{tip}</circle>')
        pen_down = True
    if not commands:
        return ""
    dash = f' stroke-dasharray="{line.dash}"' if line.dash else ""
    css = f' class="{escape(line.css)}"' if line.css else ""
    path = (
        f'<path{css} d="{"".join(commands)}" stroke="{line.colour}"{dash}>'
        f"<title>{escape(line.label)}</title></path>"
    )
    return path + "".join(dots) if line.markers else path


def values_of(lines: Sequence[Line], index: int) -> list[float]:
    """Every x (index 0) or y (index 1) that is drawn."""
    return [v for line in lines for p in line.points if (v := p[index]) is not None]


def _no_data() -> str:
    return (
        f'<text class="nodata" x="{_n(BOX.left + BOX.width / 2)}" '
        f'y="{_n(BOX.top + BOX.height / 2)}" text-anchor="middle">no data</text>'
    )


def line_chart(
    lines: Sequence[Line],
    *,
    title: str,
    x_label: str,
    y_label: str,
    x_axis: Axis | None = None,
    zero: bool = True,
) -> Markup:
    """Lines over a shared x axis; a grey band marks negative x (the warm-up). With
    ``zero=False`` the y axis fits the data, so a difference of a few % shows."""
    x = x_axis or nice_axis(values_of(lines, 0))
    y = nice_axis(values_of(lines, 1), zero=zero)
    parts = _frame(BOX, x, y, x_label, y_label)
    if x.lo < 0 < x.hi:
        left, origin = BOX.x(x, x.lo), BOX.x(x, 0.0)
        parts.insert(
            0,
            f'<rect class="warmup" x="{_n(left)}" y="{_n(BOX.top)}" '
            f'width="{_n(origin - left)}" height="{_n(BOX.height)}">'
            f"<title>warm-up (not counted)</title></rect>",
        )
    drawn = [p for line in lines if (p := _path(line, BOX, x, y))]
    parts.append(f'<g class="lines">{"".join(drawn)}</g>' if drawn else _no_data())
    return _svg(parts, title)


def _short(text: str, limit: int = 16) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _group_label(group: str, centre: float, chars: int) -> str:
    """A group's name under its bars: one line per ``\n``, each cut to the slot's width."""
    lines = "".join(
        f'<tspan x="{_n(centre)}" dy="{0 if i == 0 else 12}">'
        f"{escape(_short(line, max(chars, 4)))}</tspan>"
        for i, line in enumerate(group.split("\n"))
    )
    return (
        f'<text class="tick" x="{_n(centre)}" y="{_n(BOX.top + BOX.height + 15)}" '
        f'text-anchor="middle"><title>{escape(" ".join(group.split()))}</title>{lines}'
        f"</text>"
    )


def _bar(
    left: float,
    width: float,
    y: Axis,
    value: float,
    *,
    spread: float | None,
    label: str,
    fill: str,
    text: str = "",
) -> str:
    """A bar from 0 to ``value`` (up or down), with a ± ``spread`` whisker; ``text`` is
    its tooltip (default: the label and the value)."""
    top, base = BOX.y(y, max(value, 0.0)), BOX.y(y, min(value, 0.0))
    text = text or f"{label}: {value:,.2f}" + (f" ± {spread:,.2f}" if spread else "")
    out = (
        f'<rect x="{_n(left)}" y="{_n(top)}" width="{_n(max(width - 1, 0.5))}" '
        f'height="{_n(max(base - top, 0.0))}" fill="{fill}"><title>{escape(text)}</title></rect>'
    )
    if spread and math.isfinite(spread):
        floor = min(y.lo, 0.0) if value < 0 else 0.0
        out += _whisker(left + width / 2, width / 2, y, max(value - spread, floor), value + spread)
    return out


def _whisker(centre: float, cap: float, y: Axis, low: float, high: float) -> str:
    """A vertical line from ``low`` to ``high`` with a cap at both ends."""
    top, bottom = _n(BOX.y(y, high)), _n(BOX.y(y, low))
    left, right = _n(centre - cap / 2), _n(centre + cap / 2)
    return (
        f'<path class="whisker" d="M{_n(centre)} {bottom}V{top}M{left} {top}H{right}'
        f'M{left} {bottom}H{right}"/>'
    )


def bar_chart(
    groups: Sequence[str], series: Sequence[Bars], *, title: str, x_label: str, y_label: str
) -> Markup:
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


def _percent(fraction: float | None) -> float | None:
    return 100 * fraction if fraction is not None and math.isfinite(fraction) else None


def change_chart(items: Sequence[Interval], *, title: str, y_label: str) -> Markup:
    """One bar per change (in %) from 0, its interval as a whisker, and a dashed red line
    where its threshold lies: a whisker clear of the line is a decided check."""
    every = [_percent(v) for i in items for v in (i.change, i.low, i.high, i.threshold)]
    y = nice_axis([v for v in every if v is not None])
    parts = _frame(BOX, None, y, "", y_label)
    origin = _n(BOX.y(y, 0.0))
    parts.append(
        f'<line class="axis" x1="{_n(BOX.left)}" x2="{_n(BOX.left + BOX.width)}" '
        f'y1="{origin}" y2="{origin}"/>'
    )
    slot = BOX.width / max(len(items), 1)
    drawn = 0
    for g, item in enumerate(items):
        centre = BOX.left + slot * (g + 0.5)
        parts.append(_group_label(item.label, centre, int(slot / 6.5)))
        parts.append(_change(item, centre, slot, y))
        drawn += _percent(item.change) is not None
    if not drawn:
        parts.append(_no_data())
    return _svg(parts, title)


def _change(item: Interval, centre: float, slot: float, y: Axis) -> str:
    """One check of a change chart: threshold line, bar, interval whisker."""
    change, low, high = _percent(item.change), _percent(item.low), _percent(item.high)
    threshold = _percent(item.threshold)
    out = ""
    if threshold is not None:
        ty = _n(BOX.y(y, threshold))
        out += (
            f'<line class="threshold" x1="{_n(centre - slot * 0.45)}" '
            f'x2="{_n(centre + slot * 0.45)}" y1="{ty}" y2="{ty}">'
            f"<title>threshold {threshold:+.1f} %</title></line>"
        )
    if change is None:
        return out
    bar = min(slot * 0.5, 48.0)
    interval = f" [{low:+.1f}, {high:+.1f}]" if low is not None and high is not None else ""
    text = f"{item.label} {change:+.1f} %{interval}"
    out += _bar(
        centre - bar / 2, bar, y, change, spread=None, label=item.label, fill=item.colour, text=text
    )
    if low is not None and high is not None:
        out += _whisker(centre, bar / 2, y, low, high)
    return out
