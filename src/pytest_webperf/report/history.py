"""A history of verdicts: ``--webperf-history=PATH`` and ``webperf history PATH``.

Every verdict of a run (A/B or against a stored baseline) is one JSON line appended to
PATH (``fileio.append_lines``: never rewritten; a torn last line from a crash is
skipped when read): the test, the measurement, the commit measured, its base, the
machine id, the status, and each check's values, change and interval. ``webperf
history PATH`` groups the lines into series (test, measurement, metric, machine: values
of different machines are never mixed), draws each (HTML, the report's chart kit) and
looks for change points in it (``changepoint``): a level that moved and stayed moved,
whether or not any single verdict failed.
"""

from __future__ import annotations

import datetime as dt
import html
import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from markupsafe import Markup

from pytest_webperf.fileio import append_lines, write_text_atomic
from pytest_webperf.models.measurement import Measurement
from pytest_webperf.report.html.svg import Line, index_axis, line_chart
from pytest_webperf.stats.changepoint import ChangePoint, detect

SCHEMA = 1
CHECK_FIELDS: tuple[str, ...] = ("check", "metric", "endpoint", "outcome", "current")
CHECK_FIELDS += ("baseline", "change", "low", "high", "threshold")


def record(
    measurement: Measurement,
    *,
    machine_id: str,
    git: Mapping[str, Any] | None,
    when: dt.datetime | None = None,
) -> dict[str, Any] | None:
    """The history line of one judged measurement (None: it has no verdict)."""
    verdict = measurement.verdict
    if verdict is None:
        return None
    against = measurement.against
    base: dict[str, Any] = (
        {"ref": against.get("ref"), "commit": against.get("commit")}
        if against is not None
        else {"stored": "baseline"}
    )
    return {
        "schema": SCHEMA,
        "time": (when or dt.datetime.now(dt.timezone.utc)).isoformat(timespec="seconds"),
        "test": measurement.nodeid,
        "name": measurement.name,
        "server": measurement.server,
        "commit": (git or {}).get("commit"),
        "dirty": (git or {}).get("dirty"),
        "base": base,
        "machine_id": machine_id,
        "status": verdict.status,
        "checks": [
            {k: c.get(k) for k in CHECK_FIELDS if c.get(k) is not None} for c in verdict.checks
        ],
    }


def append(
    path: Path,
    measurements: Sequence[Measurement],
    machine_of: Callable[[Measurement], str],
    git: Mapping[str, Any] | None,
) -> int:
    """Append the verdicts of ``measurements`` to ``path``; how many were written."""
    lines = []
    for m in measurements:
        entry = record(m, machine_id=machine_of(m), git=git)
        if entry is not None:
            lines.append(json.dumps(entry, separators=(",", ":")))
    append_lines(path, lines)
    return len(lines)


def read(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The records of a history file, oldest first, and how many lines were unreadable."""
    records, broken = [], 0
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            broken += 1
            continue
        if isinstance(entry, dict) and "test" in entry:
            records.append(entry)
        else:
            broken += 1
    return records, broken


@dataclass(frozen=True)
class Point:
    value: float
    commit: str | None
    time: str
    outcome: str


@dataclass(frozen=True)
class Series:
    """One metric of one measurement on one machine, over the history."""

    test: str
    name: str
    metric: str
    machine_id: str
    points: tuple[Point, ...]

    @property
    def title(self) -> str:
        return f"{self.test} [{self.name}] {self.metric} on {self.machine_id}"

    def failed_from(self, index: int) -> bool:
        """Whether a verdict at or after ``index`` failed this metric."""
        return any(p.outcome == "fail" for p in self.points[index:])


def series_of(records: Sequence[Mapping[str, Any]]) -> list[Series]:
    """Every relative check's measured value (``current``) grouped into series."""
    found: dict[tuple[str, str, str, str], list[Point]] = {}
    for entry in records:
        for check in entry.get("checks", ()):
            value = check.get("current")
            if check.get("change") is None or not isinstance(value, (int, float)):
                continue
            metric = str(check.get("metric"))
            if check.get("endpoint"):
                metric = f"{metric}[{check['endpoint']}]"
            key = (str(entry["test"]), str(entry.get("name")), metric, str(entry.get("machine_id")))
            point = Point(
                float(value), entry.get("commit"), str(entry.get("time")), str(check.get("outcome"))
            )
            found.setdefault(key, []).append(point)
    return [Series(*key, tuple(points)) for key, points in found.items()]


@dataclass(frozen=True)
class Analysis:
    series: Series
    changes: tuple[ChangePoint, ...]


def analyse(records: Sequence[Mapping[str, Any]]) -> list[Analysis]:
    return [Analysis(s, tuple(detect([p.value for p in s.points]))) for s in series_of(records)]


def _short(commit: str | None) -> str:
    return commit[:10] if commit else "-"


def describe(analysis: Analysis) -> list[str]:
    """One line per series, and one per change point found in it."""
    s = analysis.series
    found = analysis.changes
    head = f"{s.title}: {len(s.points)} verdict(s), " + (
        f"{len(found)} change point(s)" if found else "no change point"
    )
    lines = [head]
    for cp in found:
        at = s.points[cp.index]
        failed = s.failed_from(cp.index)
        lines.append(
            f"  change point at verdict {cp.index + 1} (commit {_short(at.commit)}, {at.time}): "
            f"{cp.before:.4g} -> {cp.after:.4g} ({cp.step * 100:+.1f}%, p={cp.p:.1g})"
            + ("" if failed else "; no single verdict failed: a drift")
        )
    return lines


def _figure(analysis: Analysis) -> Markup:
    s = analysis.series
    values = [p.value for p in s.points]
    lines = [
        Line(
            "verdicts",
            [(i + 1.0, v) for i, v in enumerate(values)],
            "#0072B2",
            markers=True,
            tips=[
                f"{i + 1}: {_short(p.commit)} {p.time} {p.value:.4g} ({p.outcome})"
                for i, p in enumerate(s.points)
            ],
        )
    ]
    bounds = [0, *(cp.index for cp in analysis.changes), len(values)]
    levels = [cp.before for cp in analysis.changes] + (
        [analysis.changes[-1].after] if analysis.changes else []
    )
    for (start, end), level in zip(itertools.pairwise(bounds), levels, strict=False):
        lines.append(Line("level", [(start + 0.5, level), (end + 0.5, level)], "#D55E00", "4 3"))
    return line_chart(
        lines,
        title=s.title,
        x_label="verdict (oldest first)",
        y_label=s.metric,
        x_axis=index_axis(len(values)),
        zero=False,
    )


def write_html(path: Path, source: Path, analyses: Sequence[Analysis]) -> None:
    """The trend of every series, its change points drawn as levels, on one page."""
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>webperf history: {html.escape(source.name)}</title>",
        "<style>body{font-family:sans-serif;max-width:60em;margin:1em auto}"
        "svg{width:100%;height:auto}.lines path{fill:none;stroke-width:1.5}"
        ".grid line{stroke:#ddd}text{font-size:11px}</style></head><body>",
        f"<h1>webperf history: {html.escape(str(source))}</h1>",
    ]
    for analysis in analyses:
        parts.append(f"<h2>{html.escape(analysis.series.title)}</h2>")
        parts += [f"<p>{html.escape(line.strip())}</p>" for line in describe(analysis)[1:]]
        parts.append(str(_figure(analysis)))
    parts.append("</body></html>")
    write_text_atomic(path, "\n".join(parts) + "\n")
