"""Differential CPU profiles: folded stacks, CPU time per request per function, and
which functions the change made costlier or cheaper (pure: no I/O).

A profile is a set of folded stacks (``root;caller;leaf count``, the format of Brendan
Gregg's ``stackcollapse`` scripts and of py-spy's ``raw`` output): each count is a number
of samples, each sample ``period_s`` of CPU time. Divided by the requests the repetition
served, a function's samples are its CPU time per request: *self* where it is the leaf
(the CPU spent in its own code), *total* where it is anywhere on the stack (counted once
per stack, recursion or not). Where the repetition's CPU per request was measured (the
monitor's CPU time of the target, cgroup or process tree), the samples only share it
out: a function's cost is its share of the samples times that figure. A sampler that
also counts time off the CPU (py-spy counts a thread holding the GIL while the machine
has descheduled it) then still gives each function its part of the CPU actually used.

The diff works on A/B pairs, as the gate does: per pair and function, the change in
self CPU per request ``B - A`` (µs); over pairs, its mean with a Student-t interval.
The spread is at least the sampling (Poisson) error of the counts, so two pairs that
agree by luck do not make a function significant. Many functions are tested at once,
so each interval is at ``1 - alpha / m`` (Bonferroni over the ``m`` functions tested):
an A/A run flags one or more at rate ``alpha`` at most (``CONFIDENCE``: 99 %). Only
functions with at least ``min_share`` of either side's CPU per request are tested (the
rest cannot be measured at 99 Hz and would only raise ``m``). Kept: the functions whose
interval excludes zero, ranked by the size of the change.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_webperf.stats.distributions import t_ppf
from pytest_webperf.stats.ratio import mean, stdev

Stacks = Mapping[str, int]  # "root;...;leaf" -> samples

# A function named as changed sends its reader into its code: a false lead costs more
# than a missed small change, so the profile is stricter than the gate's checks (95 %).
CONFIDENCE = 0.99


def frame_name(text: str) -> str:
    """A frame as folded stacks can hold it: no ``;`` (the separator), no line breaks."""
    return " ".join(text.replace(";", ",").split())


def fold(stacks: Iterable[Sequence[str]]) -> dict[str, int]:
    """Stacks (each root first) counted: one sample per stack given."""
    folded: dict[str, int] = {}
    for frames in stacks:
        names = [frame_name(f) for f in frames if frame_name(f)]
        if names:
            key = ";".join(names)
            folded[key] = folded.get(key, 0) + 1
    return folded


def write_folded(stacks: Stacks) -> str:
    """One ``stack count`` line per stack, sorted (diffable, stable)."""
    return "".join(f"{stack} {count}\n" for stack, count in sorted(stacks.items()) if count > 0)


def parse_folded(text: str) -> dict[str, int]:
    """Folded stacks back from text; a line that is not ``stack count`` is a
    ``ValueError`` naming it. The same stack twice adds up."""
    folded: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack or not count.isdigit():
            raise ValueError(f"line {number} is not 'frame;frame;... count': {line[:80]!r}")
        folded[stack] = folded.get(stack, 0) + int(count)
    return folded


def merge(*stacks: Stacks) -> dict[str, int]:
    """Several profiles' stacks added up."""
    merged: dict[str, int] = {}
    for one in stacks:
        for stack, count in one.items():
            merged[stack] = merged.get(stack, 0) + count
    return merged


@dataclass(frozen=True)
class Sample:
    """One repetition's profile: its stacks, the CPU time one sample stands for, and
    the requests the repetition served; with ``cpu_per_request_us`` (the target's CPU
    time per request as the monitor measured it), the samples only share that out."""

    stacks: Stacks
    period_s: float
    requests: int
    cpu_per_request_us: float | None = None

    def counts(self) -> tuple[dict[str, int], dict[str, int]]:
        """Per function: samples where it is the leaf (self), and stacks it is on (total)."""
        own: dict[str, int] = {}
        total: dict[str, int] = {}
        for stack, count in self.stacks.items():
            frames = stack.split(";")
            own[frames[-1]] = own.get(frames[-1], 0) + count
            for frame in set(frames):
                total[frame] = total.get(frame, 0) + count
        return own, total

    @property
    def unit_us(self) -> float:
        """Microseconds of CPU per request that one sample stands for."""
        if self.requests <= 0:
            return 0.0
        if self.cpu_per_request_us is not None and self.samples > 0:
            return self.cpu_per_request_us / self.samples
        return self.period_s * 1e6 / self.requests

    @property
    def samples(self) -> int:
        return sum(self.stacks.values())


@dataclass(frozen=True)
class FunctionChange:
    """One function's change in self CPU per request, B - A (µs), over the pairs."""

    function: str
    change_us: float  # mean over pairs of B - A, self time
    low_us: float  # the interval of the change
    high_us: float
    base_us: float  # A's mean self time per request
    change_total_us: float  # mean over pairs of B - A, total time (for context)

    @property
    def relative(self) -> float | None:
        return self.change_us / self.base_us if self.base_us > 0 else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "function": self.function,
            "change_us": self.change_us,
            "low_us": self.low_us,
            "high_us": self.high_us,
            "base_us": self.base_us,
            "change_total_us": self.change_total_us,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FunctionChange:
        return cls(
            function=str(data["function"]),
            change_us=float(data["change_us"]),
            low_us=float(data["low_us"]),
            high_us=float(data["high_us"]),
            base_us=float(data["base_us"]),
            change_total_us=float(data.get("change_total_us", 0.0)),
        )

    def line(self) -> str:
        """``+31.2 µs/req  sha256_block_data_order (libcrypto.so.3)``"""
        return f"{self.change_us:+.1f} µs/req  {self.function}"


@dataclass(frozen=True)
class Diff:
    """The functions whose change the pairs show (ranked), and how many were tested."""

    changes: tuple[FunctionChange, ...]
    tested: int
    pairs: int
    confidence: float


def diff(
    pairs: Sequence[tuple[Sample, Sample]],
    *,
    confidence: float = CONFIDENCE,
    min_share: float = 0.01,
) -> Diff:
    """The functions whose self CPU per request changed from A to B (each pair is
    ``(a, b)``), ranked by the size of the change, largest first."""
    usable = [(a, b) for a, b in pairs if a.requests > 0 and b.requests > 0]
    n = len(usable)
    if n < 2:
        return Diff((), 0, n, confidence)
    # per pair and side: self samples, stacks on, and µs per request of one sample
    sides = [(a.counts(), a.unit_us, b.counts(), b.unit_us) for a, b in usable]
    a_total = mean([a.unit_us * a.samples for a, _ in usable])
    b_total = mean([b.unit_us * b.samples for _, b in usable])
    names = {name for (own_a, _), _, (own_b, _), _ in sides for name in (*own_a, *own_b)}

    def self_us(name: str) -> tuple[list[float], list[float]]:
        a_side = [own.get(name, 0) * unit for (own, _), unit, _, _ in sides]
        b_side = [own.get(name, 0) * unit for _, _, (own, _), unit in sides]
        return a_side, b_side

    tested = []
    for name in sorted(names):
        a_side, b_side = self_us(name)
        if mean(a_side) >= min_share * a_total or mean(b_side) >= min_share * b_total:
            tested.append(name)
    if not tested:
        return Diff((), 0, n, confidence)
    alpha = (1 - confidence) / len(tested)
    quantile = t_ppf(1 - alpha / 2, n - 1)
    kept = []
    for name in tested:
        a_side, b_side = self_us(name)
        deltas = [b - a for a, b in zip(a_side, b_side, strict=True)]
        change = mean(deltas)
        # sampling error of the counts (Poisson: variance = count), in µs per request
        poisson = math.sqrt(
            sum(
                own_a.get(name, 0) * unit_a**2 + own_b.get(name, 0) * unit_b**2
                for (own_a, _), unit_a, (own_b, _), unit_b in sides
            )
        )
        se = max(stdev(deltas) / math.sqrt(n), poisson / n)
        low, high = change - quantile * se, change + quantile * se
        if low > 0 or high < 0:
            totals = [
                on_b.get(name, 0) * unit_b - on_a.get(name, 0) * unit_a
                for (_, on_a), unit_a, (_, on_b), unit_b in sides
            ]
            kept.append(FunctionChange(name, change, low, high, mean(a_side), mean(totals)))
    kept.sort(key=lambda c: (-abs(c.change_us), c.function))
    return Diff(tuple(kept), len(tested), n, confidence)
