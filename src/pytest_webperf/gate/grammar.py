"""The check grammar of ``--webperf-compare-fail``, parsed into ``Check`` objects.

The grammar (``METRIC:N%``, ``METRIC<V``, ``COUNT:N``, ``METRIC[ENDPOINT]...``) is
written once, in ``docs/reference/checks.md``; this module parses it, and its one-line
refusals (``GRAMMAR``, ``ENDPOINT_NAMES``) say it again to the user who got it wrong.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from pytest_webperf.errors import OptionError
from pytest_webperf.gate.metrics import BY_SPELLING, METRICS

Op = Literal["<", "<=", ">", ">="]


def num(value: float) -> str:
    """A number as the parser reads it back exactly."""
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)


def _finite(value: float, metric: str) -> float:
    if metric not in METRICS:
        raise OptionError(f"unknown metric {metric!r}: {GRAMMAR}")
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise OptionError(f"the number in a {metric} check must be finite and >= 0, not {value}")
    return value


def _endpoint(endpoint: str | None, metric: str) -> str | None:
    """An endpoint name as a check holds it (stripped), or a one-line refusal."""
    if endpoint is None:
        return None
    name = str(endpoint).strip()
    if not name or any(c in name for c in "[],") or not name.isprintable():
        raise OptionError(f"bad endpoint {endpoint!r} in a {metric} check: {ENDPOINT_NAMES}")
    found = METRICS.get(metric)
    if found is not None and found.per_endpoint is None:
        raise OptionError(
            f"{metric} cannot be checked per endpoint ({metric}[{name}]): "
            f"{found.whole_run_only}; check it unqualified ({metric}) for the whole run"
        )
    return name


def _bracket(endpoint: str | None) -> str:
    return "" if endpoint is None else f"[{endpoint}]"


@dataclass(frozen=True)
class RelativeCheck:
    """Fail when ``metric`` (of ``endpoint`` alone, if given) got worse than the baseline
    by more than ``percent`` %."""

    metric: str
    percent: float
    endpoint: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "percent", _finite(self.percent, str(self.metric)))
        object.__setattr__(self, "endpoint", _endpoint(self.endpoint, str(self.metric)))

    def __str__(self) -> str:
        return f"{self.metric}{_bracket(self.endpoint)}:{num(self.percent)}%"


@dataclass(frozen=True)
class AbsoluteCheck:
    """Fail when the current value of ``metric`` (of ``endpoint`` alone, if given) is
    not ``op limit``."""

    metric: str
    op: Op
    limit: float
    endpoint: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "limit", _finite(self.limit, str(self.metric)))
        object.__setattr__(self, "endpoint", _endpoint(self.endpoint, str(self.metric)))

    def __str__(self) -> str:
        name = METRICS[self.metric].limit_name
        return f"{name}{_bracket(self.endpoint)}{self.op}{num(self.limit)}"

    def holds(self, value: float) -> bool:
        return {
            "<": value < self.limit,
            "<=": value <= self.limit,
            ">": value > self.limit,
            ">=": value >= self.limit,
        }[self.op]


Check = RelativeCheck | AbsoluteCheck

ENDPOINT_NAMES = (
    "an endpoint is named in brackets after the metric, METRIC[ENDPOINT] (p95[create]:10%, "
    "error_rate[/login]<0.01); ENDPOINT is its name (the path unless named) and may hold "
    "any printable character but [, ] and a comma; brackets do not nest"
)
GRAMMAR = (
    "expected a comma-separated list of METRIC:N% (worse than the baseline by more than "
    "N %, e.g. rps:5%), METRIC<V / METRIC<=V / METRIC>V / METRIC>=V (a limit on this run, "
    "e.g. p99_ms<500) or COUNT:N (at most N errors/timeouts/lost/dup), each for the whole "
    "run or, as METRIC[ENDPOINT], for one endpoint of a request mix (p95[create]:10%); "
    "metrics: " + ", ".join(sorted(BY_SPELLING))
)
_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_CHECK = re.compile(
    rf"(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*(?:\[(?P<endpoint>[^\[\],]*)\]\s*)?"
    rf"(?:(?P<op><=|>=|<|>)\s*(?P<limit>{_NUMBER})"
    rf"|:\s*(?P<sign>[+-]?)\s*(?P<num>{_NUMBER})\s*(?P<pct>%?))"
)


def parse_check(text: str) -> Check:
    """One check from its text; raises OptionError naming the bad part."""
    part = text.strip()
    match = _CHECK.fullmatch(part)
    if match is None:
        why = ENDPOINT_NAMES if "[" in part or "]" in part else GRAMMAR
        raise OptionError(f"bad check {part!r} in --webperf-compare-fail: {why}")
    metric = BY_SPELLING.get(match["name"].lower())
    if metric is None:
        raise OptionError(f"unknown metric {match['name']!r} in check {part!r}: {GRAMMAR}")
    endpoint = match["endpoint"]
    if match["op"]:
        op: Op = match["op"]  # type: ignore[assignment]
        return AbsoluteCheck(metric.name, op, float(match["limit"]), endpoint)
    value = float(match["num"])
    at = _bracket(None if endpoint is None else endpoint.strip())
    if not match["pct"]:
        if metric.count and value.is_integer():
            return AbsoluteCheck(metric.name, "<=", value, endpoint)
        raise OptionError(
            f"check {part!r} needs a unit: write {metric.name}{at}:{match['num']}% for a "
            f"change relative to the baseline, or {metric.limit_name}{at}<{match['num']} for a "
            "limit "
            f"({GRAMMAR})"
        )
    sign = match["sign"]
    if sign and (sign == "+") != (metric.bad == "up"):
        worse = "rises" if metric.bad == "up" else "falls"
        raise OptionError(
            f"check {part!r} points the wrong way: {metric.name} is worse when it {worse}; "
            f"write {metric.name}{at}:{match['num']}% (the direction is known per metric)"
        )
    return RelativeCheck(metric.name, value, endpoint)


def parse_checks(spec: str) -> tuple[Check, ...]:
    """All checks of a ``--webperf-compare-fail`` value; '' or 'none' means no check."""
    if spec.strip().lower() in ("", "none"):
        return ()
    checks: list[Check] = []
    for part in spec.split(","):
        if not part.strip():
            raise OptionError(f"empty check in --webperf-compare-fail={spec!r}: {GRAMMAR}")
        check = parse_check(part)
        if check in checks:
            raise OptionError(f"check {str(check)!r} given twice in {spec!r}")
        checks.append(check)
    return tuple(checks)


def format_checks(checks: Iterable[Check]) -> str:
    return ",".join(str(c) for c in checks) or "none"


# A 10 % slower server shows as -10 % rps when the server is the bottleneck, and as
# +10 % CPU per request whether or not it is (service demand does not depend on who
# saturates). Latency percentiles are far noisier than means, hence 20 %. Errors are
# compared as a rate: one stray timeout passes, a 1.5x rise that is credible fails.
DEFAULT_CHECKS: tuple[Check, ...] = parse_checks("rps:5%,cpu_per_req:5%,p95:20%,errors:50%")
# MQTT: QoS 2 promises every message exactly once, so a loss or a duplicate fails
# whatever the baseline says; throughput (seed 002's tps), the server's CPU per
# message and the end-to-end p99 are compared with the baseline.
DEFAULT_MQTT_CHECKS: tuple[Check, ...] = parse_checks(
    "tps:5%,cpu_per_req:5%,e2e_p99:20%,lost:0,dup:0"
)
# Counted (count=True): a deterministic server repeats its instructions to 0.01 %, so 1 %
# is seen; allocations and system calls are whole numbers per request, so one more is
# far beyond their thresholds; errors as for HTTP.
DEFAULT_COUNT_CHECKS: tuple[Check, ...] = parse_checks(
    "instructions_per_req:1%,allocs_per_req:1%,syscalls_per_req:5%,errors:50%"
)
# WebSocket and SSE, by what the run did: every message accounted (a loss fails whatever
# the baseline says), the round trip (echo), the delay to each receipt (fan-out), time to
# the first event and the gaps (SSE), and the memory an open connection costs the server
# (an idle run's main figure).
DEFAULT_STREAM_CHECKS: dict[str, tuple[Check, ...]] = {
    "echo": parse_checks("rps:5%,cpu_per_req:5%,ws_rtt_p99:20%,errors:50%,ws_lost:0"),
    "fanout": parse_checks("rps:5%,cpu_per_req:5%,ws_delay_p99:20%,errors:50%,ws_lost:0,ws_dup:0"),
    "idle": parse_checks("mem_per_conn:10%,ws_rtt_p99:20%,errors:50%"),
    "sse": parse_checks("ttfe_p95:20%,sse_gap_p99:20%,cpu_per_req:5%,errors:50%,sse_lost:0"),
}
