"""The capacity search (``models/capacity.py``), pure: against a monotone SLO it converges to the
threshold within its tolerance, its interval holds the threshold, a generator-bound
probe is never a capacity; its SLO grammar and probe judgment (``fixture/capacity.py``)."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from pytest_webperf.errors import OptionError
from pytest_webperf.fixture.capacity import judge, parse_slo, search_of, users_for
from pytest_webperf.gate.grammar import AbsoluteCheck
from pytest_webperf.models.capacity import Capacity, Probe, Repetition, search, search_all, settle
from pytest_webperf.models.measurement import Latency, RunResult
from pytest_webperf.stats.histogram import Histogram


def threshold(truth: float, bound_at: float = math.inf):
    def probe(rate: float) -> Probe:
        if rate >= bound_at:
            return Probe(rate, "generator-bound", reasons=("saturated",))
        return Probe(rate, "pass" if rate <= truth else "fail", achieved=min(rate, truth))

    return probe


@given(
    truth=st.floats(1.0, 1e5),
    start=st.floats(1.0, 1e4),
    factor=st.floats(1.2, 4.0),
    tolerance=st.floats(0.01, 0.3),
)
def test_a_monotone_slo_is_found_within_the_tolerance(
    truth: float, start: float, factor: float, tolerance: float
) -> None:
    limit = 1e6
    found = search(
        threshold(truth), start=start, limit=limit, factor=factor, tolerance=tolerance,
        max_probes=200,
    )  # fmt: skip
    assume(abs(truth * factor**3 / start - 1) > 1e-6)  # not on the lowest rate tried
    if truth < start / factor**3:
        assert found.status == "below-start" and found.rate is None
        assert found.high is not None and found.high > truth
        return
    assert found.status == "found", found
    assert found.rate is not None and found.low is not None and found.high is not None
    assert found.low <= truth < found.high  # the interval holds the threshold
    assert found.high / found.low <= 1 + tolerance * (1 + 1e-9)
    assert found.rate == found.low
    assert truth / found.rate <= 1 + tolerance * (1 + 1e-9)
    rates = [p.rate for p in found.probes]
    assert len(rates) == len(set(rates))  # no rate probed twice


@given(truth=st.floats(10.0, 1e4), bound_at=st.floats(10.0, 1e4))
def test_a_generator_bound_probe_is_never_a_capacity(truth: float, bound_at: float) -> None:
    found = search(threshold(truth, bound_at), start=10, limit=1e5, max_probes=200)
    if any(p.decision == "generator-bound" for p in found.probes):
        assert found.status == "generator-bound" and found.rate is None
        assert found.high is None and "could not offer" in found.reason
        assert found.probes[-1].decision == "generator-bound"
    else:
        assert found.status == "found" and found.low is not None
        assert found.low <= truth


def test_a_server_that_meets_the_slo_at_the_limit_is_at_the_limit() -> None:
    found = search(threshold(1e9), start=100, limit=1000)
    assert found.status == "at-limit" and found.rate == 1000 and found.high is None
    assert [p.rate for p in found.probes] == [100, 200, 400, 800, 1000]


def test_the_curve_is_by_rate_and_round_trips() -> None:
    found = search(threshold(300), start=100, limit=1e4, slo="p99_ms<100")
    assert [p.rate for p in found.curve] == sorted(p.rate for p in found.probes)
    assert found.knee == found.high
    assert Capacity.from_dict(found.to_dict()) == found
    assert "capacity 29" in str(found) and "p99_ms<100" in str(found)


@pytest.mark.parametrize(
    ("decisions", "clear", "settled"),
    [
        (["pass"], [True], "pass"),
        (["pass"], [False], None),
        (["fail"], [True], "fail"),
        (["pass", "pass"], [False, False], "pass"),
        (["pass", "fail"], [False, False], None),
        (["pass", "fail", "fail"], [False] * 3, "fail"),
        (["pass", "fail", "pass"], [False] * 3, "pass"),
        (["pass", "generator-bound"], [False, True], "generator-bound"),
    ],
)
def test_a_probe_is_repeated_until_decided(
    decisions: list, clear: list[bool], settled: str | None
) -> None:
    assert settle([Repetition(d, c) for d, c in zip(decisions, clear, strict=True)]) == settled


def test_the_slo_is_the_check_grammar_with_units() -> None:
    assert parse_slo("p99<100ms,error_rate<1%") == (
        AbsoluteCheck("p99", "<", 100.0),
        AbsoluteCheck("error_rate", "<", 0.01),
    )
    assert parse_slo("p95_ms<=0.25s, errors<=3") == (
        AbsoluteCheck("p95", "<=", 250.0),
        AbsoluteCheck("errors", "<=", 3.0),
    )
    assert parse_slo("p50[/a]<500us") == (AbsoluteCheck("p50", "<", 0.5, "/a"),)


@pytest.mark.parametrize(
    ("slo", "said"),
    [
        ("", "slo='': an SLO is"),
        ("p99:10%", "bad limit 'p99:10%'"),
        ("p99<100kg", "bad limit"),
        ("nope<3", "unknown metric"),
        ("rps>100ms", "rps is not in ms"),
        ("cpu[/a]<50", "cannot be checked per endpoint"),
    ],
)
def test_a_bad_slo_is_one_line_naming_slo(slo: str, said: str) -> None:
    with pytest.raises(OptionError) as caught:
        parse_slo(slo)
    message = str(caught.value)
    assert message.startswith(f"slo={slo!r}") and said in message and "\n" not in message


def test_bad_search_arguments_are_named() -> None:
    with pytest.raises(OptionError, match=r"webperf.capacity\(start=0\)"):
        search_of(0, 10, 0.05)
    with pytest.raises(OptionError, match="start is at most the limit"):
        search_of(100, 10, 0.05)
    with pytest.raises(OptionError, match=r"tolerance=1\.5"):
        search_of(1, 10, 1.5)


def lat(p99: float) -> Latency:
    return Latency(p99 / 4, p99 / 2, p99, p99, p99, p99, p99)


def run(
    rps: float, p99: float, *, errors: int = 0, peak: int = 50, bound: bool = False, late=0.0
) -> RunResult:
    latency = lat(p99)
    requests = int(rps * 10)
    return RunResult(
        repetition=1,
        concurrency=50,
        duration_s=10.0,
        requests=requests,
        errors=errors,
        timeouts=0,
        connect_errors=0,
        bytes=0,
        latency=latency,
        series=(),
        histogram=Histogram(),
        generator_bound=bound,
        users_peak=peak,
        schedule_lag=lat(late),
    )


def test_judging_a_probe() -> None:
    slo = parse_slo("p99<100ms,error_rate<1%")
    assert judge(run(100, 10), slo, 100) == Repetition("pass", True, ())
    assert judge(run(100, 80), slo, 100).decision == "pass"
    assert not judge(run(100, 80), slo, 100).clear  # near the limit: repeat
    assert judge(run(100, 120), slo, 100).clear is False  # just beyond: repeat
    assert judge(run(100, 300), slo, 100).clear  # far beyond one limit is enough
    assert judge(run(50, 10), slo, 100).clear  # half the rate completed
    failed = judge(run(100, 500, errors=50), slo, 100)
    assert failed.decision == "fail" and failed.clear
    assert failed.reasons == ("p99_ms<100 broken: 500", "error_rate<0.01 broken: 0.05")
    # the server completed 80 of 100/s with every user busy: not sustained
    assert judge(run(80, 10, peak=50), slo, 100).reasons == (
        "completed 80 of the 100 req/s offered",
    )
    # 80 of 100/s with users idle, the sends on time: requests queued in the server
    assert judge(run(80, 10, peak=3), slo, 100).decision == "fail"
    # 80 of 100/s sent late with users idle: the generator fell behind, not the server
    assert judge(run(80, 10, peak=3, late=300), slo, 100).decision == "generator-bound"
    assert judge(run(100, 10, bound=True), slo, 100).decision == "generator-bound"


def test_users_follow_littles_law_at_the_slo() -> None:
    slo = parse_slo("p99<100ms")
    assert users_for(1000, slo, 10) == 200
    assert users_for(10, slo, 10) == 10
    assert users_for(1e6, slo, 10) == 2000
    assert users_for(100, parse_slo("error_rate<1%"), 1) == 200


@given(truths=st.lists(st.floats(10.0, 1e4), min_size=2, max_size=3))
def test_searches_taking_turns_each_find_their_own(truths: list[float]) -> None:
    asked: list[tuple[int, float]] = []

    def side(index: int, truth: float):
        inner = threshold(truth)

        def probe(rate: float) -> Probe:
            asked.append((index, rate))
            return inner(rate)

        return probe

    how = {"start": 10.0, "limit": 1e5, "max_probes": 200}
    found = search_all([side(i, t) for i, t in enumerate(truths)], **how)
    for truth, alone, together in zip(
        truths, [search(threshold(t), **how) for t in truths], found, strict=True
    ):
        assert together.probes == alone.probes  # as if alone
        assert together.low is not None and together.low <= truth
    # turns: while both search, no side probes twice in a row
    both = min(len(f.probes) for f in found)
    firsts = [i for i, _ in asked][: both * len(truths)]
    assert all(a != b for a, b in itertools.pairwise(firsts))
