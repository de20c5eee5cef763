"""The CPU and memory of one process tree, read with psutil (one poll per sample).

``ProcessTreeSampler`` samples the tree rooted at a pid: CPU % summed over the
tree, RSS, PSS/USS every few samples, threads, fds, TCP connections. A container's
processes are host processes, so a container is sampled from its ``State.Pid``
like any local command. The threads that call it every second are in ``sampler``.

CPU accounting of a tree, and what it cannot see. Processes are keyed by
(pid, create_time), so a reused pid is a new process. The first poll sets the
baseline of every process alive then; a process first seen in a later poll
appeared since the previous poll and is counted from its creation (its whole
``cpu_times``). A process that exits between two polls used CPU after the
last poll that psutil cannot see, unless an ancestor in the tree reaps it
(wait(2) adds a child's whole CPU time to its parent's ``children_*`` times):
that is recovered (see ``tree_cpu_delta``). CPU of processes nobody in the tree
reaps stays lost. That is why every container part is cross-checked with its
cgroup counter, which the kernel keeps for dead processes too, and why
``ResourceMonitor.cpu_seconds`` (the service demand) prefers it.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

from pytest_webperf.models.samples import ResourceSample

MB = 1024 * 1024
GONE = (psutil.NoSuchProcess, psutil.AccessDenied)  # ZombieProcess is a NoSuchProcess
_ESTABLISHED = "01"  # TCP state in /proc/net/tcp


class TargetGone(Exception):
    """The root process of a sampled tree has exited."""


ProcessKey = tuple[int, float]  # (pid, create_time): a reused pid is another process


@dataclass
class ProcessCpu:
    """One process's CPU counters at a poll."""

    pid: int
    ppid: int
    own_s: float  # user + system
    children_s: float  # children_user + children_system: reaped descendants' whole lives
    debt: float = 0.0  # counted for vanished children its children_s does not show yet


@dataclass(frozen=True)
class _Reading:
    """What one poll of a tree found (CPU is folded into the sampler's counter)."""

    processes: int
    threads: int
    rss: int
    fds: int | None
    socket_inodes: frozenset[int]
    usable_threads: int = 0  # threads that can run at once: a GIL-bound process has one


# Interpreters that run their code one thread at a time, however many threads they
# have: CPython and PyPy (the GIL; a free-threaded CPython's executable ends in "t":
# python3.13t, not matched), Ruby (MRI's GVL), Node.js (one JavaScript thread; its
# pool's threads mostly wait). The executable, not ``comm``: a script's shebang puts
# the script's name there.
_GIL_EXECUTABLE = re.compile(r"(python|pypy|ruby|node|nodejs)[\d.]*(-dbg)?")


def gil_bound(process: psutil.Process) -> bool:
    """Whether ``process`` runs an interpreter that runs its code one thread at a time."""
    try:
        executable = process.exe() or process.name()
    except (psutil.Error, OSError):
        return False
    return bool(_GIL_EXECUTABLE.fullmatch(os.path.basename(executable)))


class ProcessTreeSampler:
    """Samples the process tree rooted at ``root_pid``; one thread at a time.

    ``full_memory_every``: PSS and USS (``/proc/<pid>/smaps_rollup``, which
    walks every mapping: ~190 us per process with 400 mappings here, four times
    the other reads) are read on every n-th sample only, None in between; 0
    disables them. ``fds``: count open
    fds (one ``/proc/<pid>/fd`` listing and a readlink per fd, per process).
    ``connections``: count established TCP connections held by the tree (needs
    ``fds``; one ``/proc/<pid>/net/tcp{,6}`` parse per sample).
    """

    def __init__(
        self,
        root_pid: int,
        part: str,
        *,
        full_memory_every: int = 5,
        fds: bool = True,
        connections: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        try:
            self._root = psutil.Process(root_pid)
        except psutil.NoSuchProcess:
            raise TargetGone(f"{part}: process {root_pid} does not exist") from None
        self.part = part
        self.root_pid = root_pid
        self._full_every = full_memory_every
        self._fds = fds
        self._connections = fds and connections
        self._clock = clock
        self._tracked: dict[ProcessKey, ProcessCpu] = {}
        self._alive: dict[ProcessKey, psutil.Process] = {}
        self._cpu_total = 0.0  # CPU seconds seen in the tree since the first poll
        self._samples = 0
        self._primed = False
        self._poll()
        self._last_at = clock()
        self._last_total = 0.0

    @property
    def cpu_seconds(self) -> float:
        """CPU seconds the tree used since this sampler started, as far as psutil saw."""
        return self._cpu_total

    def sample(self, t: float) -> ResourceSample:
        """The tree's resources now; CPU % over the time since the previous sample."""
        reading = self._poll()
        now = self._clock()
        elapsed = now - self._last_at
        cpu = (self._cpu_total - self._last_total) / elapsed * 100 if elapsed > 0 else 0.0
        self._last_at, self._last_total = now, self._cpu_total
        self._samples += 1
        pss, uss = self._full_memory() if self._full_due() else (None, None)
        return ResourceSample(
            t=t,
            part=self.part,
            cpu_percent=cpu,
            rss_mb=reading.rss / MB,
            processes=reading.processes,
            threads=reading.threads,
            usable_threads=reading.usable_threads,
            fds=reading.fds,
            connections=self._count_connections(reading.socket_inodes),
            pss_mb=pss,
            uss_mb=uss,
        )

    def poll_cpu(self) -> float:
        """Fold the CPU used since the last poll into ``cpu_seconds`` (for marks)."""
        self._poll()
        return self._cpu_total

    def _tree(self) -> list[psutil.Process]:
        if not self._root.is_running():  # also False when the pid was reused
            raise TargetGone(f"{self.part}: process {self.root_pid} has exited")
        try:
            return [self._root, *self._root.children(recursive=True)]
        except psutil.NoSuchProcess:
            raise TargetGone(f"{self.part}: process {self.root_pid} has exited") from None

    def _poll(self) -> _Reading:
        seen: dict[ProcessKey, ProcessCpu] = {}
        alive: dict[ProcessKey, psutil.Process] = {}
        processes = threads = usable = rss = 0
        fds: int | None = 0
        inodes: set[int] = set()
        for process in self._tree():
            try:
                with process.oneshot():
                    key = (process.pid, process.create_time())
                    times = process.cpu_times()
                    ppid = process.ppid()
                    process_threads = process.num_threads()
                    process_rss = process.memory_info().rss
                    process_usable = 1 if gil_bound(process) else process_threads
            except GONE:  # exited since the tree was listed
                continue
            seen[key] = ProcessCpu(
                process.pid,
                ppid,
                times.user + times.system,
                times.children_user + times.children_system,
            )
            alive[key] = process
            processes += 1
            threads += process_threads
            usable += process_usable
            rss += process_rss
            process_fds = _socket_inodes(process.pid, inodes) if self._fds else None
            fds = None if fds is None or process_fds is None else fds + process_fds
        if self._primed:
            self._cpu_total += tree_cpu_delta(self._tracked, seen)
        self._tracked, self._alive = seen, alive
        self._primed = True
        return _Reading(processes, threads, rss, fds, frozenset(inodes), usable)

    def _full_due(self) -> bool:
        return self._full_every > 0 and (self._samples - 1) % self._full_every == 0

    def _full_memory(self) -> tuple[float | None, float | None]:
        pss = uss = 0
        for process in self._alive.values():
            try:
                info = process.memory_full_info()
            except psutil.AccessDenied:
                return None, None
            except psutil.NoSuchProcess:
                continue
            pss += getattr(info, "pss", 0)
            uss += info.uss
        return pss / MB, uss / MB

    def _count_connections(self, inodes: frozenset[int]) -> int | None:
        if not self._connections:
            return None
        established = _established_inodes(self.root_pid)
        return None if established is None else len(inodes & established)


def rss_now_mb(parts: Mapping[str, int]) -> float | None:
    """The resident memory of every part's process tree now, summed (MB), read as the
    monitor reads it; None when no part is known or one is gone (a stream run's memory
    before its connections: ``measurement/longlived.py``)."""
    total = 0.0
    for part, pid in parts.items():
        try:
            sampler = ProcessTreeSampler(pid, part, full_memory_every=0, fds=False)
            total += sampler.sample(0.0).rss_mb
        except TargetGone:
            return None
    return total if parts else None


def _socket_inodes(pid: int, into: set[int]) -> int | None:
    """Count the open fds of ``pid``, adding the inodes of its sockets to ``into``.

    Sockets are collected as a set because forked workers share their parent's
    (the listening socket of a prefork server is held by every child).
    """
    fd_dir = f"/proc/{pid}/fd"
    try:
        names = os.listdir(fd_dir)
    except OSError:  # gone, or not ours to read
        return None
    for name in names:
        try:
            target = os.readlink(f"{fd_dir}/{name}")
        except OSError:
            continue
        if target.startswith("socket:["):
            into.add(int(target[8:-1]))
    return len(names)


def _established_inodes(pid: int) -> frozenset[int] | None:
    """Inodes of the established TCP sockets in the network namespace of ``pid``.

    One read of ``/proc/<pid>/net/tcp{,6}`` per sample, instead of psutil's
    per-process ``net_connections``, which parses those same files once per
    process (and, with host networking, they list every socket on the host).
    """
    inodes: set[int] = set()
    found = False
    for name in ("tcp", "tcp6"):
        try:
            text = Path(f"/proc/{pid}/net/{name}").read_text()
        except OSError:
            continue
        found = True
        inodes.update(parse_proc_net_tcp(text))
    return frozenset(inodes) if found else None


def parse_proc_net_tcp(text: str) -> set[int]:
    """The inodes of established sockets listed in a ``/proc/net/tcp``-format text."""
    inodes = set()
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) > 9 and fields[3] == _ESTABLISHED:
            inodes.add(int(fields[9]))
    return inodes


def stamped_tree(rows: Sequence[Sequence[float]]) -> dict[ProcessKey, ProcessCpu]:
    """A tree as ``stamp.read_tree`` stamped it, as a poll's counters."""
    return {
        (int(pid), float(created)): ProcessCpu(int(pid), int(ppid), float(own), float(children))
        for pid, created, ppid, own, children in rows
    }


def switches_between(before: Mapping[str, int], after: Mapping[str, int]) -> int:
    """Context switches the threads made between two stamps (``stamp.read_switches``): a
    thread born in between counts from 0; one that ended took its counts with it."""
    return sum(max(0, count - before.get(tid, 0)) for tid, count in after.items())


def stamped_delta(first: Sequence[Sequence[float]], last: Sequence[Sequence[float]]) -> float:
    """CPU seconds a tree used between two stamps (``tree_cpu_delta`` of the two)."""
    return tree_cpu_delta(stamped_tree(first), stamped_tree(last))


def tree_cpu_delta(
    before: Mapping[ProcessKey, ProcessCpu], now: Mapping[ProcessKey, ProcessCpu]
) -> float:
    """CPU seconds a tree used between two polls, the processes that vanished included.

    A process's ``children_*`` times grow, when it reaps a child, by the
    child's whole life (and what that child had reaped). Less what was already
    counted for the children that vanished under it, that is the CPU psutil
    never saw: their last moments, and processes born and reaped between two
    polls. What cannot be matched yet (a child gone but not reaped yet) is
    carried as a debt in ``now``, so nothing is counted twice.
    """
    owed = _owed_by_ancestors(before, now)
    used = 0.0
    for key, current in now.items():
        previous = before.get(key)
        if previous is None:  # appeared since the last poll: counted from its creation
            used += current.own_s + current.children_s
            continue
        debt = previous.debt + owed.get(current.pid, 0.0)
        reaped = current.children_s - previous.children_s
        used += max(0.0, current.own_s - previous.own_s) + max(0.0, reaped - debt)
        current.debt = max(0.0, debt - reaped)
    return used


def _owed_by_ancestors(
    before: Mapping[ProcessKey, ProcessCpu], now: Mapping[ProcessKey, ProcessCpu]
) -> dict[int, float]:
    """For each pid, what was counted for its descendants that vanished since ``before``.

    A vanished process is charged to its nearest ancestor that is still alive,
    as known at the last poll: when its parent vanished too, the grandparent
    reaps both.
    """
    vanished = {c.pid: c for k, c in before.items() if k not in now}
    owed: dict[int, float] = {}
    for gone in vanished.values():
        ppid, hops = gone.ppid, 0
        while ppid in vanished and hops < len(vanished):  # hops: a cycle cannot hang us
            ppid, hops = vanished[ppid].ppid, hops + 1
        owed[ppid] = owed.get(ppid, 0.0) + gone.own_s + gone.children_s + gone.debt
    return owed
