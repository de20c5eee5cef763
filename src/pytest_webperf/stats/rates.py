"""Poisson rate ratios for the count metrics (errors, timeouts, lost, dup): the exact
conditional binomial test and its interval, so one stray error never fails a gate but a
systematic rise does."""

from __future__ import annotations

import math
from dataclasses import dataclass

from pytest_webperf.stats.distributions import _binom_sf


@dataclass(frozen=True)
class RateRatio:
    """Rate ratio of two Poisson counts (e.g. errors per request), minus 1.

    ``change`` is ``inf`` when the baseline had no events and the current run had some.
    """

    change: float
    low: float
    high: float
    confidence: float
    p_greater: float
    p_less: float


def rate_ratio(
    events: int,
    exposure: float,
    base_events: int,
    base_exposure: float,
    *,
    confidence: float = 0.95,
) -> RateRatio:
    """Compare ``events/exposure`` with ``base_events/base_exposure``.

    Conditional on the total number of events, the current run's share is binomial
    with ``pi = exposure / (exposure + base_exposure)`` when the rates are equal: an
    exact test that needs no normal approximation for counts near zero. The interval
    is Clopper-Pearson on that share, mapped to the rate ratio. Bursty errors are
    over-dispersed, which makes this optimistic; the threshold is the second guard.
    """
    if exposure <= 0 or base_exposure <= 0:
        raise ValueError("rate ratio needs positive exposures")
    total = events + base_events
    if total == 0:
        return RateRatio(0.0, -1.0, math.inf, confidence, 1.0, 1.0)
    pi0 = exposure / (exposure + base_exposure)
    p_greater = _binom_sf(events, total, pi0)
    p_less = 1 - _binom_sf(events + 1, total, pi0)
    alpha = 1 - confidence
    lo_share = 0.0 if events == 0 else _share_bound(events, total, alpha / 2, lower=True)
    hi_share = 1.0 if events == total else _share_bound(events, total, alpha / 2, lower=False)
    scale = base_exposure / exposure

    def to_change(share: float) -> float:
        return math.inf if share >= 1 else share / (1 - share) * scale - 1

    return RateRatio(
        to_change(events / total),
        to_change(lo_share),
        to_change(hi_share),
        confidence,
        p_greater,
        p_less,
    )


def _share_bound(k: int, n: int, tail: float, *, lower: bool) -> float:
    """Clopper-Pearson bound of a binomial proportion, by bisection."""
    low, high = 0.0, 1.0
    for _ in range(100):
        mid = (low + high) / 2
        # lower bound: P(X >= k | mid) = tail; upper bound: P(X <= k | mid) = tail
        value = _binom_sf(k, n, mid) if lower else 1 - _binom_sf(k + 1, n, mid)
        if (value < tail) == lower:
            low = mid
        else:
            high = mid
    return (low + high) / 2
