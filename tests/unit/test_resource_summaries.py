"""The summaries of a run's resource samples (``resources``): pure functions."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_webperf.gate.metrics import METRICS
from pytest_webperf.models.measurement import Measurement, RunResult
from pytest_webperf.models.samples import GeneratorSample, Latency, ResourceSample
from pytest_webperf.models.workload import Workload
from pytest_webperf.report.json_report import report
from pytest_webperf.sampling.resources import (
    cpu_stats,
    generator_bound,
    peak_rss_mb,
    per_tick_totals,
    tick,
    usable_threads_peak,
)
from pytest_webperf.stats.histogram import Histogram


def sample(t: float, part: str, cpu: float, rss: float = 10.0) -> ResourceSample:
    return ResourceSample(t=t, part=part, cpu_percent=cpu, rss_mb=rss, processes=1, threads=1)


def test_usable_threads_peak_sums_parts_per_tick_a_locked_process_counting_one() -> None:
    def threads(t: float, part: str, n: int, usable: int | None = None) -> ResourceSample:
        return ResourceSample(
            t=t, part=part, cpu_percent=0, rss_mb=1, processes=1, threads=n, usable_threads=usable
        )

    samples = [
        threads(-1, "app", 64),  # warm-up: left out
        threads(0, "app", 8, usable=1),  # a threaded Python server: one at a time
        threads(0, "db", 3),
        threads(1, "app", 8, usable=1),
        threads(1, "db", 5),  # the peak tick: 1 + 5
    ]
    assert usable_threads_peak(samples) == 6
    assert usable_threads_peak(samples[:1]) is None
    assert usable_threads_peak([]) is None


def gen(t: float, cpu: float) -> GeneratorSample:
    return GeneratorSample(t=t, cpu_percent=cpu, processes=1)


def test_cpu_stats_sum_parts_per_tick_and_leave_out_warmup() -> None:
    samples = [
        sample(-1, "a", 500),
        sample(0, "a", 50),
        sample(0, "b", 30),
        sample(1, "a", 70),
        sample(1, "b", 10),
    ]
    whole = cpu_stats(samples)
    assert whole is not None and (whole.mean, whole.max) == (80, 80)
    a = cpu_stats(samples, "a")
    assert a is not None and (a.mean, a.max) == (60, 70)
    with_warmup = cpu_stats(samples, "a", include_warmup=True)
    assert with_warmup is not None and with_warmup.max == 500
    assert cpu_stats([]) is None
    assert cpu_stats(samples, "c") is None


def test_peak_rss_total_is_the_peak_of_the_sum_not_the_sum_of_peaks() -> None:
    samples = [
        sample(0, "a", 0, rss=100),
        sample(0, "b", 0, rss=10),
        sample(1, "a", 0, rss=20),
        sample(1, "b", 50),
        sample(-1, "a", 0, rss=999),
    ]
    assert peak_rss_mb(samples) == {"a": 100, "b": 10, "total": 110}
    assert peak_rss_mb([]) == {}


@given(
    st.lists(
        st.tuples(st.integers(-2, 5), st.sampled_from("abc"), st.floats(0, 400, allow_nan=False))
    )
)
def test_per_tick_totals_keep_every_value(rows: list[tuple[int, str, float]]) -> None:
    samples = [sample(float(t), part, cpu) for t, part, cpu in rows]
    totals = per_tick_totals(samples, "cpu_percent")
    assert len(totals) == len({t for t, _, _ in rows})
    assert sum(totals) == pytest.approx(sum(cpu for _, _, cpu in rows))


def test_generator_bound_when_the_generator_is_saturated_and_the_server_is_not() -> None:
    busy = [gen(t, 97) for t in range(5)]
    idle_server = [sample(t, "s", 60) for t in range(5)]
    assert generator_bound(busy, idle_server, 1, cores=2)


def test_not_generator_bound_when_the_server_is_saturated_too() -> None:
    busy = [gen(t, 97) for t in range(5)]
    assert not generator_bound(busy, [sample(t, "s", 190) for t in range(5)], 1, cores=2)
    # a --cpus=1 target at 95 % is saturated even on a 2-core machine
    saturated = [sample(t, "s", 95) for t in range(5)]
    assert not generator_bound(busy, saturated, 1, cores=2, server_cores=1.0)


def test_not_generator_bound_when_the_generator_has_headroom() -> None:
    assert not generator_bound([gen(t, 60) for t in range(5)], [sample(0, "s", 10)], 1, cores=2)
    # two processes can use two cores: 120 % is not saturation
    assert not generator_bound([gen(t, 120) for t in range(5)], [], 2, cores=2)
    # four processes on two cores cannot exceed 200 %
    assert generator_bound([gen(t, 185) for t in range(5)], [], 4, cores=2)


def test_generator_bound_ignores_warmup_and_missing_data() -> None:
    warm = [gen(-1, 100), gen(0, 40), gen(1, 40)]
    assert not generator_bound(warm, [], 1, cores=2)
    assert not generator_bound([], [sample(0, "s", 10)], 1, cores=2)
    assert not generator_bound([gen(0, 100)], [], 0, cores=2)


def test_one_tick_is_one_millisecond_whatever_the_float_noise() -> None:
    # the parts of one tick, one written back through a rounding writer
    samples = [sample(2.0000001, "proxy", 30), sample(2.0, "backend", 50), sample(3.0, "proxy", 1)]
    assert per_tick_totals(samples, "cpu_percent") == [80, 1]
    assert tick(1.23449) == 1.234


def composite_run() -> RunResult:
    histogram = Histogram()
    histogram.record_many([1000, 2000])
    return RunResult(
        repetition=1,
        concurrency=10,
        duration_s=2.0,
        requests=100,
        errors=0,
        timeouts=0,
        connect_errors=0,
        bytes=0,
        latency=Latency.of(histogram),
        series=(),
        histogram=histogram,
        resources=(
            sample(-1, "proxy", 400, rss=900),  # warm-up: in no figure
            sample(0, "proxy", 30, rss=20),
            sample(0, "backend", 50, rss=100),
            sample(1, "proxy", 10, rss=60),
            sample(1, "backend", 90, rss=50),
        ),
        generator=(gen(-1, 100), gen(0, 40), gen(1, 60)),
    )


def test_the_json_report_and_the_checks_give_server_resources_one_answer() -> None:
    run = composite_run()
    measurement = Measurement("t.py::test", "GET /", "x", 10, Workload(), (run,))
    [repetition] = report([measurement], {})["tests"][0]["repetitions"]
    # parts summed per tick, measured phase only: ticks of 80 % and 100 %, 120 MB and 110 MB
    assert repetition["cpu_percent"] == {"mean": 90, "max": 100}
    assert repetition["rss_mb"] == {"max": 120}
    assert repetition["generator_cpu_percent"] == 50
    assert METRICS["cpu"].per_run(run) == repetition["cpu_percent"]["mean"]
    assert METRICS["rss"].per_run(run) == repetition["rss_mb"]["max"]
