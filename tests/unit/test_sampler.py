"""Process-tree sampling (``proctree``) on real local process trees, and the monitors."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_webperf.sampling.monitor import GeneratorMonitor, ResourceMonitor, RunMonitor
from pytest_webperf.sampling.resources import generator_cpu_stats
from pytest_webperf.sampling.tree import (
    ProcessCpu,
    ProcessTreeSampler,
    TargetGone,
    parse_proc_net_tcp,
    tree_cpu_delta,
)

# Every child bounds its own life (60 s) so a failed clean-up cannot leak a burner.
BUSY_TREE = """
import subprocess, sys, time
burn = "import time\\nend = time.time() + 60\\nwhile time.time() < end: pass"
burner = subprocess.Popen([sys.executable, "-c", burn])
sleeper = subprocess.Popen(["sleep", "60"])
print("ready", flush=True)
time.sleep(60)
"""

LATE_CHILD = """
import subprocess, sys, time
time.sleep(float(sys.argv[1]))
child = '''
import sys, time
while time.process_time() < 0.3: pass
open(sys.argv[1], "w").close()
time.sleep(60)
'''
subprocess.Popen([sys.executable, "-c", child, sys.argv[2]])
time.sleep(60)
"""

CHURN = """
import subprocess, time
end = time.time() + 30
while time.time() < end:
    subprocess.run(["true"])
"""

SELF_CONNECTED = """
import socket, time
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen()
client = socket.create_connection(server.getsockname())
accepted, _ = server.accept()
print("ready", flush=True)
time.sleep(60)
"""


def spawn(script: str, *args: str, wait_ready: bool = False) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", script, *args], stdout=subprocess.PIPE, text=True
    )
    if wait_ready:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
    return child


def kill_tree(child: subprocess.Popen[str]) -> None:
    try:
        descendants = psutil.Process(child.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        descendants = []
    for process in [*descendants]:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    child.kill()
    child.wait()
    if child.stdout is not None:
        child.stdout.close()
    psutil.wait_procs(descendants, timeout=5)


@pytest.fixture
def busy_tree() -> Iterator[subprocess.Popen[str]]:
    child = spawn(BUSY_TREE, wait_ready=True)
    try:
        yield child
    finally:
        kill_tree(child)


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[str]]:
    child = subprocess.Popen(["sleep", "60"], text=True)
    try:
        yield child
    finally:
        child.kill()
        child.wait()


def own_cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def test_a_tree_with_one_burner_uses_at_most_one_core(busy_tree: subprocess.Popen[str]) -> None:
    burner = next(p for p in psutil.Process(busy_tree.pid).children() if "python" in p.name())
    burnt_before = own_cpu(burner)  # read just before the sampler's window opens...
    sampler = ProcessTreeSampler(busy_tree.pid, "busy")
    time.sleep(2)
    sample = sampler.sample(0.0)
    burnt = own_cpu(burner) - burnt_before  # ...and just after it closes
    assert sample.part == "busy"
    assert sample.processes == 3  # the parent, the burner, the sleeper
    assert sample.threads >= 3
    # one busy loop: up to one core, less when the 2 shared cores are contended;
    # more than a core would be double counting
    assert 0 < sample.cpu_percent < 130
    # the tree's CPU is the burner's (the others sleep): never more than the burner
    # burnt over a window that contains the sampler's, and most of it (the two
    # windows differ by the moments around the sampler's reads, however contended)
    assert 0.5 * burnt - 0.05 <= sampler.cpu_seconds <= burnt + 0.05
    assert 1 < sample.rss_mb < 500
    assert sample.fds is not None and sample.fds >= 9  # stdin/out/err of three processes
    assert sample.pss_mb is not None and sample.uss_mb is not None  # the first sample has them
    assert 0 < sample.uss_mb <= sample.pss_mb <= sample.rss_mb
    assert sampler.sample(1.0).pss_mb is None  # then only every 5th


def test_a_process_born_between_polls_is_counted_from_its_creation(tmp_path: Path) -> None:
    flag = tmp_path / "burnt"
    parent = spawn(LATE_CHILD, "0.5", str(flag))
    try:
        sampler = ProcessTreeSampler(parent.pid, "late")  # primes before the child exists
        assert sampler.sample(0.0).processes == 1
        deadline = time.monotonic() + 30
        while not flag.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert flag.exists(), "the child did not burn its 0.3 s of CPU within 30 s"
        sample = sampler.sample(1.0)
        assert sample.processes == 2
        # its 0.3 s before we first saw it count; counting from first sight would give ~0
        assert sampler.cpu_seconds >= 0.28
    finally:
        kill_tree(parent)


def cpu(pid: int, ppid: int, own: float, children: float = 0.0) -> ProcessCpu:
    return ProcessCpu(pid=pid, ppid=ppid, own_s=own, children_s=children)


def test_delta_of_a_continuing_process_is_its_own_growth() -> None:
    before = {(1, 10.0): cpu(1, 0, 2.0)}
    assert tree_cpu_delta(before, {(1, 10.0): cpu(1, 0, 2.5)}) == pytest.approx(0.5)


def test_a_reused_pid_is_a_new_process_counted_from_its_creation() -> None:
    before = {(1, 10.0): cpu(1, 0, 1.0), (7, 20.0): cpu(7, 1, 5.0)}
    now = {(1, 10.0): cpu(1, 0, 1.0), (7, 30.0): cpu(7, 1, 0.5)}
    assert tree_cpu_delta(before, now) == pytest.approx(0.5)  # not 0.5 - 5.0, not 5.5


def test_the_tail_of_a_reaped_child_is_recovered_from_its_parent() -> None:
    before = {(1, 10.0): cpu(1, 0, 1.0), (2, 11.0): cpu(2, 1, 2.0)}
    now = {(1, 10.0): cpu(1, 0, 1.0, children=2.3)}  # the child ran 0.3 s more, then exited
    assert tree_cpu_delta(before, now) == pytest.approx(0.3)


def test_a_child_gone_but_not_yet_reaped_is_matched_later() -> None:
    before = {(1, 10.0): cpu(1, 0, 1.0), (2, 11.0): cpu(2, 1, 2.0)}
    middle = {(1, 10.0): cpu(1, 0, 1.0)}
    assert tree_cpu_delta(before, middle) == 0.0
    after = {(1, 10.0): cpu(1, 0, 1.0, children=2.3)}
    assert tree_cpu_delta(middle, after) == pytest.approx(0.3)  # not 2.3


def test_a_child_and_grandchild_vanishing_together_are_charged_to_the_grandparent() -> None:
    before = {(1, 10.0): cpu(1, 0, 1.0), (2, 11.0): cpu(2, 1, 2.0), (3, 12.0): cpu(3, 2, 1.0)}
    now = {(1, 10.0): cpu(1, 0, 1.0, children=3.5)}  # 2 reaped 3, then 1 reaped 2
    assert tree_cpu_delta(before, now) == pytest.approx(0.5)


def test_processes_born_and_reaped_between_polls_are_counted() -> None:
    before = {(1, 10.0): cpu(1, 0, 1.0, children=4.0)}
    now = {(1, 10.0): cpu(1, 0, 1.1, children=4.7)}
    assert tree_cpu_delta(before, now) == pytest.approx(0.8)


@given(st.lists(st.tuples(st.floats(0, 5), st.floats(0, 5)), min_size=1, max_size=6))
def test_a_tree_that_only_grows_counts_every_second_once(lives: list[tuple[float, float]]) -> None:
    """Children that run, then are reaped: the total is exactly what they used."""
    root = cpu(1, 0, 0.0)
    children = {(10 + n, 1.0): cpu(10 + n, 1, first) for n, (first, _) in enumerate(lives)}
    before = {(1, 0.0): root, **children}
    total = sum(first for first, _ in lives)  # counted as new at the first poll
    reaped = sum(first + more for first, more in lives)
    now = {(1, 0.0): cpu(1, 0, 0.0, children=reaped)}
    assert total + tree_cpu_delta(before, now) == pytest.approx(reaped)


def test_processes_vanishing_between_samples_do_not_crash() -> None:
    churn = spawn(CHURN)
    try:
        sampler = ProcessTreeSampler(churn.pid, "churn")
        counts = set()
        for n in range(40):
            sample = sampler.sample(float(n))
            counts.add(sample.processes)
            assert sample.cpu_percent >= 0
            time.sleep(0.01)
        assert min(counts) >= 1
    finally:
        kill_tree(churn)


def test_the_root_exiting_is_reported(sleeper: subprocess.Popen[str]) -> None:
    sampler = ProcessTreeSampler(sleeper.pid, "gone")
    sleeper.kill()
    sleeper.wait()
    with pytest.raises(TargetGone, match="gone: process"):
        sampler.sample(0.0)
    with pytest.raises(TargetGone):
        ProcessTreeSampler(sleeper.pid, "gone")


def test_established_connections_of_the_tree_are_counted() -> None:
    child = spawn(SELF_CONNECTED, wait_ready=True)
    try:
        sample = ProcessTreeSampler(child.pid, "conn").sample(0.0)
        assert sample.connections == 2  # both ends of its loopback connection; not the listener
        uncounted = ProcessTreeSampler(child.pid, "conn", connections=False).sample(0.0)
        assert uncounted.connections is None
    finally:
        kill_tree(child)


def test_proc_net_tcp_parsing_keeps_established_sockets_only() -> None:
    text = (
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
        "timeout inode\n"
        "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0"
        "        0 1111 1 0000000000000000 100 0 0 10 0\n"
        "   1: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0"
        "        0 2222 1 0000000000000000 20 4 30 10 -1\n"
        "   2: 0100007F:C350 0100007F:1F90 06 00000000:00000000 03:00000A2B 00000000     0"
        "        0 0 3 0000000000000000\n"
    )
    assert parse_proc_net_tcp(text) == {2222}


def test_monitor_samples_parts_and_survives_one_dying(
    busy_tree: subprocess.Popen[str], sleeper: subprocess.Popen[str]
) -> None:
    monitor = ResourceMonitor({"busy": busy_tree.pid, "idle": sleeper.pid}, interval=0.2)
    assert monitor.cpu_sources == {"busy": "psutil", "idle": "psutil"}  # not containers
    with monitor:
        time.sleep(0.5)
        monitor.mark_start()
        time.sleep(0.6)
        sleeper.kill()
        sleeper.wait()
        killed_at = monitor.samples()[-1].t
        time.sleep(0.6)
        monitor.mark("end")
    assert monitor._thread is not None and not monitor._thread.is_alive()
    samples = monitor.samples()
    assert any(s.t < 0 for s in samples), "warm-up samples have negative t"
    assert any(s.part == "idle" for s in samples)
    assert [s for s in samples if s.part == "busy" and s.t > killed_at + 0.3]
    assert any("idle" in error for error in monitor.errors)
    assert all(s.cgroup_cpu_percent is None for s in samples)
    seconds = monitor.cpu_seconds("start", "end")
    assert seconds["busy"] is not None and 0 < seconds["busy"] < 1.3 * 1.2  # <= 1 core
    assert seconds["idle"] is not None and seconds["idle"] < 0.1
    assert monitor.cpu_seconds("start", "end", source="cgroup") == {"busy": None, "idle": None}
    total = monitor.total_cpu_seconds("start", "end")
    assert total == pytest.approx(seconds["busy"] + seconds["idle"])
    with pytest.raises(KeyError, match="no mark named 'nope'"):
        monitor.cpu_seconds("nope")


def test_monitor_stops_promptly_with_a_long_interval(sleeper: subprocess.Popen[str]) -> None:
    begun = time.monotonic()
    with ResourceMonitor({"idle": sleeper.pid}, interval=30) as monitor:
        pass
    assert time.monotonic() - begun < 10
    assert monitor._thread is not None and not monitor._thread.is_alive()
    assert monitor.samples() == []


def test_a_part_that_is_gone_at_the_start_does_not_stop_the_others(
    busy_tree: subprocess.Popen[str], sleeper: subprocess.Popen[str]
) -> None:
    sleeper.kill()
    sleeper.wait()
    with ResourceMonitor({"busy": busy_tree.pid, "dead": sleeper.pid}, interval=0.2) as monitor:
        time.sleep(0.7)
    assert {s.part for s in monitor.samples()} == {"busy"}
    assert any("dead" in error for error in monitor.errors)
    monitor.mark("a")
    monitor.mark("b")
    seconds = monitor.cpu_seconds("a", "b")
    assert seconds["busy"] is not None and seconds["dead"] is None


def test_generator_monitor_follows_a_tree_until_it_exits(busy_tree: subprocess.Popen[str]) -> None:
    with GeneratorMonitor(busy_tree.pid, interval=0.2) as monitor:
        time.sleep(0.7)
        monitor.mark_start()
        time.sleep(0.5)
        alive = monitor.samples()
        kill_tree(busy_tree)
        time.sleep(0.5)
    samples = monitor.samples()
    assert len(alive) >= 3
    assert all(s.processes == 3 for s in alive)
    assert generator_cpu_stats(samples, include_warmup=True) is not None
    assert 0 < max(s.cpu_percent for s in samples) < 130
    assert monitor.errors == []  # a finished generator is the end of its series


def test_run_monitor_for_a_target_without_parts(busy_tree: subprocess.Popen[str]) -> None:
    with RunMonitor({}, interval=0.2) as monitor:
        monitor.watch_generator(busy_tree.pid)
        time.sleep(0.5)
        monitor.mark_start()
        time.sleep(0.5)
    assert monitor.resource_samples() == []
    assert monitor.server_cpu_seconds() is None
    generator = monitor.generator_samples()
    assert any(s.t < 0 for s in generator) and any(s.t >= 0 for s in generator)


def test_run_monitor_measures_the_measured_phase(busy_tree: subprocess.Popen[str]) -> None:
    with RunMonitor({"busy": busy_tree.pid}, interval=0.2) as monitor:
        assert monitor.server_cpu_seconds() is None  # not started yet
        time.sleep(0.3)
        monitor.mark_start()
        time.sleep(1.0)
    cpu = monitor.server_cpu_seconds()
    assert cpu is not None and 0 < cpu < 1.5  # 1 s of at most one busy core
    assert monitor.server_cpu_seconds() == cpu  # frozen at the end of the block
    assert monitor.resource_samples()


def test_interval_must_be_positive(sleeper: subprocess.Popen[str]) -> None:
    with pytest.raises(ValueError, match="interval"):
        ResourceMonitor({"x": sleeper.pid}, interval=0)
    with pytest.raises(ValueError, match="at least one part"):
        ResourceMonitor({})


def test_the_cpu_of_a_window_comes_from_its_stamps_however_late_they_arrive(
    busy_tree: subprocess.Popen[str],
) -> None:
    # the swarm child stamps the server's CPU at each bound of the measured phase; the
    # parent marks them when their events arrive, late on a loaded machine: what counts
    # is the window the stamps bound, not the marks' own time (before, a 0.5 s late
    # start read a 1 s window's CPU as half, or as 0)
    from pytest_webperf.swarm.stamp import CpuProbe, stamp

    monitor = ResourceMonitor({"busy": busy_tree.pid}, interval=10)
    (probe,) = monitor.cpu_probes()
    assert probe == CpuProbe("busy", busy_tree.pid, None)  # no cgroup of its own
    first = stamp([probe])
    time.sleep(0.4)
    last = stamp([probe])
    time.sleep(0.6)  # the events arrive now: the burner has burnt on meanwhile
    monitor.mark_start(stamp=first)
    monitor.mark("end", last)
    stamped = monitor.cpu_seconds("start", "end")["busy"]
    assert stamped is not None
    # one burner over 0.4 s: up to 0.4 s of CPU (10 ms ticks), never the later 0.6 s;
    # how much of it the burner got depends on the machine's load (0.04 s at load 20)
    assert 0 < stamped <= 0.45, stamped
    assert last["at"] - first["at"] >= 0.4
