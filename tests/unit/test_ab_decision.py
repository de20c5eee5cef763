"""The paired (A/B) decision, the detectable change and the absolute error limit."""

from __future__ import annotations

import math
import random

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.test_compare import make, make_run

from pytest_webperf.gate.decide import decide, settled
from pytest_webperf.gate.grammar import parse_checks
from pytest_webperf.gate.outcome import unsettled
from pytest_webperf.models.measurement import RunResult
from pytest_webperf.stats import ratio

NOISE = [0.01, -0.01, 0.005, -0.005]


def sides(a: list[float], b: list[float]) -> tuple[list[RunResult], list[RunResult]]:
    return (
        [make_run(v, rep=i, noise=NOISE) for i, v in enumerate(a)],
        [make_run(v, rep=i, noise=NOISE) for i, v in enumerate(b)],
    )


def ab(a: list[float], b: list[float], instances: list[int] | None = None, spec: str = "rps:5%"):
    base, change = sides(a, b)
    return decide(
        make(change),
        make(base),
        parse_checks(spec),
        instances=instances if instances is not None else list(range(len(a))),
        look=1,
    )


def test_a_slower_change_fails_against_its_base() -> None:
    verdict = ab([1000, 1010, 990, 1005], [880, 890, 870, 885])
    assert verdict.status == "regression"
    check = verdict.checks[0]
    assert check["outcome"] == "fail"
    assert check["baseline"] > check["current"]
    assert check["high"] < 0


def test_a_pair_that_drifts_together_is_not_a_regression() -> None:
    # the machine slows by 30 % over the run; A and B follow it together
    a = [1000, 900, 800, 700]
    verdict = ab(a, [v * 1.002 for v in a])
    assert verdict.status == "pass"
    assert "could detect >=" in verdict.checks[0]["message"]


def test_a_stored_baseline_comparison_of_the_same_drift_could_not_tell() -> None:
    a = [1000, 900, 800, 700]
    stored = decide(make(sides(a, a)[1]), make(sides(a, a)[0]), parse_checks("rps:5%"))
    paired = ab(a, [v * 1.002 for v in a])
    assert paired.checks[0]["detectable"] < stored.checks[0]["detectable"]


def test_pairs_on_one_instance_count_once() -> None:
    # four pairs on two instances: the interval is over 2 units (df 1), wider than over 4
    a = [1000, 1000, 1000, 1000]
    b = [1030, 1034, 1002, 1006]
    per_pair = ab(a, b, [0, 1, 2, 3])
    per_instance = ab(a, b, [0, 0, 1, 1])
    assert per_instance.checks[0]["detectable"] > per_pair.checks[0]["detectable"]


def test_noisy_pairs_are_undecided_and_say_what_they_could_detect() -> None:
    verdict = ab([1000, 1200, 800], [1100, 900, 1000])
    assert verdict.status == "undecided"
    check = verdict.checks[0]
    assert check["outcome"] in ("undecided", "not-credible")
    assert check["detectable"] > 0.05
    assert not settled_checks(verdict)


def test_require_power_turns_undecided_into_a_failure() -> None:
    base, change = sides([1000, 1200, 800], [1100, 900, 1000])
    verdict = decide(
        make(change),
        make(base),
        parse_checks("rps:5%"),
        instances=[0, 1, 2],
        look=1,
        require_power=True,
    )
    assert verdict.failed
    assert "--webperf-require-power" in verdict.reasons[0]


def settled_checks(verdict) -> bool:  # type: ignore[no-untyped-def]
    return not any(unsettled(c["outcome"], c["metric"]) for c in verdict.checks)


def test_a_later_look_needs_stronger_evidence() -> None:
    base, change = sides([1000, 1010, 990, 1000], [950, 965, 935, 945])
    first = decide(make(change), make(base), parse_checks("rps:3%"), instances=[0, 1, 2, 3], look=1)
    late = decide(make(change), make(base), parse_checks("rps:3%"), instances=[0, 1, 2, 3], look=6)
    assert first.checks[0]["detectable"] < late.checks[0]["detectable"]


# --- absolute error limit: a broken server never passes ---------------------------------


def failing(errors: int, requests_per_s: float = 1000) -> list[RunResult]:
    runs = []
    for i in range(3):
        run = make_run(requests_per_s, rep=i)
        runs.append(
            RunResult(
                **{
                    **run.__dict__,
                    "errors": errors,
                    "error_kinds": {"http_500": errors} if errors else {},
                }
            )
        )
    return runs


def test_every_request_failing_is_broken_without_a_baseline() -> None:
    runs = failing(errors=20_000)
    verdict = decide(make(runs), None, parse_checks("rps:5%"), max_error_rate=0.01)
    assert verdict.status == "broken"
    assert verdict.failed
    assert "http_500: 60,000" in verdict.reasons[0]


def test_a_few_errors_over_the_limit_fail_but_are_not_broken() -> None:
    runs = failing(errors=400)  # 2 %
    verdict = decide(make(runs), None, parse_checks("rps:5%"), max_error_rate=0.01)
    assert verdict.status == "regression"
    assert verdict.reasons[0].startswith("1,200 of 60,000 requests failed")


def test_errors_within_the_limit_leave_a_first_run_without_a_baseline() -> None:
    verdict = decide(make(failing(errors=10)), None, parse_checks("rps:5%"), max_error_rate=0.01)
    assert verdict.status == "no-baseline"


def test_saving_a_first_run_does_not_say_there_is_no_baseline() -> None:
    verdict = decide(make(failing(errors=0)), None, parse_checks("rps:5%"), saving=True)
    assert verdict.status == "pass"
    assert not any("no baseline" in r for r in verdict.reasons)


def test_one_stray_error_does_not_hold_a_gate_open() -> None:
    clean, stray = make(failing(0)), make(failing(1))
    assert settled([]) and decide(stray, clean, parse_checks("errors:50%")).status == "pass"


# --- the detectable change ----------------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(st.floats(0.001, 0.2), st.integers(2, 30), st.integers(1, 30))
def test_detectable_change_shrinks_with_more_pairs(spread: float, n: int, more: int) -> None:
    few = ratio.detectable_change(spread / math.sqrt(n), n - 1)
    many = ratio.detectable_change(spread / math.sqrt(n + more), n + more - 1)
    assert many < few


@settings(max_examples=80, deadline=None)
@given(st.floats(0.001, 0.2), st.floats(1.01, 5.0), st.integers(2, 30))
def test_detectable_change_grows_with_spread(spread: float, factor: float, n: int) -> None:
    assert ratio.detectable_change(spread * factor, n - 1) > ratio.detectable_change(spread, n - 1)


def test_detectable_change_is_the_textbook_effect_at_large_samples() -> None:
    # z(0.975) + z(0.8) = 1.960 + 0.842 = 2.802
    assert math.isclose(ratio.detectable_change(0.01, None), math.expm1(0.02802), rel_tol=1e-3)


def test_paired_change_with_identical_sides_is_zero() -> None:
    est = ratio.paired_change([0.0, 0.0, 0.0], [0, 1, 2])
    assert est.change == 0.0


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000))
def test_paired_interval_covers_the_true_change_mostly(seed: int) -> None:
    # a sanity property of one draw: the 95 % interval of 8 pairs with 3 % noise around a
    # +10 % change contains +10 % unless the draw is extreme (checked loosely)
    rng = random.Random(seed)
    ratios = [math.log(1.10) + rng.gauss(0, 0.03) for _ in range(8)]
    est = ratio.paired_change(ratios, list(range(8)))
    assert est.low is not None and est.high is not None
    assert est.low < 0.10 + 0.08 and est.high > 0.10 - 0.08
