"""Folded stacks, CPU per request, and the differential profile of A/B pairs."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_webperf.profiling.stacks import (
    Sample,
    diff,
    fold,
    frame_name,
    merge,
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


@settings(max_examples=50)
@given(st.lists(st.tuples(stacks, st.integers(1, 10_000)), min_size=1, max_size=6))
def test_a_profile_against_itself_changes_nothing(runs: list[tuple[dict[str, int], int]]) -> None:
    samples = [Sample(folded, 0.01, requests) for folded, requests in runs]
    result = diff([(s, s) for s in samples])
    assert result.changes == ()


def _pair(rng: random.Random, slow: float, requests: int = 2000) -> tuple[Sample, Sample]:
    """A server with two handlers; the change makes ``slow_path`` ``slow`` times costlier."""

    def sample(factor: float) -> Sample:
        mean = {"main;serve;fast_path": 300.0, "main;serve;slow_path": 300.0 * factor}
        mean["main;serve"] = 100.0
        folded = {k: max(0, round(rng.gauss(v, v**0.5))) for k, v in mean.items()}
        return Sample(folded, 1 / 99, requests)

    return sample(1.0), sample(slow)


def test_the_function_made_slower_is_first_and_alone() -> None:
    rng = random.Random(26)
    result = diff([_pair(rng, 2.0) for _ in range(4)])
    assert [c.function for c in result.changes] == ["slow_path"]
    change = result.changes[0]
    assert change.low_us > 0
    # 300 more samples of 1/99 s over 2000 requests: ~1515 µs per request
    assert change.change_us == pytest.approx(300 / 99 / 2000 * 1e6, rel=0.2)
    assert change.change_total_us == pytest.approx(change.change_us, rel=0.01)
    assert change.line().startswith("+")
    assert result.tested == 3 and result.pairs == 4


def test_an_a_a_run_flags_nothing() -> None:
    rng = random.Random(7)
    flagged = sum(len(diff([_pair(rng, 1.0) for _ in range(4)]).changes) for _ in range(40))
    assert flagged <= 1  # 1 % per run in all, Bonferroni over the functions


def test_one_pair_decides_nothing_and_requests_matter() -> None:
    rng = random.Random(1)
    assert diff([_pair(rng, 3.0)]).changes == ()
    a, b = _pair(rng, 1.0)
    # the same samples over half the requests: twice the cost per request, everywhere
    pairs = [(a, Sample(b.stacks, b.period_s, a.requests // 2)) for _ in range(4)]
    changed = {c.function for c in diff(pairs).changes}
    assert {"fast_path", "slow_path"} <= changed


def test_merge_adds_up() -> None:
    assert merge({"a": 1}, {"a": 2, "b": 1}) == {"a": 3, "b": 1}
