"""What every native loop's Python face shares (``hotloop.py``, ``mqttloop.py``): the C
extension loaded, or why it is not built here; whether it speaks TLS; the histograms it
hands over; and the tally of failures an interval names (no gevent, no Locust: safe
anywhere).

Each loop is a C extension built with the package where a C compiler and Python's
headers are found (Linux: epoll); where one is not, its face says why, once, and the
run falls back to a pure-Python user.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from typing import Any

from pytest_webperf.stats.histogram import Histogram


@dataclass(frozen=True)
class Extension:
    """A native loop as built here: its module, or None and why."""

    module: Any | None
    why: str = ""

    def unavailable(self, what: str) -> str | None:
        """Why ``what`` (``the native request loop``) cannot run here, or None."""
        return None if self.module is not None else f"{what} is not built here ({self.why})"

    @property
    def tls(self) -> bool:
        """Whether it speaks TLS here (built with OpenSSL's headers)."""
        return self.module is not None and bool(getattr(self.module, "TLS", 0))

    def bucket_index(self, value_us: int) -> int:
        """The C side's histogram bucket of ``value_us`` (the same as ``Histogram``'s)."""
        if self.module is None:
            raise RuntimeError("the native loop is not built here")
        return int(self.module.bucket_index(value_us))


def extension(name: str) -> Extension:
    """``pytest_webperf.swarm.<name>``, or why it cannot be imported."""
    try:
        return Extension(importlib.import_module(f"pytest_webperf.swarm.{name}"))
    except ImportError as exc:  # not built here (no compiler, not Linux)
        return Extension(None, str(exc))


def histogram_from(data: tuple[int, int, int, int, list[tuple[int, int]]]) -> Histogram:
    """A histogram as ``Engine.take()`` hands it over: count, total, min, max, buckets."""
    count, total, minimum, maximum, pairs = data
    histogram = Histogram()
    histogram.counts = dict(pairs)
    histogram.count, histogram.total = count, total
    histogram.minimum, histogram.maximum = minimum, maximum
    return histogram


def socket_error(number: int) -> OSError:
    return OSError(number, os.strerror(number))


@dataclass
class Tally:
    """An interval's failures by kind, with the first example of each (cut to ``chars``)."""

    chars: int | None = None
    kinds: dict[str, int] = field(default_factory=dict)
    examples: dict[str, str] = field(default_factory=dict)

    def add(self, kind: str, n: int, example: str | None = None) -> None:
        if n:
            self.kinds[kind] = self.kinds.get(kind, 0) + n
            if example is not None:
                self.examples.setdefault(kind, example[: self.chars])

    def named_examples(self) -> dict[str, str]:
        """The examples of the kinds that occurred."""
        return {kind: text for kind, text in self.examples.items() if kind in self.kinds}
