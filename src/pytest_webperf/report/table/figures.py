"""The figures of a report entry, read defensively (a missing or odd value is ``-``), and
their formatting: the cells every table is made of.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

Entry = Mapping[str, Any]  # one item of the report's "tests"
Column = tuple[str, Callable[[Entry], str]]

MISSING = "-"
SHORT = "short count:"  # a counted repetition's note (results.short_count), shown on its line


def number(value: object) -> float | None:
    """A finite number from the report, or None (missing, null, bool, NaN, text)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def repetitions(entry: Entry) -> list[Mapping[str, Any]]:
    reps = entry.get("repetitions")
    return [r for r in reps if isinstance(r, Mapping)] if isinstance(reps, list) else []


def is_counted(entry: Entry) -> bool:
    """A counted measurement (``count=True``): its repetitions' timed figures (rates,
    latency, CPU, memory) were taken under Valgrind, not the server's own."""
    return any(isinstance(r.get("counts"), Mapping) for r in repetitions(entry))


def rep_rps(rep: Mapping[str, Any]) -> float | None:
    rps = number(rep.get("rps"))
    if rps is not None:
        return rps
    requests, duration = number(rep.get("requests")), number(rep.get("duration_s"))
    return requests / duration if requests is not None and duration else None


def rep_latency(rep: Mapping[str, Any], field: str) -> float | None:
    """A latency figure in ms; None when no request completed (a 0 ms latency would lie)."""
    if number(rep.get("requests")) == 0:
        return None
    value = number(rep.get(field))
    latency = rep.get("latency")
    if value is None and isinstance(latency, Mapping):
        value = number(latency.get(field))
    return value


def rep_nested(rep: Mapping[str, Any], key: str, field: str) -> float | None:
    """``rep[key][field]`` (e.g. cpu_percent.mean), None when absent."""
    inner = rep.get(key)
    return number(inner.get(field)) if isinstance(inner, Mapping) else None


def present(values: Sequence[float | None]) -> list[float]:
    return [v for v in values if v is not None]


def fmt(value: float | None, decimals: int = 0) -> str:
    return MISSING if value is None else f"{value:,.{decimals}f}"


def mean(values: Sequence[float | None]) -> float | None:
    got = present(values)
    return statistics.fmean(got) if got else None


def mean_sd(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation (None for fewer than two values)."""
    got = present(values)
    if not got:
        return None, None
    return statistics.fmean(got), (statistics.stdev(got) if len(got) > 1 else None)


def spread(values: Sequence[float | None]) -> str:
    """Mean ± sample standard deviation (the mean alone for one repetition)."""
    centre, sd = mean_sd(values)
    if sd is None:
        return fmt(centre)
    return f"{centre:,.0f} ±{sd:,.0f}"
