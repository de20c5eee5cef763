"""The psutil process tree of a real container against its cgroup counters."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from docker.models.containers import Container

from pytest_webperf.sampling.cgroup import CgroupReader, owns_its_cgroup
from pytest_webperf.sampling.monitor import ResourceMonitor
from pytest_webperf.sampling.resources import cpu_stats
from pytest_webperf.targets.engine import docker_client

pytestmark = pytest.mark.e2e

IMAGE = "debian:bookworm-slim"
BOUNDED = ["timeout", "120", "sh", "-c"]  # a container left by a killed pytest ends anyway
LABEL = {"pytest-webperf.test": "sampler"}


def run(command: str) -> Iterator[Container]:
    container = docker_client().containers.run(
        IMAGE, [*BOUNDED, command], detach=True, network_mode="host", labels=LABEL
    )
    try:
        container.reload()
        yield container
    finally:
        container.remove(force=True)


@pytest.fixture
def busy_container(engine: None) -> Iterator[Container]:
    """One shell busy-looping (under timeout(1)), so about one core."""
    yield from run("while :; do :; done")


@pytest.fixture
def churning_container(engine: None) -> Iterator[Container]:
    """A shell starting short-lived processes: CPU psutil cannot see, the cgroup can."""
    yield from run("while :; do /bin/true; done")


def measure(container: Container, seconds: float) -> ResourceMonitor:
    pid = int(container.attrs["State"]["Pid"])
    with ResourceMonitor({"box": pid}, container_ids={"box": str(container.id)}) as monitor:
        time.sleep(1.2)  # warm-up
        monitor.mark_start()
        time.sleep(seconds)
        monitor.mark("end")
    assert monitor.errors == []
    return monitor


def test_the_container_heads_its_own_cgroup(busy_container: Container) -> None:
    pid = int(busy_container.attrs["State"]["Pid"])
    assert owns_its_cgroup(pid)
    reader = CgroupReader.for_pid(pid)
    assert reader is not None
    assert str(busy_container.id) in reader.path
    assert reader.cpu_limit_cores() is None  # started without --cpus


def test_psutil_tree_cpu_agrees_with_the_cgroup(busy_container: Container) -> None:
    monitor = measure(busy_container, 5.0)
    assert monitor.cpu_sources == {"box": "cgroup"}
    cgroup = monitor.cpu_seconds("start", "end", source="cgroup")["box"]
    tree = monitor.cpu_seconds("start", "end", source="psutil")["box"]
    assert cgroup is not None and tree is not None
    print(
        f"\nbusy loop, 5 s: cgroup {cgroup:.3f} s, psutil tree {tree:.3f} s, "
        f"difference {abs(tree - cgroup) / cgroup:.2%}"
    )
    assert cgroup > 0.25  # the loop ran (one core, shared with others: above 5 %)
    assert abs(tree - cgroup) <= 0.05 * cgroup + 0.05  # a few % (+ 10 ms clock ticks x 5)

    measured = [s for s in monitor.samples() if s.t >= 0]
    assert len(measured) >= 4
    cgroup_percent = [s.cgroup_cpu_percent for s in measured]
    assert None not in cgroup_percent
    # one second apart, both sides are read a moment apart (more when the sampler
    # thread waits for a contended core): compare the means, where that cancels
    stats = cpu_stats(measured)
    assert stats is not None and 0 < stats.mean < 130
    cgroup_mean = sum(p or 0.0 for p in cgroup_percent) / len(cgroup_percent)
    print(f"per-second mean: psutil {stats.mean:.1f} %, cgroup {cgroup_mean:.1f} %")
    assert abs(stats.mean - cgroup_mean) < 5


def test_memory_figures_are_sane(busy_container: Container) -> None:
    monitor = measure(busy_container, 1.0)
    samples = monitor.samples()
    with_full = [s for s in samples if s.pss_mb is not None]
    assert with_full, "the first sample reads PSS and USS"
    for sample in samples:
        assert sample.processes == 2 and sample.threads == 2  # timeout(1) and the shell
        assert 0.2 < sample.rss_mb < 50
        assert sample.cgroup_memory_mb is not None and 0 < sample.cgroup_memory_mb < 100
        assert sample.fds is not None and sample.fds >= 3
        assert sample.connections == 0
    for sample in with_full:
        assert sample.uss_mb is not None and sample.pss_mb is not None
        assert 0 < sample.uss_mb <= sample.pss_mb <= sample.rss_mb


def test_the_cgroup_sees_cpu_of_processes_psutil_missed(churning_container: Container) -> None:
    """Short-lived processes escape psutil's polls; what their parent reaps is recovered.

    The shell waits for each /bin/true, so its children_* times hold their CPU:
    the tree figure comes close to the cgroup's, but the cgroup stays the source.
    """
    monitor = measure(churning_container, 3.0)
    cgroup = monitor.cpu_seconds("start", "end", source="cgroup")["box"]
    tree = monitor.cpu_seconds("start", "end", source="psutil")["box"]
    assert cgroup is not None and tree is not None
    print(
        f"\nfork churn, 3 s: cgroup {cgroup:.3f} s, psutil tree {tree:.3f} s "
        f"({tree / cgroup:.0%} seen)"
    )
    assert cgroup > 0.3
    assert abs(tree - cgroup) <= 0.10 * cgroup
    assert monitor.total_cpu_seconds("start", "end") == cgroup  # the cgroup is preferred
