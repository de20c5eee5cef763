"""The Mann-Whitney U rank test of two small samples.

Exact (full enumeration of the ``C(n+m, n)`` splittings, midranks for ties) for
small samples, normal with tie and continuity correction above. The gate does not
use it (see ``stats``: with 3 repetitions per side its smallest possible one-sided
p-value is 1/20 = 0.05, so a rank gate could never fail a 3-repetition run), and
no report shows it today.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Literal

Alternative = Literal["two-sided", "greater", "less"]

EXACT_RANK_LIMIT = 200_000  # enumerate at most this many splittings (10 vs 10 is 184,756)


@dataclass(frozen=True)
class RankTest:
    u: float  # Mann-Whitney U of the first sample (pairs where x > y, ties count 1/2)
    p_value: float
    exact: bool


def _midranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def _p_from(u: float, dist: Sequence[float], alternative: Alternative, eps: float) -> float:
    ge = sum(1 for d in dist if d >= u - eps) / len(dist)
    le = sum(1 for d in dist if d <= u + eps) / len(dist)
    if alternative == "greater":
        return ge
    if alternative == "less":
        return le
    return min(1.0, 2 * min(ge, le))


def mann_whitney_u(
    x: Sequence[float], y: Sequence[float], alternative: Alternative = "two-sided"
) -> RankTest:
    """Mann-Whitney U test; "greater" means x tends to be larger than y.

    Exact (enumerating every split of the pooled midranks) while there are at most
    EXACT_RANK_LIMIT splits, which covers 10 vs 10; normal approximation with tie
    and continuity correction above.
    """
    if not x or not y:
        raise ValueError("rank test needs two non-empty samples")
    n, m = len(x), len(y)
    ranks = _midranks([*x, *y])
    offset = n * (n + 1) / 2
    u = sum(ranks[:n]) - offset
    if math.comb(n + m, n) <= EXACT_RANK_LIMIT:
        dist = [sum(ranks[i] for i in idx) - offset for idx in combinations(range(n + m), n)]
        return RankTest(u, _p_from(u, dist, alternative, 1e-9), exact=True)
    return RankTest(u, _normal_rank_p(u, ranks, n, m, alternative), exact=False)


def _normal_rank_p(
    u: float, ranks: Sequence[float], n: int, m: int, alternative: Alternative
) -> float:
    total = n + m
    counts: dict[float, int] = {}
    for r in ranks:
        counts[r] = counts.get(r, 0) + 1
    ties = sum(c**3 - c for c in counts.values())
    sigma = math.sqrt(n * m / 12 * ((total + 1) - ties / (total * (total - 1))))
    if sigma == 0:
        return 1.0
    mu = n * m / 2

    def upper(v: float) -> float:
        return 0.5 * math.erfc((v - mu - 0.5) / sigma / math.sqrt(2))

    def lower(v: float) -> float:
        return 0.5 * math.erfc(-(v - mu + 0.5) / sigma / math.sqrt(2))

    if alternative == "greater":
        return min(1.0, upper(u))
    if alternative == "less":
        return min(1.0, lower(u))
    return min(1.0, 2 * min(upper(u), lower(u)))
