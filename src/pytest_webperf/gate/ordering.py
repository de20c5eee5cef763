"""Whether one server is faster than another, judged from repetitions: ``holds``,
``reversed`` or ``not separated``, with the ratio and its interval.

A study says "A beats B". Here that claim is a ratio of A's figure to B's (throughput,
or the study's metric), estimated with the gate's own statistics
(``ratio.ratio_change``: a Welch t-interval of the log ratio, the repetitions or, when
the target was restarted, its process instances as the units of evidence, the
per-second series as a floor on the spread). The ordering ``holds`` when the whole
interval is above ``MARGIN`` (1.05), is ``reversed`` when it is below 1 / ``MARGIN``, and
is ``not separated`` otherwise: a difference smaller than two instances of one server
differ by here (several per cent, ``webperf noise``) is not an ordering of servers, even
when the interval is tight (two copies of one server were seen 1 % apart, CI
0.98..0.99). Three things are never ranked, whatever their figures say:

* a side with fewer than two units of evidence: one repetition has no spread, so no
  difference between two of them can be told from noise;
* a side where the generator, not the server, was the bottleneck (``generator-bound``):
  its figure is the generator's;
* (said by the caller) a paced load that every server kept up with.

A comparison also says what the machine did to it: with server and generator on the
same cores, each request's generator CPU comes out of the cores the server could have
used, so throughput measures the server's and the generator's cost per request together
(a server twice as cheap per request shows less than twice the throughput), and a short
counted run (``requests=N``) measures connection set-up more than the server.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_webperf.gate.decide import GENERATOR_BOUND
from pytest_webperf.models.workload import MIN_COUNTED_S
from pytest_webperf.stats import ratio as stats

HOLDS, REVERSED, NOT_SEPARATED, NOT_RANKED = "holds", "reversed", "not separated", "not ranked"
STATUSES = (HOLDS, REVERSED, NOT_SEPARATED, NOT_RANKED)
CONFIDENCE = 0.95
MIN_UNITS = 2  # units of evidence per side before anything is ranked
MARGIN = 1.05  # the smallest ratio that orders two servers (the whole interval beyond it)
POWER = 0.8  # a pair not separated says what it would have caught 4 times in 5


@dataclass(frozen=True)
class Side:
    """One server's repetitions of one workload: the figure compared, per repetition."""

    name: str
    values: tuple[float, ...]
    instances: tuple[int | None, ...] = ()  # process instance per repetition (None: unknown)
    series: tuple[tuple[float, ...], ...] = ()  # per-second throughput of each repetition
    bound: int = 0  # repetitions that were generator-bound

    @property
    def units(self) -> int:
        """Units of evidence: process instances when the target was restarted, else runs."""
        if len(self.values) < 2:
            return len(self.values)
        _, units = stats.unit_spread(self.values, self.series, self._instances())
        return units

    def _instances(self) -> list[int | None] | None:
        return list(self.instances) if len(self.instances) == len(self.values) else None


@dataclass(frozen=True)
class Ordering:
    """The study's ``first > second`` judged here."""

    first: str  # the server the study ranked higher
    second: str
    ratio: float | None  # mean(first) / mean(second); None when a mean is not positive
    low: float | None  # the ratio's interval at ``confidence`` (None: no interval)
    high: float | None
    status: str  # one of STATUSES
    why: str = ""  # why it is not ranked or not separated, and what would fix it
    confidence: float = CONFIDENCE
    bracket: bool = False  # low..high: two capacity searches' brackets, not a CI

    def to_dict(self) -> dict[str, Any]:
        return {
            "first": self.first,
            "second": self.second,
            "ratio": self.ratio,
            "low": self.low,
            "high": self.high,
            "confidence": self.confidence,
            "status": self.status,
            "why": self.why,
            **({"bracket": True} if self.bracket else {}),
        }

    def text(self) -> str:
        """``nginx-cache/varnish 1.09x, 95% CI 0.97..1.22: not separated``."""
        ratio = "-" if self.ratio is None else f"{self.ratio:.2f}x"
        interval = "search brackets" if self.bracket else f"{self.confidence:.0%} CI"
        ci = (
            f", {interval} {self.low:.2f}..{self.high:.2f}"
            if self.low is not None and self.high is not None
            else ""
        )
        why = f" ({self.why})" if self.why else ""
        return f"{self.first}/{self.second} {ratio}{ci}: {self.status}{why}"


def _not_ranked_bound(first: Side, second: Side) -> str:
    named = [
        f"{s.name} was generator-bound in {s.bound} of {len(s.values)} repetitions"
        for s in (first, second)
        if s.bound
    ]
    advice = GENERATOR_BOUND.format(checks="the comparison").removeprefix("generator-bound: ")
    return (
        "; ".join(named) + f": {advice}, or, on 4 cores or more, pin server and generator apart "
        "(--webperf-placement=split)"
    )


def judge(
    first: Side, second: Side, *, gap: float | None = None, confidence: float = CONFIDENCE
) -> Ordering:
    """The study's ``first > second`` judged from the two sides' repetitions. ``gap``:
    the ratio the study reported, if any; a pair not separated then says how many
    repetitions would separate a gap that size here."""
    ratio = None
    if first.values and second.values:
        a, b = stats.mean(first.values), stats.mean(second.values)
        ratio = a / b if a > 0 and b > 0 else None
    if first.bound or second.bound:
        why = _not_ranked_bound(first, second)
        return Ordering(first.name, second.name, ratio, None, None, NOT_RANKED, why, confidence)
    few = [s for s in (first, second) if s.units < MIN_UNITS]
    if few or ratio is None:
        why = (
            "; ".join(f"{s.name}: {_units(s)}" for s in few)
            + ": one repetition cannot separate anything (raise --webperf-repeat)"
            if few
            else "a side served nothing"
        )
        return Ordering(first.name, second.name, ratio, None, None, NOT_SEPARATED, why, confidence)
    est = stats.ratio_change(
        list(first.values),
        list(second.values),
        current_series=[list(s) for s in first.series],
        baseline_series=[list(s) for s in second.series],
        current_instances=first._instances(),
        baseline_instances=second._instances(),
        confidence=confidence,
    )
    if est.low is None or est.high is None:  # no spread at all (not reached: units >= 2)
        why = "no spread to judge from"
        return Ordering(first.name, second.name, ratio, None, None, NOT_SEPARATED, why, confidence)
    low, high = 1 + est.low, 1 + est.high
    status = HOLDS if low > MARGIN else REVERSED if high < 1 / MARGIN else NOT_SEPARATED
    why = ""
    if status == NOT_SEPARATED and (low > 1 or high < 1):
        why = (
            f"within {MARGIN - 1:.0%} of each other: less than two instances of one server "
            "differ by, not an ordering"
        )
    elif status == NOT_SEPARATED and est.se:
        why = _needed(est.se, est.df, min(first.units, second.units), gap)
    return Ordering(first.name, second.name, ratio, low, high, status, why, confidence)


def judge_capacities(first: Mapping[str, Any], second: Mapping[str, Any]) -> Ordering:
    """The study's ``first > second`` judged from two capacity searches (their JSON:
    ``status``, ``rate``, ``low``, ``high``). A search's answer is a bracket (the last
    rate that met the SLO, the first that broke it), so the ratio's interval runs from
    ``first.low / second.high`` to ``first.high / second.low``, judged with the same
    margin as repetitions; a generator-bound search is never ranked."""
    names = str(first.get("server")), str(second.get("server"))
    bound = [n for n, c in zip(names, (first, second), strict=True) if _bracket(c) is None]
    if bound:
        why = "; ".join(
            f"{n}: capacity {c.get('status')}"
            for n, c in zip(names, (first, second), strict=True)
            if n in bound
        )
        return Ordering(
            *names, None, None, None, NOT_RANKED, why + ": no rate to rank", bracket=True
        )
    (a_low, a_high), (b_low, b_high) = _bracket(first) or (0, 0), _bracket(second) or (0, 0)
    a, b = float(first.get("rate") or a_low), float(second.get("rate") or b_low)
    ratio = a / b if a > 0 and b > 0 else None
    low = a_low / b_high if b_high > 0 else None
    high = a_high / b_low if b_low > 0 else math.inf
    if low is not None and low > MARGIN:
        status = HOLDS
    elif high < 1 / MARGIN:
        status = REVERSED
    else:
        status = NOT_SEPARATED
    why = (
        "the searches' brackets overlap (a finer tolerance= narrows them)"
        if status == NOT_SEPARATED
        else ""
    )
    shown_high = None if math.isinf(high) else high
    return Ordering(*names, ratio, low, shown_high, status, why, bracket=True)


def _bracket(capacity: Mapping[str, Any]) -> tuple[float, float] | None:
    """Where a search put the capacity: (at least, below), or None (no rate: a
    generator-bound search, or none that ran)."""
    status = capacity.get("status")
    low, high = capacity.get("low"), capacity.get("high")
    if status == "found" and isinstance(low, int | float) and isinstance(high, int | float):
        return float(low), float(high)
    if status == "at-limit" and isinstance(low, int | float):
        return float(low), math.inf
    if status == "below-start" and isinstance(high, int | float):
        return 0.0, float(high)
    return None


def _needed(se: float, df: float | None, units: int, gap: float | None) -> str:
    """What a pair not separated could have separated, and what the study's gap needs:
    the smallest ratio this run detects 4 times in 5 (``ratio.detectable_change``), and
    the repetitions per side that bring it down to ``gap`` (the spread shrinks as the
    square root of the units)."""
    resolution = 1 + stats.detectable_change(se, df, alpha=(1 - CONFIDENCE) / 2, power=POWER)
    said = f"{units} repetitions per side separate about {resolution:.2f}x here"
    if gap is None or gap <= 1:
        return said
    if gap >= resolution:
        return f"{said}: the study's {gap:.2f}x would have shown; it is not here"
    more = math.ceil(units * (math.log(resolution) / math.log(gap)) ** 2)
    return f"{said}; the study's {gap:.2f}x needs about {more} (--webperf-repeat={more})"


def _units(side: Side) -> str:
    n = side.units
    return f"{n} repetition" + ("" if n == 1 else "s")


def judge_ranking(
    sides: Sequence[Side],
    gaps: Sequence[float | None] = (),
    *,
    confidence: float = CONFIDENCE,
) -> list[Ordering]:
    """Each neighbouring pair of a study's ranking (best first) judged here; ``gaps``:
    the study's ratio for each pair, where it reported one."""
    pairs = list(itertools.pairwise(sides))
    found = list(gaps)[: len(pairs)]
    found += [None] * (len(pairs) - len(found))
    return [
        judge(a, b, gap=g, confidence=confidence) for (a, b), g in zip(pairs, found, strict=True)
    ]


def overall(orderings: Sequence[Ordering]) -> str:
    """One word for a study's line: ``holds`` when every pair holds, ``reversed`` when a
    pair is reversed, ``not ranked`` when a pair could not be ranked and none was
    reversed, else ``not separated``."""
    statuses = {o.status for o in orderings}
    if not statuses:
        return NOT_SEPARATED
    if statuses == {HOLDS}:
        return HOLDS
    if REVERSED in statuses:
        return REVERSED
    return NOT_RANKED if NOT_RANKED in statuses else NOT_SEPARATED


def shared_cores(placement: Mapping[str, Any] | None, cores: int | None) -> str:
    """What sharing the cores does to a comparison, when server and generator shared them
    (nothing pinned apart); "" when they were placed apart or the placement is unknown."""
    if not isinstance(placement, Mapping):
        return ""
    if placement.get("target_cpuset") or placement.get("generator_cpus"):
        return ""
    where = f"the machine's {cores} cores" if cores else "the machine's cores"
    split = (
        "" if cores is not None and cores < 4 else " (--webperf-placement=split pins them apart)"
    )
    return (
        f"server and generator shared {where}: each request's generator CPU came out of "
        "the cores the server could have used, so the figures measure server and generator "
        "together (a server twice as cheap per request shows less than twice the "
        f"throughput) and which of them the scheduler favoured moved between runs{split}"
    )


def short_counted(durations: Mapping[str, Sequence[float]]) -> str:
    """A note for counted repetitions (``requests=N``) that finished in under
    ``MIN_COUNTED_S``: ``durations`` is each server's counted repetitions' time taken."""
    short = {
        name: [t for t in times if math.isfinite(t) and t < MIN_COUNTED_S]
        for name, times in durations.items()
    }
    named = ", ".join(
        f"{name} {len(found)} of {len(durations[name])} (shortest {min(found):.1f} s)"
        for name, found in short.items()
        if found
    )
    if not named:
        return ""
    return (
        f"counted repetitions shorter than {MIN_COUNTED_S:.0f} s ({named}): their "
        "start-up (connections, a cold server) weighs on their figures more than on a "
        "longer run's; a larger requests=N (--webperf-requests) lasts longer"
    )
