"""The capacity estimate never counts more cores than the target's threads can run at once."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import psutil
from hypothesis import given
from hypothesis import strategies as st

from pytest_webperf.measurement.repetition import usable_cores
from pytest_webperf.models.measurement import RunResult
from pytest_webperf.models.samples import Latency, ResourceSample
from pytest_webperf.sampling.tree import ProcessTreeSampler, gil_bound


def samples(cpu: float, *, threads: int, usable: int | None, parts: int = 1) -> list[Any]:
    return [
        ResourceSample(
            t=float(t),
            part=f"p{p}",
            cpu_percent=cpu,
            rss_mb=1,
            processes=1,
            threads=threads,
            usable_threads=usable,
        )
        for t in range(3)
        for p in range(parts)
    ]


def test_a_threaded_python_server_counts_one_core() -> None:
    """The issue's case: a Python server, 8 threads, 2 cores, not saturated (the
    generator was): one core, so capacity is half of what 2 cores would give."""
    python = samples(60, threads=8, usable=1)
    assert usable_cores(python, None, machine=2) == 1.0
    assert usable_cores(python, 4.0, machine=8) == 1.0  # under a limit too
    assert usable_cores(samples(60, threads=8, usable=8), None, machine=2) == 2.0  # native


def test_python_worker_processes_count_one_core_each() -> None:
    workers = samples(60, threads=4, usable=1, parts=3)  # three parts, one GIL each
    assert usable_cores(workers, None, machine=8) == 3.0
    assert usable_cores(workers, None, machine=2) == 2.0  # never more than the machine


def test_a_single_threaded_server_under_a_larger_limit_counts_one() -> None:
    assert usable_cores(samples(40, threads=1, usable=None), 2.0, machine=4) == 1.0


@given(
    st.integers(min_value=1, max_value=64),
    st.integers(min_value=1, max_value=64),
    st.floats(min_value=0, max_value=6400),
    st.one_of(st.none(), st.floats(min_value=0.1, max_value=64)),
)
def test_never_more_than_threads_limit_or_machine(
    usable: int, machine: int, cpu: float, limit: float | None
) -> None:
    cores = usable_cores(samples(cpu, threads=64, usable=usable), limit, machine=machine)
    assert 0 < cores <= min(usable, limit or machine, machine if limit is None else limit)


def test_capacity_is_the_usable_cores_over_the_demand_and_says_it_is_an_estimate() -> None:
    latency = Latency(0, 0, 0, 0, 0, 0, 0)
    run = RunResult(
        repetition=1,
        concurrency=2,
        duration_s=1.0,
        requests=1000,
        errors=0,
        timeouts=0,
        connect_errors=0,
        bytes=0,
        latency=latency,
        series=(),
        server_cpu_seconds=0.319,  # 319 us per request
        server_cores=usable_cores(samples(60, threads=8, usable=1), None, machine=2),
    )
    assert run.capacity_rps is not None and round(run.capacity_rps) == 3135  # not 6,270
    assert run.to_dict()["capacity_estimate"] is True


def test_python_is_gil_bound_and_a_c_program_is_not() -> None:
    assert gil_bound(psutil.Process())  # this interpreter
    sleeper = subprocess.Popen(["sleep", "5"])
    try:
        assert not gil_bound(psutil.Process(sleeper.pid))
    finally:
        sleeper.kill()
        sleeper.wait()


def test_the_sampler_counts_a_python_tree_one_usable_thread_per_process() -> None:
    code = (
        "import threading, time\n"
        "[threading.Thread(target=time.sleep, args=(5,)).start() for _ in range(4)]\n"
        "time.sleep(5)"
    )
    child = subprocess.Popen([sys.executable, "-c", code])
    try:
        sampler = ProcessTreeSampler(child.pid, "py", fds=False)
        for _ in range(50):
            sample = sampler.sample(0.0)
            if sample.threads >= 5:
                break
            time.sleep(0.1)  # the threads are still starting
        assert sample.threads >= 5 and sample.usable_threads == 1
    finally:
        child.kill()
        child.wait()
