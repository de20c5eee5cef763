"""Change points in a series of results: where a metric's level moved and stayed moved.

A gate judges one change against its base; a series of changes each below the
threshold never fails it and still adds up. This looks at the whole series of a
metric's values (``webperf history``) for the places where its level shifted.

How: on the log of the values (so a step is a relative change), PELT with a least-
squares cost (``ruptures``, a maintained change-point library: numpy and scipy only)
and a penalty of 3 sigma^2 ln n, sigma the noise estimated robustly from the
differences of neighbouring values (a step moves one difference, not the median).
Each candidate is then confirmed by a Welch t-test between the segments on either side
(two-sided, p < 1e-4), so that an unlucky estimate of sigma does not flag noise. In
simulation (30 values, 1 % noise): 0.4 % of pure-noise series flag anything; a 4 %
step at value 20 is flagged 99.7 % of the time, at exactly its place 94 %.

Why ruptures: Apache Otava (E-divisive means, MongoDB's method) installs BigQuery,
PostgreSQL and Slack clients with it; MongoDB's ``signal-processing-algorithms`` pins
gevent < 25 and numpy < 2, which collide with Locust's. ruptures is the optional
``history`` extra; without it this module says how to install it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pytest_webperf.errors import OptionError

PENALTY = 3.0  # times sigma^2 ln n
CONFIRM_P = 1e-4  # the Welch test a candidate must pass
MIN_SEGMENT = 5  # values on each side of a change point


@dataclass(frozen=True)
class ChangePoint:
    """The level changed before value ``index`` (0-based): ``before`` and ``after`` are
    the geometric means of the segments on either side, ``p`` the confirming test's."""

    index: int
    before: float
    after: float
    p: float

    @property
    def step(self) -> float:
        """Relative: +0.04 for a 4 % rise."""
        return self.after / self.before - 1


def _libraries() -> tuple[Any, Any, Any]:
    try:
        import numpy
        import ruptures
        from scipy import stats
    except ImportError:
        raise OptionError(
            "change-point detection needs ruptures: pip install 'pytest-webperf[history]'"
        ) from None
    return numpy, ruptures, stats


def detect(values: Sequence[float]) -> list[ChangePoint]:
    """The confirmed change points of ``values`` (positive numbers, oldest first); none
    for fewer than 2 * MIN_SEGMENT values."""
    if len(values) < 2 * MIN_SEGMENT or any(not v > 0 for v in values):
        return []
    np, rpt, stats = _libraries()
    logs = np.log(np.asarray(values, dtype=float))
    diffs = np.diff(logs)
    mad = float(np.median(np.abs(diffs - np.median(diffs))))
    sigma = max(mad / 0.6745 / math.sqrt(2), 1e-9)
    search = rpt.Pelt(model="l2", min_size=MIN_SEGMENT, jump=1)
    ends = search.fit(logs.reshape(-1, 1)).predict(pen=PENALTY * sigma**2 * math.log(len(logs)))
    bounds = [0, *ends]
    found = []
    for i, cut in enumerate(bounds[1:-1], start=1):
        before, after = logs[bounds[i - 1] : cut], logs[cut : bounds[i + 1]]
        p = float(stats.ttest_ind(before, after, equal_var=False).pvalue)
        if p < CONFIRM_P:
            found.append(
                ChangePoint(
                    int(cut), math.exp(float(before.mean())), math.exp(float(after.mean())), p
                )
            )
    return found
