"""The Mann-Whitney U rank test (``ranktest``)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_webperf import ranktest

positive = st.floats(min_value=1e-3, max_value=1e6, allow_nan=False, allow_infinity=False)
samples = st.lists(positive, min_size=1, max_size=6)


def test_mann_whitney_exact_values() -> None:
    separated = ranktest.mann_whitney_u([6, 7, 8, 9, 10], [1, 2, 3, 4, 5], "greater")
    assert separated.exact and separated.u == 25
    assert separated.p_value == pytest.approx(1 / 252)
    assert ranktest.mann_whitney_u([6, 7, 8, 9, 10], [1, 2, 3, 4, 5]).p_value == pytest.approx(
        2 / 252
    )
    # three per side can never be more significant than 1/20 one-sided
    assert ranktest.mann_whitney_u([4, 5, 6], [1, 2, 3], "greater").p_value == pytest.approx(0.05)
    assert ranktest.mann_whitney_u([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]).p_value == 1.0
    with pytest.raises(ValueError):
        ranktest.mann_whitney_u([], [1.0])


def test_mann_whitney_normal_approximation_agrees_with_the_exact_test() -> None:
    rng = random.Random(11)
    x = [rng.gauss(0.5, 1) for _ in range(9)]
    y = [rng.gauss(0, 1) for _ in range(9)]
    exact = ranktest.mann_whitney_u(x, y, "greater")
    ranks = ranktest._midranks([*x, *y])
    approx = ranktest._normal_rank_p(exact.u, ranks, 9, 9, "greater")
    assert exact.exact
    assert approx == pytest.approx(exact.p_value, abs=0.01)
    big = ranktest.mann_whitney_u(list(range(20)), list(range(5, 25)), "less")
    assert not big.exact and 0 < big.p_value < 0.05


@given(samples, samples)
def test_mann_whitney_is_antisymmetric(x: list[float], y: list[float]) -> None:
    a = ranktest.mann_whitney_u(x, y, "greater")
    b = ranktest.mann_whitney_u(y, x, "less")
    assert a.p_value == pytest.approx(b.p_value)
    assert 0 <= a.p_value <= 1
    assert a.u + ranktest.mann_whitney_u(y, x).u == pytest.approx(len(x) * len(y))
