"""CPU profiles as folded stacks: counted, written, read back, merged; CPU time per
request per function; the shape of one function's change as reports keep it (pure).

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

Which functions changed between two sides is ``profiling/diff.py``'s test; a change it
names is kept as a ``FunctionChange`` (the JSON report's ``profile.changes``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Stacks = Mapping[str, int]  # "root;...;leaf" -> samples


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


def on_stack(stacks: Stacks) -> dict[str, int]:
    """Per function, the samples of the stacks it is on (once per stack)."""
    found: dict[str, int] = {}
    for stack, count in stacks.items():
        for frame in set(stack.split(";")):
            found[frame] = found.get(frame, 0) + count
    return found


@dataclass(frozen=True)
class FunctionChange:
    """One function's change in self CPU per request, B - A (µs), with its interval,
    and (a sampled profile) the ratio of its costs and the test's p-value."""

    function: str
    change_us: float
    low_us: float  # the interval of the change
    high_us: float
    base_us: float  # A's self time per request
    change_total_us: float  # B - A, total time (the function and what it calls; context)
    ratio: float | None = None  # B's cost over A's
    p_value: float | None = None

    @property
    def relative(self) -> float | None:
        return self.change_us / self.base_us if self.base_us > 0 else None

    def to_dict(self) -> dict[str, Any]:
        found = {
            "function": self.function,
            "change_us": self.change_us,
            "low_us": self.low_us,
            "high_us": self.high_us,
            "base_us": self.base_us,
            "change_total_us": self.change_total_us,
        }
        if self.ratio is not None:
            found["ratio"] = self.ratio
        if self.p_value is not None:
            found["p_value"] = self.p_value
        return found

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FunctionChange:
        ratio, p_value = data.get("ratio"), data.get("p_value")
        return cls(
            function=str(data["function"]),
            change_us=float(data["change_us"]),
            low_us=float(data["low_us"]),
            high_us=float(data["high_us"]),
            base_us=float(data["base_us"]),
            change_total_us=float(data.get("change_total_us", 0.0)),
            ratio=None if ratio is None else float(ratio),
            p_value=None if p_value is None else float(p_value),
        )

    def line(self) -> str:
        """``+31.2 µs/req  sha256_block_data_order (libcrypto.so.3)``"""
        return f"{self.change_us:+.1f} µs/req  {self.function}"
