"""Whether a study's ordering holds, judged from repetitions (``ordering.judge``)."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from pytest_webperf.gate import ordering
from pytest_webperf.gate.ordering import HOLDS, NOT_RANKED, NOT_SEPARATED, REVERSED, Side

figure = st.floats(min_value=1.0, max_value=1e6, allow_nan=False, allow_infinity=False)
# five repetitions, each within 3 % of its side's centre
noise = st.lists(st.floats(min_value=-0.03, max_value=0.03), min_size=5, max_size=5)


def side(name: str, values: list[float], **extra: object) -> Side:
    return Side(name, tuple(values), tuple(range(len(values))), **extra)  # type: ignore[arg-type]


@given(st.lists(figure, min_size=2, max_size=10))
def test_identical_samples_are_not_separated(values: list[float]) -> None:
    found = ordering.judge(side("a", values), side("b", values))
    assert found.status == NOT_SEPARATED
    assert found.ratio is not None and math.isclose(found.ratio, 1.0)
    assert found.low is not None and found.high is not None
    assert found.low <= 1.0 + 1e-9 and found.high >= 1.0 - 1e-9


@given(figure, noise, noise)
def test_a_30_percent_gap_with_5_repetitions_of_3_percent_spread_holds(
    centre: float, fast_noise: list[float], slow_noise: list[float]
) -> None:
    fast = [centre * 1.3 * (1 + e) for e in fast_noise]
    slow = [centre * (1 + e) for e in slow_noise]
    found = ordering.judge(side("fast", fast), side("slow", slow))
    assert found.status == HOLDS, found
    assert found.low is not None and found.high is not None
    assert 1.0 < found.low <= found.ratio <= found.high  # type: ignore[operator]
    # the study's ordering the other way round: the same data says reversed
    assert ordering.judge(side("slow", slow), side("fast", fast)).status == REVERSED


@given(
    st.lists(figure, min_size=1, max_size=6),
    st.lists(figure, min_size=1, max_size=6),
    st.integers(min_value=1, max_value=6),
    st.booleans(),
)
def test_a_generator_bound_side_is_never_ranked(
    first: list[float], second: list[float], bound: int, which: bool
) -> None:
    a = side("a", first, bound=min(bound, len(first)) if which else 0)
    b = side("b", second, bound=0 if which else min(bound, len(second)))
    found = ordering.judge(a, b)
    assert found.status == NOT_RANKED and found.low is None and found.high is None
    assert "generator-bound" in found.why and "measured the generator" in found.why
    assert "--webperf-workers" in found.why


@given(figure, figure, st.lists(figure, min_size=1, max_size=6))
def test_one_repetition_separates_nothing(one: float, other: float, many: list[float]) -> None:
    series = ((one,) * 30,)  # even a long, steady per-second series: one run is one unit
    found = ordering.judge(Side("a", (one,), (0,), series), side("b", many))
    assert found.status == NOT_SEPARATED and found.low is None
    assert "one repetition cannot separate anything" in found.why
    assert "a: 1 repetition" in found.why
    assert ordering.judge(side("a", [one]), side("b", [other])).status == NOT_SEPARATED


def test_the_text_gives_the_ratio_and_its_interval() -> None:
    found = ordering.Ordering("nginx-cache", "varnish", 1.0912, 0.97, 1.2213, NOT_SEPARATED)
    assert found.text() == "nginx-cache/varnish 1.09x, 95% CI 0.97..1.22: not separated"
    assert ordering.Ordering("a", "b", None, None, None, NOT_RANKED, "why").text() == (
        "a/b -: not ranked (why)"
    )


def test_runs_on_one_instance_of_a_restarted_server_are_one_unit() -> None:
    # three runs on two instances: two units, not three (the gate's unit_spread)
    assert Side("a", (1.0, 1.1, 1.2), (0, 0, 1)).units == 2
    assert Side("a", (1.0, 1.1, 1.2)).units == 3  # instances unknown: runs are the units


def test_a_line_holds_only_when_every_pair_holds() -> None:
    def o(status: str) -> ordering.Ordering:
        return ordering.Ordering("a", "b", 1.0, None, None, status)

    assert ordering.overall([o(HOLDS), o(HOLDS)]) == HOLDS
    assert ordering.overall([o(HOLDS), o(NOT_SEPARATED)]) == NOT_SEPARATED
    assert ordering.overall([o(HOLDS), o(NOT_RANKED)]) == NOT_RANKED
    assert ordering.overall([o(NOT_RANKED), o(REVERSED)]) == REVERSED
    assert ordering.overall([]) == NOT_SEPARATED


def test_shared_cores_are_said_with_what_they_do_and_placed_apart_is_not() -> None:
    shared = ordering.shared_cores({"mode": "auto", "target_cpuset": None, "generator_cpus": []}, 2)
    assert shared.startswith("server and generator shared the machine's 2 cores")
    assert "less than twice the throughput" in shared and "placement=split" not in shared
    assert "--webperf-placement=split" in ordering.shared_cores({"mode": "none"}, 8)
    assert ordering.shared_cores({"target_cpuset": "2-3", "generator_cpus": [0, 1]}, 4) == ""
    assert ordering.shared_cores(None, 2) == ""


def test_short_counted_repetitions_get_a_note() -> None:
    note = ordering.short_counted({"nginx-cache": [0.52, 0.6], "varnish": [6.0, 3.4, 3.6]})
    assert note.startswith(
        "counted repetitions shorter than 5 s (nginx-cache 2 of 2 (shortest 0.5 s), "
        "varnish 2 of 3 (shortest 3.4 s)): their start-up (connections, a cold server)"
    )
    assert "--webperf-requests" in note
    assert ordering.short_counted({"varnish": [5.0]}) == ""
    assert ordering.short_counted({}) == ""


def test_a_pair_not_separated_says_what_would_separate_the_studys_gap() -> None:
    a = side("a", [100.0, 120.0, 90.0])
    b = side("b", [95.0, 110.0, 85.0])
    found = ordering.judge(a, b, gap=1.28)
    assert found.status == NOT_SEPARATED
    resolution = float(found.why.split("separate about ")[1].split("x")[0])
    assert resolution > 1.28
    needed = int(found.why.rsplit("--webperf-repeat=", 1)[1].rstrip(")"))
    assert needed > 3 and f"the study's 1.28x needs about {needed}" in found.why
    # the same spread with the repetitions it asked for resolves the study's gap
    more = (needed + 2) // 3
    wider = ordering.judge(
        side("a", [100.0, 120.0, 90.0] * more), side("b", [95.0, 110.0, 85.0] * more), gap=1.28
    )
    assert float(wider.why.split("separate about ")[1].split("x")[0]) <= 1.29
    # a gap the run could have seen, not seen
    assert "would have shown; it is not here" in ordering.judge(a, b, gap=2.0).why
    assert ordering.judge(a, b).why.startswith("3 repetitions per side separate about ")


def test_a_tight_difference_under_the_margin_is_not_an_ordering() -> None:
    """Two copies of one server 1 % apart with almost no spread (seen in the e2e test):
    the interval excludes 1, but not the margin two instances differ by."""
    first = side("a", [9_890.0, 9_893.0, 9_887.0, 9_891.0])
    second = side("b", [10_000.0, 9_998.0, 10_003.0, 10_001.0])
    found = ordering.judge(first, second)
    assert found.high is not None and found.high < 1  # statistically, b is faster
    assert found.status == NOT_SEPARATED
    assert "within 5%" in found.why
    assert ordering.judge(side("a", [1.2, 1.21, 1.19]), side("b", [1.0, 1.01, 0.99])).status == (
        HOLDS
    )
