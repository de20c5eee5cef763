import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_webperf.commands.noise import (
    NoiseError,
    NoiseRun,
    Spread,
    instances_of,
    pairs_in,
    project,
    spread,
)
from pytest_webperf.gate.outcome import POWER
from pytest_webperf.stats import ratio


def test_instances_follow_the_restarts() -> None:
    assert instances_of(6, 2) == [0, 0, 1, 1, 2, 2]
    assert instances_of(5, 2) == [0, 0, 1, 1, 2]
    assert instances_of(3, 0) == [0, 0, 0]


def test_spread_separates_runs_from_instances_on_fixed_values() -> None:
    # two instances, a factor e^0.2 apart; within each, +-0.05 on the log scale
    values = [math.exp(v) for v in (-0.05, 0.05, 0.15, 0.25)]
    found = spread("rps", values, [0, 0, 1, 1])
    within = (2 * 0.05**2 + 2 * 0.05**2) / 2  # pooled, 1 df per instance
    between = ratio.variance([0.0, 0.2]) - within / 2
    assert found.per_run == pytest.approx(math.sqrt(within))
    assert found.instance == pytest.approx(math.sqrt(between))
    assert (found.runs, found.instances) == (4, 2)


def test_identical_instances_have_no_instance_spread() -> None:
    found = spread("rps", [90.0, 110.0, 110.0, 90.0], [0, 0, 1, 1])
    assert found.instance == 0.0  # the instance means agree: chance, clamped at zero
    assert found.per_run > 0


def test_spread_refuses_what_has_no_log() -> None:
    with pytest.raises(ValueError, match="positive"):
        spread("rps", [1.0, 0.0], [0, 0])


@given(
    st.lists(st.floats(0.5, 2.0), min_size=4, max_size=12),
    st.floats(1e-3, 1e6),
)
def test_spread_is_scale_free(values: list[float], scale: float) -> None:
    instances = instances_of(len(values), 2)
    one, other = (
        spread("rps", values, instances),
        spread("rps", [v * scale for v in values], instances),
    )
    assert other.per_run == pytest.approx(one.per_run, abs=1e-9)
    assert other.instance == pytest.approx(one.instance, abs=1e-6)


def test_pairs_in_whole_pairs() -> None:
    assert pairs_in(60, 7.5) == 8
    assert pairs_in(30, 31) == 0
    with pytest.raises(ValueError):
        pairs_in(30, 0)


NOISE = Spread("rps", 1000.0, per_run=0.05, instance=0.03, runs=8, instances=4)


def test_projection_restarting_every_pair_on_fixed_inputs() -> None:
    got = project(NOISE, 10, restart_every=1)  # one look at 10 pairs
    se = math.sqrt((2 * 0.03**2 + 2 * 0.05**2) / 10)
    assert got.detectable == pytest.approx(
        ratio.detectable_change(se, 9, alpha=0.0125, power=POWER)
    )
    assert got.unseen == 0.0


def test_projection_never_restarted_leaves_the_bias_unseen() -> None:
    got = project(NOISE, 10, restart_every=0)
    se = math.sqrt(2 * 0.05**2 / 10)
    assert got.detectable == pytest.approx(
        ratio.detectable_change(se, 9, alpha=0.0125, power=POWER)
    )
    assert got.unseen == pytest.approx(math.sqrt(2) * 0.03)


def test_projection_counts_the_gates_looks() -> None:
    gated = project(NOISE, 10, restart_every=1, min_pairs=3)  # the 8th look
    se = math.sqrt((2 * 0.03**2 + 2 * 0.05**2) / 10)
    alpha = 0.025 / 2**8
    assert gated.detectable == pytest.approx(
        ratio.detectable_change(se, 9, alpha=alpha, power=POWER)
    )


def test_projection_with_fewer_than_two_units_states_nothing() -> None:
    assert project(NOISE, 1, restart_every=1).detectable is None
    assert project(NOISE, 3, restart_every=4).detectable is None  # one instance of 3 pairs


@given(st.integers(2, 200))
def test_more_pairs_detect_less_at_one_look(pairs: int) -> None:
    now = project(NOISE, pairs, restart_every=1).detectable
    later = project(NOISE, pairs + 1, restart_every=1).detectable
    assert now is not None and later is not None and later < now


@pytest.mark.parametrize(("repeat", "restart_every"), [(8, 1), (3, 2)])
def test_a_run_that_cannot_separate_the_spreads_is_refused(repeat: int, restart_every: int) -> None:
    with pytest.raises(NoiseError, match="2 or more repetitions on each of 2 or more instances"):
        NoiseRun("costly", "/work", 8, 1.0, 0.5, repeat, restart_every)
