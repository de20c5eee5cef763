"""The target's CPU counters read at an instant, by whoever defines the instant.

Why: a repetition's requests are counted between two of the swarm child's rolls; the
server's CPU must be read at the same two instants. Read by the pytest process when
the child's event arrives, it was read late by as much as the event waited: measured
here at load average 8, 0.2-0.5 s late in a 1 s window, so a whole start-up of CPU
fell outside and a repetition read 0.13 s, or 0, for a server that used 0.19 s. The
child now stamps the counters itself, right at each roll (``stamp``), and the parent
subtracts them (``monitor.ResourceMonitor.mark``).

A probe is a part of the target: the root pid of its process tree and, where the part
heads a cgroup (a container), the file of that cgroup's CPU counter. A stamp holds,
per part, the cgroup's CPU seconds (every process ever in it), each process of the
tree as ``[pid, create_time, ppid, own_s, children_s]`` (what ``proctree`` folds), and
the context switches of each thread of the tree (``switches``: voluntary and involuntary,
by thread id). ``/proc/PID/status`` holds the main thread's only, so every
``/proc/PID/task/TID/status`` is read; the done stamp is read before the users close
their connections, so a thread serving one is still there to be read.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psutil

# cgroup v2: ``usage_usec`` in cpu.stat; v1: cpuacct.usage in nanoseconds
V2_KEY = "usage_usec"


@dataclass(frozen=True)
class CpuProbe:
    """One part of a target whose CPU is stamped: its tree's root, its cgroup counter."""

    part: str
    pid: int
    counter: str | None = None  # a cgroup's cpu.stat (v2) or cpuacct.usage (v1)

    def to_dict(self) -> dict[str, Any]:
        return {"part": self.part, "pid": self.pid, "counter": self.counter}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CpuProbe:
        counter = data.get("counter")
        return cls(str(data["part"]), int(data["pid"]), None if counter is None else str(counter))


def read_counter(path: str) -> float | None:
    """A cgroup CPU counter in seconds; None when it cannot be read."""
    try:
        with open(path) as file:
            text = file.read()
    except OSError:
        return None
    if path.endswith("cpu.stat"):
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == V2_KEY and value.strip().isdigit():
                return int(value) / 1e6
        return None
    return int(text) / 1e9 if text.strip().isdigit() else None


def read_tree(pid: int) -> list[list[float]] | None:
    """Each process of the tree rooted at ``pid``, as ``[pid, create_time, ppid, own_s,
    children_s]``; None when the root is gone."""
    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.Error:
        return None
    found = []
    for process in processes:
        try:
            with process.oneshot():
                times = process.cpu_times()
                found.append(
                    [
                        process.pid,
                        process.create_time(),
                        process.ppid(),
                        times.user + times.system,
                        times.children_user + times.children_system,
                    ]
                )
        except psutil.Error:  # exited since the tree was listed
            continue
    return found


_SWITCHES = re.compile(rb"^(?:non)?voluntary_ctxt_switches:\s+(\d+)", re.M)


def thread_files(pids: Iterable[int], name: str) -> Iterator[tuple[str, bytes]]:
    """(thread id, contents) of ``/proc/PID/task/TID/<name>`` for every thread of ``pids``;
    processes and threads that end meanwhile are left out."""
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/{name}", "rb") as file:
                    yield tid, file.read()
            except OSError:
                continue


def read_switches(pids: Iterable[int]) -> dict[str, int]:
    """Context switches (voluntary + involuntary) of every thread of ``pids``, by thread
    id (a string: the stamp travels as JSON); threads that end meanwhile are left out."""
    return {
        tid: sum(int(n) for n in _SWITCHES.findall(status))
        for tid, status in thread_files(pids, "status")
    }


def stamp(probes: Iterable[CpuProbe]) -> dict[str, Any]:
    """Every probe's counters now, with the instant (``time.monotonic``) they were read."""
    parts: dict[str, Any] = {}
    for probe in probes:
        tree = read_tree(probe.pid)
        parts[probe.part] = {
            "cgroup": None if probe.counter is None else read_counter(probe.counter),
            "tree": tree,
            "switches": None if tree is None else read_switches(int(row[0]) for row in tree),
        }
    return {"at": time.monotonic(), "parts": parts}


def probes_of(data: Sequence[Mapping[str, Any]]) -> tuple[CpuProbe, ...]:
    return tuple(CpuProbe.from_dict(item) for item in data)
