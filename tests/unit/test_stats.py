"""Unit tests of the pure statistics (no I/O, no timing)."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pytest_webperf.stats import distributions, rates, ratio

positive = st.floats(min_value=1e-3, max_value=1e6, allow_nan=False, allow_infinity=False)
samples = st.lists(positive, min_size=1, max_size=6)


def test_descriptive_statistics() -> None:
    values = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]
    assert ratio.mean(values) == 5.0
    assert ratio.variance(values) == pytest.approx(32 / 7)
    assert ratio.stdev(values) == pytest.approx(math.sqrt(32 / 7))
    assert ratio.variance([3.0]) == 0.0
    assert ratio.stdev([3.0]) == 0.0
    with pytest.raises(ValueError, match="mean of no values"):
        ratio.mean([])


def test_percentile_interpolates_like_numpy() -> None:
    values = [15.0, 20.0, 35.0, 40.0, 50.0]
    assert ratio.percentile(values, 0) == 15.0
    assert ratio.percentile(values, 100) == 50.0
    assert ratio.percentile(values, 50) == 35.0
    assert ratio.percentile(values, 40) == pytest.approx(29.0)
    assert ratio.percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    with pytest.raises(ValueError, match="no values"):
        ratio.percentile([], 50)
    with pytest.raises(ValueError, match="outside"):
        ratio.percentile([1.0], 101)


@given(st.lists(positive, min_size=1, max_size=30), st.floats(0, 100), st.floats(0, 100))
def test_percentile_is_monotone_and_bounded(values: list[float], q1: float, q2: float) -> None:
    lo, hi = sorted((q1, q2))
    assert min(values) <= ratio.percentile(values, lo) <= ratio.percentile(values, hi)
    assert ratio.percentile(values, hi) <= max(values)


@pytest.mark.parametrize(
    ("p", "df", "expected"),
    [
        (0.975, 1, 12.7062),
        (0.975, 4, 2.7764),
        (0.975, 8, 2.3060),
        (0.995, 8, 3.3554),
        (0.95, 30, 1.6973),
        (0.975, math.inf, 1.95996),
        (0.025, 4, -2.7764),
    ],
)
def test_student_t_quantiles_match_tables(p: float, df: float, expected: float) -> None:
    assert distributions.t_ppf(p, df) == pytest.approx(expected, abs=1e-3)


@given(st.floats(0.001, 0.999), st.floats(0.5, 200))
def test_t_ppf_inverts_t_cdf(p: float, df: float) -> None:
    assert distributions.t_cdf(distributions.t_ppf(p, df), df) == pytest.approx(p, abs=1e-7)


@given(st.floats(0.5, 50), st.floats(0.5, 50), st.floats(0, 1))
def test_incomplete_beta_symmetry(a: float, b: float, x: float) -> None:
    # I_x(a, b) = 1 - I_{1-x}(b, a) only where 1 - x keeps x's digits (x = 3.7e-18: no)
    assume(1 - (1 - x) == x)
    assert distributions.betainc(a, b, x) == pytest.approx(
        1 - distributions.betainc(b, a, 1 - x), abs=1e-9
    )


def test_batch_means_use_five_second_batches_and_drop_the_tail() -> None:
    assert ratio.batch_means([float(v) for v in range(22)]) == [2.0, 7.0, 12.0, 17.0]
    # too short for 5 s batches: shorter batches, at least three of them
    assert ratio.batch_means([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]) == [1.5, 3.5, 5.5]


def test_within_run_spread_of_a_constant_series_is_zero_and_short_series_are_ignored() -> None:
    assert ratio.within_run_spread([[10.0] * 20]) == ratio.Spread(0.0, 3)
    assert ratio.within_run_spread([[1.0, 2.0]]) is None


def test_within_run_spread_estimates_the_variance_of_a_runs_mean() -> None:
    # independent seconds with CV 10 %: the mean of 60 s has CV^2 = 0.01 / 60
    rng = random.Random(7)
    runs = [[100 * (1 + rng.gauss(0, 0.1)) for _ in range(60)] for _ in range(40)]
    spread = ratio.within_run_spread(runs)
    assert spread is not None
    assert spread.df == 40 * 11
    assert spread.rel_var == pytest.approx(0.01 / 60, rel=0.25)


@given(samples)
def test_identical_samples_show_no_change(values: list[float]) -> None:
    est = ratio.ratio_change(values, values)
    assert est.change == pytest.approx(0.0, abs=1e-12)
    assert est.p_greater >= 0.5 - 1e-9
    assert est.p_less >= 0.5 - 1e-9


@given(
    st.lists(st.floats(0.95, 1.05), min_size=2, max_size=6),
    st.lists(st.floats(0.95, 1.05), min_size=2, max_size=6),
    st.integers(-20, 20),
)
def test_ratio_change_is_scale_invariant(xs: list[float], ys: list[float], k: int) -> None:
    scale = 2.0**k  # exact in binary floating point
    a = ratio.ratio_change(xs, ys)
    b = ratio.ratio_change([x * scale for x in xs], [y * scale for y in ys])
    assert a == b


@settings(max_examples=50)
@given(
    st.lists(st.floats(-0.01, 0.01), min_size=3, max_size=5),
    st.lists(st.floats(-0.01, 0.01), min_size=3, max_size=5),
    st.floats(0.3, 0.9),
)
def test_a_large_shift_with_tight_spread_is_significant(
    ex: list[float], ey: list[float], factor: float
) -> None:
    est = ratio.ratio_change([1000 * factor * (1 + e) for e in ex], [1000 * (1 + e) for e in ey])
    assert est.p_less < 0.025
    assert est.high is not None and est.high < 0


def test_ratio_interval_contains_the_change_and_widens_with_confidence() -> None:
    xs, ys = [90.0, 95.0, 93.0], [100.0, 104.0, 98.0]
    narrow = ratio.ratio_change(xs, ys, confidence=0.9)
    wide = ratio.ratio_change(xs, ys, confidence=0.99)
    assert narrow.low is not None and narrow.high is not None
    assert wide.low is not None and wide.high is not None
    assert wide.low < narrow.low < narrow.change < narrow.high < wide.high
    assert narrow.change == pytest.approx(ratio.mean(xs) / ratio.mean(ys) - 1)


def test_one_repetition_per_side_has_no_interval_unless_there_is_a_series() -> None:
    assert not ratio.ratio_change([90.0], [100.0]).has_interval
    series = [[100.0 + (i % 3) for i in range(20)]]
    est = ratio.ratio_change([90.0], [100.0], baseline_series=series)
    assert est.has_interval  # one side's spread stands in for both


def test_lucky_agreement_between_repetitions_is_floored_by_the_per_second_noise() -> None:
    rng = random.Random(3)
    noisy = [[100 * (1 + rng.gauss(0, 0.2)) for _ in range(20)] for _ in range(2)]
    bare = ratio.ratio_change([97.0, 97.0], [100.0, 100.0])
    floored = ratio.ratio_change(
        [97.0, 97.0], [100.0, 100.0], current_series=noisy, baseline_series=noisy
    )
    assert bare.p_less == 0.0  # zero spread: any difference is certain
    assert floored.p_less > 0.05  # 3 % is nothing against 20 % per-second noise


def test_zero_current_mean_is_a_certain_total_loss() -> None:
    est = ratio.ratio_change([0.0, 0.0], [100.0, 110.0])
    assert est.change == -1.0 and est.p_less == 0.0
    with pytest.raises(ValueError):
        ratio.ratio_change([1.0], [0.0])


def test_bootstrap_is_reproducible_and_narrower_than_the_t_interval_for_few_repetitions() -> None:
    xs, ys = [90.0, 96.0, 92.0], [100.0, 103.0, 97.0]
    assert ratio.bootstrap_ratio_ci(xs, ys) == ratio.bootstrap_ratio_ci(xs, ys)
    b_low, b_high = ratio.bootstrap_ratio_ci(xs, ys)
    t = ratio.ratio_change(xs, ys)
    assert t.low is not None and t.high is not None
    assert t.low < b_low < b_high < t.high  # why the gate does not use the bootstrap


def test_rate_ratio_of_counts() -> None:
    none = rates.rate_ratio(0, 1000, 0, 1000)
    assert none.change == 0 and none.p_greater == 1.0
    new = rates.rate_ratio(6, 1000, 0, 1000)
    assert new.change == math.inf
    assert new.p_greater == pytest.approx(0.5**6)
    stray = rates.rate_ratio(1, 1000, 0, 1000)
    assert stray.p_greater == pytest.approx(0.5)  # one error proves nothing
    same = rates.rate_ratio(5, 1.0, 5, 1.0)
    # Clopper-Pearson 95 % for 5 of 10 is 0.1871..0.8129
    assert same.low == pytest.approx(0.1871 / 0.8129 - 1, abs=1e-3)
    assert same.high == pytest.approx(0.8129 / 0.1871 - 1, abs=1e-2)
    # exposure matters: 10 errors in twice the requests is the same rate
    assert rates.rate_ratio(10, 2000, 5, 1000).change == pytest.approx(0.0)


@given(st.integers(0, 200), st.integers(0, 200), st.floats(10, 1e6), st.floats(10, 1e6))
def test_rate_ratio_interval_contains_the_estimate(k: int, j: int, n: float, m: float) -> None:
    r = rates.rate_ratio(k, n, j, m)
    assert r.low <= r.change + 1e-9
    assert r.change <= r.high + 1e-9  # inf <= inf when the baseline had none
    assert 0 <= r.p_greater <= 1 and 0 <= r.p_less <= 1


# --- stored baselines: the process instance is the unit of evidence ---------------------

levels = st.lists(st.floats(0.8, 1.2), min_size=2, max_size=5)


@given(levels, levels, st.integers(2, 4))
def test_runs_repeated_on_one_instance_add_no_evidence(
    xs: list[float], ys: list[float], runs_per_instance: int
) -> None:
    """k identical runs on each instance say what one run per instance says: the interval
    is the instances' (without instances given, the copies would narrow it)."""
    k = runs_per_instance
    once = ratio.ratio_change(xs, ys, current_instances=range(len(xs)))
    copies = ratio.ratio_change(
        [x for x in xs for _ in range(k)],
        [y for y in ys for _ in range(k)],
        current_instances=[i for i in range(len(xs)) for _ in range(k)],
        baseline_instances=[i for i in range(len(ys)) for _ in range(k)],
    )
    assert copies.change == pytest.approx(once.change, rel=1e-9, abs=1e-12)
    assert copies.se == pytest.approx(once.se, rel=1e-9, abs=1e-12)
    assert copies.df == pytest.approx(once.df, rel=1e-9)


@given(levels, levels)
def test_a_run_per_instance_or_unknown_instances_count_each_run(
    xs: list[float], ys: list[float]
) -> None:
    plain = ratio.ratio_change(xs, ys)
    assert ratio.ratio_change(xs, ys, current_instances=range(len(xs))) == plain
    assert ratio.ratio_change(xs, ys, current_instances=[None] * len(xs)) == plain
    assert ratio.ratio_change(xs, ys, current_instances=[0] * len(xs)) == plain  # one instance


def test_two_instances_of_three_runs_are_two_units() -> None:
    """A 6 % instance bias between two instances, tight runs on each: grouped, the side
    has 2 units (df 1) and its spread is the instances'; ungrouped it looked like 6 runs."""
    xs = [100.0, 100.5, 99.5, 106.0, 106.5, 105.5]
    spread, units = ratio.unit_spread(xs, instances=[0, 0, 0, 1, 1, 1])
    assert units == 2 and spread is not None and spread.df == 1
    assert spread.rel_var == pytest.approx(ratio.variance([100.0, 106.0]) / 103.0**2)
    ungrouped, runs = ratio.unit_spread(xs)
    assert runs == 6 and ungrouped is not None and ungrouped.df == 5
    with pytest.raises(ValueError, match="one instance number per value"):
        ratio.unit_spread(xs, instances=[0, 1])
