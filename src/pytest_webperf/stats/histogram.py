"""A log-linear latency histogram in microseconds, HdrHistogram-style.

Values below ``2 * SUB_BUCKETS`` microseconds are exact; above that every bucket
spans at most 1/SUB_BUCKETS of its value, so a percentile is within 0.4 % of
the true sample (Locust rounds to whole milliseconds under 100 ms). Counts are
kept sparse, merge by addition, and serialize as ``[[index, count], ...]``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

SUB_BITS = 8
SUB_BUCKETS = 1 << SUB_BITS  # 256


def bucket_index(value_us: int) -> int:
    """The bucket of a non-negative integer value."""
    if value_us < 2 * SUB_BUCKETS:
        return value_us
    shift = value_us.bit_length() - SUB_BITS - 1
    return shift * SUB_BUCKETS + (value_us >> shift)


def bucket_bounds(index: int) -> tuple[int, int]:
    """The smallest and largest value a bucket holds."""
    if index < 2 * SUB_BUCKETS:
        return index, index
    shift = index // SUB_BUCKETS - 1
    low = (index - shift * SUB_BUCKETS) << shift
    return low, low + (1 << shift) - 1


class Histogram:
    """Counts of latencies in microseconds. Mutable while recording; merge with ``+=``."""

    __slots__ = ("count", "counts", "maximum", "minimum", "total")

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.total = 0  # sum of recorded values, for an exact mean
        self.count = 0
        self.minimum = 0
        self.maximum = 0

    def record(self, value_us: int) -> None:
        value_us = max(int(value_us), 0)
        index = bucket_index(value_us)
        self.counts[index] = self.counts.get(index, 0) + 1
        if self.count == 0 or value_us < self.minimum:
            self.minimum = value_us
        self.maximum = max(value_us, self.maximum)
        self.count += 1
        self.total += value_us

    def record_many(self, values_us: Iterable[int]) -> None:
        for value in values_us:
            self.record(value)

    def __iadd__(self, other: Histogram) -> Histogram:
        for index, n in other.counts.items():
            self.counts[index] = self.counts.get(index, 0) + n
        if other.count:
            self.minimum = other.minimum if not self.count else min(self.minimum, other.minimum)
            self.maximum = max(self.maximum, other.maximum)
        self.count += other.count
        self.total += other.total
        return self

    def __len__(self) -> int:
        return self.count

    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0

    def max(self) -> int:
        return self.maximum

    def percentile(self, percent: float) -> float:
        """The smallest recorded value with at least ``percent`` % of the samples at or
        below it, reported as the middle of its bucket and clamped to the seen range."""
        if not self.count:
            return 0.0
        rank = max(1, -(-self.count * percent // 100))  # ceil, at least the first sample
        seen = 0
        for index in sorted(self.counts):
            seen += self.counts[index]
            if seen >= rank:
                low, high = bucket_bounds(index)
                return float(min(max((low + high) / 2, self.minimum), self.maximum))
        return float(self.maximum)

    def to_dict(self) -> dict[str, Any]:
        return {
            "unit": "us",
            "sub_bits": SUB_BITS,
            "count": self.count,
            "total": self.total,
            "min": self.minimum,
            "max": self.maximum,
            "counts": sorted([i, n] for i, n in self.counts.items()),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Histogram:
        histogram = cls()
        if not data:
            return histogram
        if data.get("sub_bits", SUB_BITS) != SUB_BITS:
            raise ValueError(f"histogram with sub_bits={data.get('sub_bits')} is not supported")
        histogram.counts = {int(i): int(n) for i, n in data.get("counts", ())}
        histogram.count = int(data.get("count", sum(histogram.counts.values())))
        histogram.total = int(data.get("total", 0))
        histogram.minimum = int(data.get("min", 0))
        histogram.maximum = int(data.get("max", 0))
        return histogram

    def copy(self) -> Histogram:
        clone = Histogram()
        clone += self
        return clone
