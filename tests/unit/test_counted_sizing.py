"""A counted mix's fixed order and a counted window's size: the order gives every entry
its share within one request in every prefix, the same on every call; N grows with the
probe's own spread against the check's threshold."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_webperf.measurement.count.sizing import (
    MAX_REQUESTS,
    MIN_REQUESTS,
    PROBE_REQUESTS,
    SHARE,
    halves_spread,
    sized,
)
from pytest_webperf.models.workload import InOrder, Request, Workload, interleaved

weights = st.lists(
    st.one_of(
        st.integers(1, 50).map(float), st.floats(0.01, 20, allow_nan=False, allow_infinity=False)
    ),
    min_size=1,
    max_size=8,
)


@given(weights, st.integers(0, 300))
def test_every_prefix_gives_each_entry_its_share_within_one(
    shares: list[float], count: int
) -> None:
    order = interleaved(shares, count)
    assert len(order) == count and interleaved(shares, count) == order  # the same every time
    total = sum(Fraction(w) for w in shares)
    taken = [0] * len(shares)
    for k, index in enumerate(order, 1):
        taken[index] += 1
        for i, w in enumerate(shares):
            assert abs(taken[i] - k * Fraction(w) / total) < 1


def test_a_9_to_1_mix_sends_one_post_in_every_ten() -> None:
    mix = (Request("/users/7", weight=9), Request("/users", method="POST", weight=1))
    workload = Workload(mix=mix, requests=100, ordered=True)
    order = workload.sequence(20)
    assert order.count(1) == 2 and order[:10].count(1) == 1
    assert workload.sent(100) == {("GET", "/users/7"): 90, ("POST", "/users"): 10}
    pick = InOrder(["get", "post"], order)
    assert [pick.pick() for _ in range(20)] == [["get", "post"][i] for i in order]
    assert Workload.from_dict(workload.to_dict()).ordered


def test_bad_weights_are_refused() -> None:
    with pytest.raises(ValueError, match="weights > 0"):
        interleaved([1.0, 0.0], 3)
    with pytest.raises(ValueError, match="weights > 0"):
        interleaved([], 3)


def test_n_is_sized_by_the_probes_spread_against_the_threshold() -> None:
    assert halves_spread(100.0, 100.0) == 0 and halves_spread(99.0, 101.0) == pytest.approx(0.02)
    assert sized(0.0) == MIN_REQUESTS  # a deterministic server: the least
    assert sized(1.0) == MAX_REQUESTS  # wildly apart: the most
    # halves 2.5 % apart (a collection in one of them) against 1 %: a window must wander
    # less than a quarter of it, and such an event weighs 1/N
    assert sized(0.025, 0.01) == round(PROBE_REQUESTS * 0.025 / (SHARE * 0.01)) == 250
    assert sized(0.025, 0.01) > sized(0.025, 0.03) >= MIN_REQUESTS  # a looser check: fewer
    assert sized(0.005, 0.0) == sized(0.005, 0.01)  # no threshold: 1 %


@given(st.floats(0, 0.2), st.floats(0.001, 0.1))
def test_n_stays_within_its_bounds_and_grows_with_the_spread(
    spread: float, threshold: float
) -> None:
    n = sized(spread, threshold)
    assert MIN_REQUESTS <= n <= MAX_REQUESTS
    assert sized(spread * 2, threshold) >= n
