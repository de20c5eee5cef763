"""Folded stacks, CPU per request, and one function's change as reports keep it."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_webperf.profiling.stacks import (
    FunctionChange,
    Sample,
    fold,
    frame_name,
    merge,
    on_stack,
    parse_folded,
    write_folded,
)

frames = (
    st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=12)
    .map(frame_name)
    .filter(bool)
)
stacks = st.dictionaries(
    st.lists(frames, min_size=1, max_size=5).map(";".join), st.integers(1, 10_000), max_size=20
)


@given(stacks)
def test_folding_parses_what_it_writes(folded: dict[str, int]) -> None:
    assert parse_folded(write_folded(folded)) == folded


@dataclass(frozen=True)
class Cost:
    """CPU time per request of one function, in microseconds."""

    self_us: float
    total_us: float


def per_request(sample: Sample) -> dict[str, Cost]:
    """Per function, its self and total CPU time per request (µs)."""
    own, total = sample.counts()
    unit = sample.unit_us
    return {name: Cost(own.get(name, 0) * unit, count * unit) for name, count in total.items()}


def test_fold_counts_each_stack_and_cleans_frames() -> None:
    folded = fold([["main", "handle", "a;b"], ["main", "handle", "a;b"], ["main", "x\ny"]])
    assert folded == {"main;handle;a,b": 2, "main;x y": 1}


def test_parse_folded_names_a_bad_line() -> None:
    with pytest.raises(ValueError, match="line 2"):
        parse_folded("a;b 3\nnot a count\n")
    assert parse_folded("a;b 3\n\na;b 2\n") == {"a;b": 5}


def test_per_request_self_and_total() -> None:
    sample = Sample({"main;f;g": 3, "main;f": 1, "main;f;f": 2}, period_s=0.01, requests=100)
    cost = per_request(sample)
    # one sample = 10 ms over 100 requests = 100 µs/request
    assert cost["g"].self_us == pytest.approx(300)
    assert cost["f"].self_us == pytest.approx(300)  # "main;f" and "main;f;f"
    assert cost["f"].total_us == pytest.approx(600)  # recursion counted once per stack
    assert cost["main"].self_us == 0
    assert cost["main"].total_us == pytest.approx(600)


@given(stacks.filter(bool), st.integers(1, 10_000), st.integers(2, 50))
def test_scaling_requests_scales_the_cost_per_request(
    folded: dict[str, int], requests: int, factor: int
) -> None:
    one = per_request(Sample(folded, 0.01, requests))
    more = per_request(Sample(folded, 0.01, requests * factor))
    assert one.keys() == more.keys()
    for name, cost in one.items():
        assert more[name].self_us == pytest.approx(cost.self_us / factor)
        assert more[name].total_us == pytest.approx(cost.total_us / factor)


def test_merge_adds_up() -> None:
    assert merge({"a": 1}, {"a": 2, "b": 1}) == {"a": 3, "b": 1}


def test_on_stack_counts_a_function_once_per_stack() -> None:
    assert on_stack({"main;f;f": 2, "main;g": 1}) == {"main": 3, "f": 2, "g": 1}


def test_a_function_change_round_trips_with_and_without_its_ratio() -> None:
    plain = FunctionChange("f (srv)", 3.0, 1.0, 5.0, 10.0, 4.0)
    assert FunctionChange.from_dict(plain.to_dict()) == plain and "ratio" not in plain.to_dict()
    tested = FunctionChange("f (srv)", 3.0, 1.0, 5.0, 10.0, 4.0, ratio=1.3, p_value=0.001)
    assert FunctionChange.from_dict(tested.to_dict()) == tested
    assert tested.line() == "+3.0 µs/req  f (srv)"
