"""Unit tests of the check parser and of the verdict (compare.py)."""

from __future__ import annotations

import dataclasses
import random
import re
import statistics
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_webperf.errors import OptionError
from pytest_webperf.gate import grammar as checks_module
from pytest_webperf.gate.decide import decide, evaluate
from pytest_webperf.gate.grammar import (
    DEFAULT_CHECKS,
    AbsoluteCheck,
    RelativeCheck,
    parse_check,
    parse_checks,
)
from pytest_webperf.gate.metrics import METRICS
from pytest_webperf.models.measurement import Measurement, RunResult
from pytest_webperf.models.samples import Latency, ResourceSample, Snapshot
from pytest_webperf.models.workload import Workload

# --- builders ----------------------------------------------------------------------------


def make_run(
    rps: float,
    *,
    seconds: int = 20,
    p95_ms: float = 10.0,
    errors: int = 0,
    cpu_us: float | None = 200.0,
    noise: Sequence[float] = (),
    resources: Sequence[ResourceSample] = (),
    rep: int = 0,
) -> RunResult:
    """A repetition at ``rps`` whose per-second series wobbles by ``noise`` (fractions)."""
    snaps = []
    for t in range(seconds):
        wobble = noise[t % len(noise)] if noise else 0.0
        snaps.append(
            Snapshot(
                t=t + 1.0,
                elapsed=1.0,
                users=100,
                requests=max(0, round(rps * (1 + wobble))),
                errors=0,
                timeouts=0,
                bytes=0,
                p50_ms=p95_ms / 2,
                p95_ms=p95_ms,
                p99_ms=p95_ms * 1.5,
            )
        )
    requests = sum(s.requests for s in snaps)
    latency = Latency(
        mean_ms=p95_ms / 2,
        p50_ms=p95_ms / 2,
        p90_ms=p95_ms * 0.9,
        p95_ms=p95_ms,
        p99_ms=p95_ms * 1.5,
        p999_ms=p95_ms * 2,
        max_ms=p95_ms * 3,
    )
    return RunResult(
        repetition=rep,
        concurrency=100,
        duration_s=float(seconds),
        requests=requests,
        errors=errors,
        timeouts=0,
        connect_errors=0,
        bytes=0,
        latency=latency,
        series=tuple(snaps),
        resources=tuple(resources),
        server_cpu_seconds=None if cpu_us is None else cpu_us * requests / 1e6,
    )


def make(runs: Sequence[RunResult]) -> Measurement:
    return Measurement(
        nodeid="suites/test_x.py::test_hello[nginx-c100]",
        name="/hello",
        server="nginx",
        concurrency=100,
        workload=Workload(),
        runs=tuple(runs),
    )


def of_rps(values: Sequence[float], **kw: object) -> Measurement:
    return make([make_run(v, rep=i, **kw) for i, v in enumerate(values)])  # type: ignore[arg-type]


# --- parser ------------------------------------------------------------------------------


def test_parses_relative_checks_and_limits() -> None:
    assert parse_checks("rps:5%, cpu_per_req:5%,p95:10%,errors:0,rss:20%") == (
        RelativeCheck("rps", 5),
        RelativeCheck("cpu_per_req", 5),
        RelativeCheck("p95", 10),
        AbsoluteCheck("errors", "<=", 0),
        RelativeCheck("rss", 20),
    )
    assert parse_checks("p99_ms<500,error_rate<0.01,rss_mb<512,rps>=1000") == (
        AbsoluteCheck("p99", "<", 500),
        AbsoluteCheck("error_rate", "<", 0.01),
        AbsoluteCheck("rss", "<", 512),
        AbsoluteCheck("rps", ">=", 1000),
    )
    assert parse_check("rps:-5%") == RelativeCheck("rps", 5)  # signs as in the design doc
    assert parse_check("p95:+10%") == RelativeCheck("p95", 10)
    assert parse_check("P95_MS : 12.5 %") == RelativeCheck("p95", 12.5)
    assert parse_checks("none") == () and parse_checks("") == ()


def test_str_uses_the_unit_suffixed_name_for_limits() -> None:
    assert str(AbsoluteCheck("p99", "<", 500)) == "p99_ms<500"
    assert str(AbsoluteCheck("errors", "<=", 0)) == "errors<=0"
    assert str(RelativeCheck("cpu_per_req", 2.5)) == "cpu_per_req:2.5%"
    assert checks_module.format_checks(DEFAULT_CHECKS) == "rps:5%,cpu_per_req:5%,p95:20%,errors:50%"


@pytest.mark.parametrize(
    ("spec", "names"),
    [
        ("rps", "'rps'"),
        ("rps:5%,,p95:10%", "empty check"),
        ("rsp:5%", "unknown metric 'rsp'"),
        ("rps:+5%", "rps is worse when it falls"),
        ("p95:-10%", "p95 is worse when it rises"),
        ("p95:10", "needs a unit: write p95:10% .* or p95_ms<10"),
        ("errors:1.5", "needs a unit"),
        ("rps:5%,rps:5%", "given twice"),
        ("p99_ms<", "'p99_ms<'"),
        ("rps:five%", "'rps:five%'"),
        ("rps>1e400", "must be finite"),
    ],
)
def test_bad_specs_name_the_bad_part_and_the_grammar(spec: str, names: str) -> None:
    with pytest.raises(OptionError, match=names) as info:
        parse_checks(spec)
    if "twice" not in names and "finite" not in names:
        assert "METRIC:N%" in str(info.value) or "write" in str(info.value)


numbers = st.one_of(
    st.integers(0, 10**6).map(float), st.floats(0, 1e6, allow_nan=False, allow_infinity=False)
)
checks = st.one_of(
    st.builds(RelativeCheck, st.sampled_from(sorted(METRICS)), numbers),
    st.builds(
        AbsoluteCheck,
        st.sampled_from(sorted(METRICS)),
        st.sampled_from(["<", "<=", ">", ">="]),
        numbers,
    ),
)


@given(checks)
def test_str_round_trips_through_the_parser(check: checks_module.Check) -> None:
    assert parse_check(str(check)) == check


@given(st.lists(checks, min_size=1, max_size=6, unique_by=str))
def test_a_list_round_trips(items: list[checks_module.Check]) -> None:
    assert parse_checks(checks_module.format_checks(items)) == tuple(items)


# --- verdicts ----------------------------------------------------------------------------

NOISE = (0.03, -0.02, 0.01, -0.04, 0.02)  # per-second wobble, a few %


def test_no_baseline_passes_and_says_so_but_limits_still_apply() -> None:
    current = of_rps([1000, 1010, 990], errors=2)
    verdict = decide(current, None, parse_checks("rps:5%"))
    assert verdict.status == "no-baseline"
    assert verdict.reasons == ("no baseline (run with --webperf-save)",)
    failed = decide(current, None, parse_checks("rps:5%,errors:0"))
    assert failed.status == "regression"
    assert failed.reasons[0] == "errors 6 breaks the limit errors<=0"


def test_a_credible_drop_fails_with_one_readable_line() -> None:
    baseline = of_rps([8100, 8150, 8120], noise=NOISE)
    current = of_rps([6790, 6820, 6800], noise=NOISE)
    verdict = decide(current, baseline, parse_checks("rps:5%"))
    assert verdict.status == "regression"
    (line,) = verdict.reasons
    assert re.fullmatch(
        r"rps 8123 -> 6803 \(-16\.2%, 95% CI -\d+\.\d%\.\.-\d+\.\d%\) "
        r"beyond -5%",
        line,
    ), line


def test_a_change_within_the_noise_is_undecided_not_a_failure() -> None:
    baseline = of_rps([1000, 1100, 900])
    current = of_rps([880, 1050, 800])  # -9 % on average, repetitions all over the place
    verdict = decide(current, baseline, parse_checks("rps:5%"))
    assert verdict.status == "undecided"
    assert not verdict.failed
    # -9 % but no credible change, and the run could not have seen 5 %: it says so
    assert "too noisy to judge 5%: could detect" in verdict.notes[0]
    assert verdict.checks[0]["outcome"] == "undecided"
    assert verdict.checks[0]["detectable"] > 0.05


def test_improvements_are_notes() -> None:
    baseline = of_rps([1000, 1002, 998], noise=NOISE)
    current = of_rps([1300, 1302, 1298], noise=NOISE)
    verdict = decide(current, baseline, parse_checks("rps:5%"))
    assert verdict.status == "pass" and verdict.reasons == ()
    assert "better than the baseline" in verdict.notes[0]


def test_generator_bound_throughput_is_never_a_pass() -> None:
    same = of_rps([1000, 1001, 999], noise=NOISE)
    verdict = decide(same, same, parse_checks("rps:5%,p95:10%"), generator_bound=True)
    assert verdict.status == "generator-bound"
    assert "--webperf-workers" in verdict.reasons[0]
    assert "rps" in verdict.reasons[0]
    assert any("not a measure of the server" in n for n in verdict.notes)


def test_generator_bound_still_sees_a_slower_server_through_cpu_per_req() -> None:
    # the generator caps rps at 1000 either way; the server now burns 12 % more CPU each
    baseline = make([make_run(1000, cpu_us=200 * (1 + e), noise=NOISE) for e in NOISE[:4]])
    current = make([make_run(1000, cpu_us=224 * (1 + e), noise=NOISE) for e in NOISE[:4]])
    verdict = decide(current, baseline, DEFAULT_CHECKS, generator_bound=True)
    assert verdict.status == "regression"
    assert verdict.reasons[0].startswith("cpu_per_req 199us -> 222.9us (+12.0%")
    assert "generator-bound" in verdict.reasons[1]


def test_errors_are_compared_as_rates() -> None:
    clean = of_rps([1000, 1000, 1000])
    stray = make([make_run(1000, errors=1), make_run(1000), make_run(1000)])
    broken = make([make_run(1000, errors=20) for _ in range(3)])
    assert decide(stray, clean, parse_checks("errors:50%")).status == "pass"
    verdict = decide(broken, clean, parse_checks("errors:50%"))
    assert verdict.status == "regression"
    assert verdict.reasons[0].startswith("errors 0 -> 60 (0.000% -> 0.100% of requests) (+inf%")
    assert decide(broken, broken, parse_checks("errors:50%")).status == "pass"


def test_resource_metrics_sum_parts_per_second_and_ignore_the_warm_up() -> None:
    def samples(cpu: float, rss: float) -> list[ResourceSample]:
        out = [
            ResourceSample(t=-1.0, part="app", cpu_percent=999, rss_mb=999, processes=1, threads=1)
        ]
        for t in range(1, 11):
            out += [
                ResourceSample(
                    t=float(t), part=p, cpu_percent=cpu, rss_mb=rss + t, processes=1, threads=1
                )
                for p in ("app", "db")
            ]
        return out

    run = make_run(1000, resources=samples(40.0, 100.0), cpu_us=None)
    assert METRICS["cpu"].per_run(run) == 80.0
    assert METRICS["rss"].per_run(run) == 220.0
    # no cgroup counter: CPU % integrated over the measured 20 s
    assert METRICS["cpu_per_req"].per_run(run) == pytest.approx(0.8 * 20 * 1e6 / 20000)
    checks = parse_checks("rss_mb<200,cpu:10%")
    verdict = decide(make([run]), make([run]), checks)
    assert verdict.reasons == ("rss_mb 220MB breaks the limit rss_mb<200",)


def test_unmeasured_metrics_are_skipped_with_a_note() -> None:
    current = of_rps([1000, 1000], cpu_us=None)  # no cgroup counter, no samples
    verdict = decide(current, current, parse_checks("cpu_per_req:5%,rss_mb<100"))
    assert verdict.status == "pass"
    assert set(verdict.notes) == {
        "rss_mb<100: skipped, rss was not measured in this run",
        "cpu_per_req:5%: skipped, cpu_per_req was not measured in this run",
    }


def test_one_repetition_without_series_falls_back_to_the_threshold() -> None:
    baseline = make([make_run(1000, seconds=2)])
    current = make([make_run(800, seconds=2)])
    verdict = decide(current, baseline, parse_checks("rps:5%"))
    assert verdict.status == "regression"
    assert "threshold alone decided" in verdict.reasons[0]


def test_check_results_carry_the_numbers_for_reports() -> None:
    baseline = of_rps([1000, 1010, 990], noise=NOISE)
    (result,) = evaluate(of_rps([700, 707, 693], noise=NOISE), baseline, parse_checks("rps:5%"))
    data = result.to_dict()
    assert data["outcome"] == "fail" and data["check"] == "rps:5%"
    assert data["change"] == pytest.approx(-0.3, abs=1e-3)
    assert data["low"] < data["change"] < data["high"]


# --- properties --------------------------------------------------------------------------

rates = st.lists(st.floats(100, 1e5), min_size=1, max_size=5)
wobbles = st.lists(st.floats(-0.3, 0.3), min_size=1, max_size=7)


@settings(max_examples=60, deadline=None)
@given(rates, wobbles, st.sampled_from(["rps:5%", "p95:10%", "cpu_per_req:0%", "errors:0%"]))
def test_identical_measurements_never_regress(
    values: list[float], noise: list[float], spec: str
) -> None:
    m = make(
        [
            make_run(v, noise=noise, p95_ms=v / 100, errors=int(v) % 3, rep=i)
            for i, v in enumerate(values)
        ]
    )
    # never a failure; with few repetitions it may be "undecided" (too noisy to judge)
    assert decide(m, m, parse_checks(spec)).status in ("pass", "undecided")


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-0.01, 0.01), min_size=2, max_size=5),
    st.lists(st.floats(-0.01, 0.01), min_size=2, max_size=5),
    st.floats(1.3, 3.0),
    st.lists(st.floats(-0.02, 0.02), min_size=1, max_size=5),
)
def test_a_shift_far_beyond_the_threshold_with_tight_spread_always_regresses(
    ex: list[float], ey: list[float], factor: float, noise: list[float]
) -> None:
    baseline = make([make_run(1000 * (1 + e), noise=noise, p95_ms=10 * (1 + e)) for e in ey])
    current = make(
        [make_run(1000 / factor * (1 + e), noise=noise, p95_ms=10 * factor * (1 + e)) for e in ex]
    )
    for spec in ("rps:5%", "p95:10%"):
        assert decide(current, baseline, parse_checks(spec)).status == "regression", spec


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(500, 2000), min_size=1, max_size=4),
    st.lists(st.floats(500, 2000), min_size=1, max_size=4),
    wobbles,
    st.integers(1, 6),
)
def test_scaling_every_value_changes_nothing(
    xs: list[float], ys: list[float], noise: list[float], k: int
) -> None:
    """rps, latency and CPU all multiplied by 2**k (exact in floating point)."""
    scale = 2**k

    def build(values: list[float], factor: int) -> Measurement:
        return make(
            [
                make_run(round(v) * factor, noise=(), p95_ms=v * factor, cpu_us=v * factor)
                for v in values
            ]
        )

    spec = parse_checks("rps:5%,p95:10%,cpu_per_req:5%")
    plain = evaluate(build(xs, 1), build(ys, 1), spec)
    scaled = evaluate(build(xs, scale), build(ys, scale), spec)
    assert [r.outcome for r in plain] == [r.outcome for r in scaled]
    assert [r.change for r in plain] == pytest.approx([r.change for r in scaled])


# --- simulation: false alarms and detection ----------------------------------------------


def _simulated(rng: random.Random, level: float, n: int, run_cv: float) -> Measurement:
    """n repetitions; each has its own level (run-to-run noise) and an AR(1) per-second
    series around it, so the repetitions' rps have a total CV of about 5 %."""
    runs = []
    for i in range(n):
        run_level = level * (1 + rng.gauss(0, run_cv))
        e, noise = 0.0, []
        for _ in range(20):
            e = 0.5 * e + rng.gauss(0, 0.05 * 0.75**0.5)
            noise.append(e)
        runs.append(
            make_run(
                run_level,
                noise=noise,
                rep=i,
                cpu_us=200 * level / run_level * (1 + rng.gauss(0, 0.05)),
            )
        )
    return make(runs)


def simulate(
    trials: int, shift: float, *, n: int = 5, seed: int = 20240611, checks: str = "rps:5%"
) -> float:
    """Share of trials that fail, current = baseline level * (1 - shift)."""
    rng = random.Random(seed)
    parsed = parse_checks(checks)
    failed = 0
    for _ in range(trials):
        baseline = _simulated(rng, 1000.0, n, 0.046)
        current = _simulated(rng, 1000.0 * (1 - shift), n, 0.046)
        failed += decide(current, baseline, parsed).status == "regression"
    return failed / trials


def test_measured_rep_cv_of_the_simulation_is_about_five_percent() -> None:
    rng = random.Random(1)
    values = [r.rps for _ in range(200) for r in _simulated(rng, 1000.0, 5, 0.046).runs]
    cv = statistics.stdev(values) / statistics.fmean(values)
    assert 0.045 < cv < 0.055


def test_false_alarm_rate_on_noise_and_detection_of_a_ten_percent_drop(
    capsys: pytest.CaptureFixture[str],
) -> None:
    false_alarms = simulate(600, 0.0)
    detection = simulate(600, 0.10)
    with capsys.disabled():
        print(
            f"\n5 vs 5 repetitions, 5% CV, rps:5%: false alarms {false_alarms:.1%}, "
            f"10% drop detected {detection:.1%}"
        )
    assert false_alarms <= 0.04  # one-sided alpha 2.5 %, plus simulation error
    assert detection >= 0.65


def test_default_checks_catch_a_ten_percent_slower_server_even_when_generator_bound() -> None:
    rng = random.Random(5)
    caught = 0
    for _ in range(200):
        baseline = make(
            [make_run(1000, noise=NOISE, cpu_us=200 * (1 + rng.gauss(0, 0.03))) for _ in range(5)]
        )
        current = make(
            [make_run(1000, noise=NOISE, cpu_us=220 * (1 + rng.gauss(0, 0.03))) for _ in range(5)]
        )
        caught += decide(current, baseline, generator_bound=True).status == "regression"
    assert caught / 200 >= 0.9


def test_mqtt_delivery_metrics_come_from_the_store_read_back() -> None:
    from dataclasses import replace

    from pytest_webperf.models.mqtt import Delivery, MqttResult

    def mqtt_run(lost: int, tps: float, p99_ms: float) -> RunResult:
        store = Delivery(
            consumer="store",
            received=1000 - lost,
            delivered=1000 - lost,
            duplicates=0,
            missing=lost,
            lost=lost,
            backlog=0,
            latency=Latency(1, 1, 1, 1, p99_ms, p99_ms, p99_ms),
        )
        result = MqttResult(
            qos=2,
            interval_s=0.5,
            users=10,
            published=1000,
            acked=1000,
            unacked=0,
            store=store,
            tps=tps,
        )
        return replace(make_run(tps, noise=NOISE), mqtt=result)

    baseline = make([mqtt_run(0, 970 + i, 40 + i) for i in range(3)])
    current = make([mqtt_run(10, 600 + i, 90 + i) for i in range(3)])
    assert METRICS["tps"].per_run(current.runs[0]) == 600
    verdict = decide(current, baseline, parse_checks("tps:5%,lost:0%,dup:0%,e2e_p99:20%"))
    assert verdict.status == "regression"
    assert verdict.reasons[0].startswith("tps 971 -> 601 (-38.1%")
    assert verdict.reasons[1].startswith("lost 0 -> 30 (0.000% -> 1.000% of messages) (+inf%")
    assert verdict.reasons[2].startswith("e2e_p99 41ms -> 91ms (+122.0%")
    http = of_rps([1000, 1000])
    skipped = decide(http, http, parse_checks("lost:0%,lost<=0"))
    assert skipped.status == "pass" and len(skipped.notes) == 2


def test_a_detectable_change_beyond_reason_is_shown_capped() -> None:
    # two repetitions a side, far apart: the t quantile with 1 df makes it astronomic
    verdict = decide(of_rps([1000, 400]), of_rps([1000, 1010]), parse_checks("rps:5%"))
    assert "> 1000% (too few repetitions or instances to say more)" in " ".join(verdict.notes)


# --- process instances -------------------------------------------------------------------


def on_instances(m: Measurement, instances: Sequence[int | None]) -> Measurement:
    runs = [dataclasses.replace(r, instance=i) for r, i in zip(m.runs, instances, strict=True)]
    return dataclasses.replace(m, runs=tuple(runs))


@pytest.mark.parametrize(
    ("mine", "theirs", "side"),
    [
        ([0, 1, 2], [0, 1, 2], None),  # restarted: the intervals span instances
        ([None] * 3, [None] * 3, None),  # stored before instances were: no claim
        ([0, 0, 0], [0, 1, 2], "this run"),
        ([0, 1, 2], [4, 4, 4], "the baseline"),
        ([0, 0, 0], [1, 1, 1], "this run and the baseline each"),
    ],
)
def test_a_side_on_a_single_instance_is_named_in_a_note(
    mine: list[int | None], theirs: list[int | None], side: str | None
) -> None:
    current = on_instances(of_rps([1000, 1010, 990], noise=NOISE), mine)
    baseline = on_instances(of_rps([1000, 1005, 995], noise=NOISE), theirs)
    notes = decide(current, baseline, parse_checks("rps:5%")).notes
    said = [n.split(":")[0] for n in notes if "single process instance" in n]
    assert said == ([] if side is None else [f"{side} ran on a single process instance"])
    assert not [n for n in decide(current, None, parse_checks("rps:5%")).notes if "instance" in n]
    assert not [
        n for n in decide(current, baseline, parse_checks("p95_ms<50")).notes if "instance" in n
    ]


def test_an_ab_run_never_restarted_says_so_and_one_restarted_does_not() -> None:
    change, base = of_rps([1000, 1010, 990], noise=NOISE), of_rps([1000, 1005, 995], noise=NOISE)
    never = decide(change, base, parse_checks("rps:5%"), instances=[0, 0, 0]).notes
    assert any(n.startswith("each side ran on a single process instance") for n in never)
    restarted = decide(change, base, parse_checks("rps:5%"), instances=[0, 1, 2]).notes
    assert not any("single process instance" in n for n in restarted)
