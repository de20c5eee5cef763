import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_webperf.models.placement import cpu_list, plan
from pytest_webperf.values import parse_cpu_list


@given(st.lists(st.integers(min_value=0, max_value=255), min_size=1, max_size=16, unique=True))
def test_cpu_list_round_trip(cpus):
    assert parse_cpu_list(cpu_list(tuple(cpus))) == tuple(cpus)


def test_ranges():
    assert parse_cpu_list("0-2,5") == (0, 1, 2, 5)


@pytest.mark.parametrize("text", ["", "a", "2-1", "1-", "-1"])
def test_bad_cpu_list(text):
    with pytest.raises(ValueError):
        parse_cpu_list(text)


@pytest.mark.parametrize("cores", range(2, 65))
def test_split_gives_disjoint_nonempty_halves(cores):
    placed = plan("split", cores=cores)
    target = set(parse_cpu_list(placed.target_cpuset or ""))
    generator = set(placed.generator_cpus)
    assert target and generator and not target & generator
    assert target | generator == set(range(cores))


def test_auto_splits_only_big_machines():
    assert plan("auto", cores=2).target_cpuset is None
    assert plan("auto", cores=8).target_cpuset == "4,5,6,7"


def test_explicit_choices_win():
    placed = plan("split", cores=4, generator_cpus=(3,))
    assert placed.generator_cpus == (3,) and placed.target_cpuset == "0,1,2"
    assert plan("none", cores=4, target_cpuset="1").target_cpuset == "1"
    with pytest.raises(ValueError):
        plan("sideways")
