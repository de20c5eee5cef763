"""The terminal summary: one row per measurement."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

from pytest_webperf.models import Measurement

Column = tuple[str, Callable[[Measurement], str]]


def _spread(values: Sequence[float]) -> str:
    if len(values) < 2:
        return f"{values[0]:,.0f}" if values else "-"
    return f"{statistics.fmean(values):,.0f} ±{statistics.stdev(values):,.0f}"


def _ms(m: Measurement, field: str) -> str:
    return f"{m.latency_ms(field):.2f}" if m.runs else "-"


def _cpu(m: Measurement) -> str:
    values = [s.cpu_percent for r in m.runs for s in r.resources if s.t >= 0]
    return f"{statistics.fmean(values):.0f}" if values else "-"


def _rss(m: Measurement) -> str:
    values = [s.rss_mb for r in m.runs for s in r.resources]
    return f"{max(values):.0f}" if values else "-"


def _cpu_per_req(m: Measurement) -> str:
    values = [v for r in m.runs if (v := r.cpu_per_req_us) is not None]
    return f"{statistics.fmean(values):.0f}" if values else "-"


COLUMNS: tuple[Column, ...] = (
    ("test", lambda m: m.nodeid.split("::")[-1]),
    ("workload", lambda m: m.name),
    ("server", lambda m: m.server),
    ("users", lambda m: str(m.concurrency)),
    ("req/s", lambda m: _spread([r.rps for r in m.runs])),
    ("requests", lambda m: f"{m.requests:,}"),
    ("errors", lambda m: f"{m.errors:,}"),
    ("timeouts", lambda m: f"{m.timeouts:,}"),
    ("p50 ms", lambda m: _ms(m, "p50_ms")),
    ("p95 ms", lambda m: _ms(m, "p95_ms")),
    ("p99 ms", lambda m: _ms(m, "p99_ms")),
    ("cpu %", _cpu),
    ("rss MB", _rss),
    ("cpu/req us", _cpu_per_req),
    ("verdict", lambda m: m.verdict.status if m.verdict else "-"),
)
RIGHT = {"users", "req/s", "requests", "errors", "timeouts", "p50 ms", "p95 ms", "p99 ms",
         "cpu %", "rss MB", "cpu/req us"}


def table(measurements: Sequence[Measurement]) -> list[str]:
    """Rows of aligned text; ``[]`` when nothing was measured."""
    if not measurements:
        return []
    rows = [[name for name, _ in COLUMNS]]
    rows += [[render(m) for _, render in COLUMNS] for m in measurements]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]

    def line(row: list[str]) -> str:
        cells = [
            cell.rjust(w) if COLUMNS[i][0] in RIGHT else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        return "  ".join(cells).rstrip()

    return [line(rows[0]), "  ".join("-" * w for w in widths), *(line(r) for r in rows[1:])]


def verdict_lines(measurements: Sequence[Measurement]) -> list[str]:
    """The reasons and notes of every verdict, for under the table."""
    lines = []
    for m in measurements:
        if m.verdict is None:
            continue
        for text in (*m.verdict.reasons, *m.verdict.notes):
            lines.append(f"{m.nodeid} [{m.name}]: {text}")
    return lines
