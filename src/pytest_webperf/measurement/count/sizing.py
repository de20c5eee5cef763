"""How many requests a counted window sends (pure: no I/O): enough that the window's own
wandering is well under the threshold of the check it feeds, and no more, since every
request under callgrind costs 20 to 100 times its native time.

The probe before each window counts two halves of ``PROBE_REQUESTS`` each, back to back in
the same process. Their instructions per request differ by what falls in one half and not
the other: a collection (CPython's every 700 allocations), a table that grows, a timer's
wake-up. A program that does the same work per request has such events at a steady
rate, so a window of any size holds its share of them give or take one: their weight per
request falls as 1/N, and a window of N requests wanders by about ``spread * P / N``.
N is the smallest that brings that under ``SHARE`` of the check's threshold, clamped to
``MIN_REQUESTS..MAX_REQUESTS``.

A deterministic server (C, nginx) has halves that agree to a few instructions, so it gets
``MIN_REQUESTS``; a CPython server whose collector runs once in a half 2.5 % apart gets
250 for a 1 % check.
What is left between fresh processes (memory layout, a hash seed) does not shrink with N:
more repetitions see it, not longer windows (an undecided check says how many would:
``gate/undecided.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

PROBE_REQUESTS = 25  # each of the probe's two halves
MIN_REQUESTS, MAX_REQUESTS = 100, 2000
SHARE = 0.25  # a window may wander by this share of the check's threshold
DEFAULT_THRESHOLD = 0.01  # instructions_per_req:1%, when the run gives no counted check
MIN_LIMIT_S = 60.0  # a window's time limit: at least this, else 20 times the probe's pace
GIVEN_LIMIT_S = 0.25  # ... or, with N given (no probe), this much per request


def halves_spread(first: float, second: float) -> float:
    """The relative difference of the probe's halves (instructions per request each)."""
    middle = (first + second) / 2
    return abs(first - second) / middle if middle > 0 else 0.0


def sized(spread: float, threshold: float = DEFAULT_THRESHOLD, probe: int = PROBE_REQUESTS) -> int:
    """N for a window whose probe halves of ``probe`` requests were ``spread`` apart
    (relative), feeding a check of ``threshold`` (relative: 0.01 for 1 %)."""
    if not threshold > 0:
        threshold = DEFAULT_THRESHOLD
    wanted = SHARE * threshold
    needed = probe * spread / wanted
    return max(MIN_REQUESTS, min(MAX_REQUESTS, math.ceil(needed)))


def time_limit(pace_s: float, requests: int) -> float:
    """A window's time limit from the probe's seconds per request."""
    return max(MIN_LIMIT_S, 20 * pace_s * requests)


def given_limit(requests: int) -> float:
    """A window's time limit when the test gave N (no probe timed the server)."""
    return max(MIN_LIMIT_S, GIVEN_LIMIT_S * requests)


def largest_spread(values: Sequence[tuple[float, float]]) -> float:
    """The largest ``halves_spread`` over several figures' probe halves."""
    return max((halves_spread(a, b) for a, b in values), default=0.0)
