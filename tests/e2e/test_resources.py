"""Server resources, service demand and the generator-bound rule, on real nginx."""

from __future__ import annotations

import json
import statistics
from typing import Any

import pytest

pytest_plugins = ["pytester"]
HELLO = """
def test_hello(webperf):
    webperf.http(webperf.server("nginx"), path="/hello")
"""
QUICK = [
    "-p",
    "no:locust",
    "-W",
    "error",
    "--webperf-duration=3s",
    "--webperf-warmup=1s",
    "--webperf-repeat=1",
    "--webperf-json=out.json",
]


def run(pytester: pytest.Pytester, *options: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    pytester.makepyfile(test_static=HELLO)
    result = pytester.runpytest_subprocess(*QUICK, *options)
    report = json.loads((pytester.path / "out.json").read_text())
    (test,) = report["tests"]
    return result, test


def measured(samples: list[dict[str, Any]], field: str) -> list[float]:
    return [s[field] for s in samples if s["t"] >= 0 and s[field] is not None]


def test_unlimited_nginx_outruns_locust_and_the_run_says_so(
    pytester: pytest.Pytester, engine: None
):
    result, test = run(
        pytester, "--webperf-concurrency=50", "--webperf-user=fast", "--webperf-placement=split"
    )  # a core of its own: contention aside
    (rep,) = test["repetitions"]
    assert rep["generator_cpu_percent"] > 80, rep["generator_cpu_percent"]
    assert rep["generator_bound"] is True
    assert test["verdict"]["status"] == "generator-bound"
    result.assert_outcomes(passed=1)  # generator-bound is reported, it does not fail the test
    result.stdout.fnmatch_lines(["*generator-bound*"])


def test_cpu_limited_nginx_is_the_bottleneck_not_the_generator(
    pytester: pytest.Pytester, engine: None
):
    _, test = run(pytester, "--webperf-concurrency=50", "--webperf-target-cpus=0.05")
    (rep,) = test["repetitions"]
    assert test["target"]["limits"]["cpus"] == 0.05
    assert rep["server_cores"] == 0.05
    cpu = statistics.fmean(measured(rep["resources"], "cgroup_cpu_percent"))
    assert cpu > 0.8 * 5, cpu  # nginx uses (nearly) all of its 5 % of a core
    assert rep["generator_bound"] is False
    assert test["verdict"]["status"] == "no-baseline"


def test_sampled_cpu_agrees_with_the_cgroup_and_gives_service_demand(
    pytester: pytest.Pytester, engine: None
):
    _, test = run(pytester, "--webperf-concurrency=20")
    (rep,) = test["repetitions"]
    resources = rep["resources"]
    assert {s["part"] for s in resources} == {"nginx"}
    assert len(measured(resources, "cpu_percent")) >= 3  # one sample a second
    sampled = sum(measured(resources, "cpu_percent"))
    cgroup = sum(measured(resources, "cgroup_cpu_percent"))
    assert sampled == pytest.approx(cgroup, rel=0.1, abs=3), (sampled, cgroup)
    assert all(s["rss_mb"] > 0 and s["processes"] >= 2 for s in resources)  # master + workers
    # service demand: cgroup CPU seconds over the measured phase per request
    assert rep["cpu_per_req_us"] == pytest.approx(rep["server_cpu_seconds"] * 1e6 / rep["requests"])
    assert 1 < rep["cpu_per_req_us"] < 2000
    assert rep["capacity_rps"] == pytest.approx(rep["server_cores"] * 1e6 / rep["cpu_per_req_us"])
