"""CPU and memory of the target's process trees and of the load generator, every second.

A container's processes are host processes, so a container is sampled from its
``State.Pid`` like any local command. Three layers:

- ``ProcessTreeSampler``: one process tree with psutil (CPU % summed over the
  tree, RSS, PSS/USS every few samples, threads, fds, TCP connections).
- ``ResourceMonitor`` / ``GeneratorMonitor``: a background thread sampling the
  target's parts (and the cgroup of each) or the generator's processes every
  ``interval``, with marks for the measured phase.

What the samples add up to (server CPU, peak RSS, generator-bound) is in
``resources``.

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
``cpu_seconds`` (the service demand) prefers it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, Protocol

import psutil

from pytest_webperf.cgroup import CgroupReader, owns_its_cgroup
from pytest_webperf.models import GeneratorSample, ResourceSample
from pytest_webperf.resources import generator_bound, tick

__all__ = [
    "GeneratorMonitor",
    "ProcessTreeSampler",
    "ResourceMonitor",
    "RunMonitor",
    "TargetGone",
    "foreign_cpu_percent",
    "generator_bound",  # measure.py still imports it from here; resources owns it
    "machine_busy_seconds",
    "own_tree_seconds",
    "parse_proc_net_tcp",
    "tree_cpu_delta",
]

log = logging.getLogger(__name__)

MB = 1024 * 1024
_GONE = (psutil.NoSuchProcess, psutil.AccessDenied)  # ZombieProcess is a NoSuchProcess
_ESTABLISHED = "01"  # TCP state in /proc/net/tcp
CpuSource = Literal["cgroup", "psutil"]


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
        processes = threads = rss = 0
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
            except _GONE:  # exited since the tree was listed
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
            rss += process_rss
            process_fds = _socket_inodes(process.pid, inodes) if self._fds else None
            fds = None if fds is None or process_fds is None else fds + process_fds
        if self._primed:
            self._cpu_total += tree_cpu_delta(self._tracked, seen)
        self._tracked, self._alive = seen, alive
        self._primed = True
        return _Reading(processes, threads, rss, fds, frozenset(inodes))

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


class _PeriodicMonitor:
    """A daemon thread calling ``_tick`` every ``interval`` on a drift-free schedule."""

    def __init__(self, interval: float, clock: Callable[[], float]) -> None:
        if interval <= 0:
            raise ValueError(f"interval must be positive, got {interval!r}")
        self.interval = interval
        self._clock = clock
        self._lock = threading.RLock()  # _error() is called with it held
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._origin = clock()
        self._errors: list[str] = []

    def __enter__(self) -> _PeriodicMonitor:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("monitor already started")
        self._thread = threading.Thread(
            target=self._run, name=f"webperf-{type(self).__name__}", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the thread (within one sample's time); safe to call twice."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def mark_start(self, at: float | None = None) -> None:
        """Set the origin of ``t`` (a ``time.monotonic()`` value; default now)."""
        with self._lock:
            self._origin = self._clock() if at is None else at

    @property
    def errors(self) -> list[str]:
        """Sampling failures, one line each (a part whose root exited, an unreadable file)."""
        with self._lock:
            return list(self._errors)

    def _run(self) -> None:
        deadline = self._clock() + self.interval
        while not self._stop.wait(max(0.0, deadline - self._clock())):
            self._tick(self._clock())
            deadline += self.interval
            now = self._clock()
            if deadline <= now:  # starved past a tick: skip it rather than burst to catch up
                deadline = now + self.interval

    def _tick(self, now: float) -> None:
        raise NotImplementedError

    def _error(self, message: str) -> None:
        with self._lock:
            if message not in self._errors:
                self._errors.append(message)
        log.warning("webperf sampler: %s", message)


@dataclass
class _Part:
    name: str
    sampler: ProcessTreeSampler | None
    cgroup: CgroupReader | None
    last_cgroup_cpu: float | None
    last_at: float
    gone: bool = False  # the root exited: no more samples, its psutil CPU stays as counted


@dataclass(frozen=True)
class _Mark:
    at: float
    cgroup_cpu: Mapping[str, float | None]
    tree_cpu: Mapping[str, float | None]


class ResourceMonitor(_PeriodicMonitor):
    """Samples every part of a target every ``interval`` in a background thread.

    ``parts`` maps a part name (the server, or "proxy"/"backend" of a composite
    target) to the root pid of its process tree (a container's ``State.Pid``).
    ``use_cgroup``: None reads a part's cgroup only where its root process heads
    its own cgroup (a container), True wherever one is found, False never.
    ``container_ids`` (part -> id) lets the cgroup be found by the Docker
    layouts when ``/proc/<pid>/cgroup`` does not name a visible directory.

    Use::

        with ResourceMonitor({"nginx": pid}) as monitor:
            ...warm-up...
            monitor.mark_start()
            ...measured phase...
            monitor.mark("end")
        samples = monitor.samples()           # warm-up samples have t < 0
        cpu_s = monitor.total_cpu_seconds()   # start -> end, all parts
    """

    def __init__(
        self,
        parts: Mapping[str, int],
        *,
        interval: float = 1.0,
        use_cgroup: bool | None = None,
        container_ids: Mapping[str, str] | None = None,
        full_memory_every: int = 5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not parts:
            raise ValueError("ResourceMonitor needs at least one part")
        super().__init__(interval, clock)
        ids = container_ids or {}
        self._parts = [
            self._open(name, pid, use_cgroup, ids.get(name), full_memory_every)
            for name, pid in parts.items()
        ]
        self._samples: list[tuple[float, ResourceSample]] = []
        self._marks: dict[str, _Mark] = {}

    def __enter__(self) -> ResourceMonitor:
        self.start()
        return self

    def _open(
        self,
        name: str,
        pid: int,
        use_cgroup: bool | None,
        container_id: str | None,
        full_memory_every: int,
    ) -> _Part:
        sampler = None
        try:
            sampler = ProcessTreeSampler(
                pid, name, full_memory_every=full_memory_every, clock=self._clock
            )
        except TargetGone as exc:
            self._error(str(exc))
        cgroup = None
        if use_cgroup or (use_cgroup is None and owns_its_cgroup(pid)):
            cgroup = CgroupReader.for_pid(pid, container_id=container_id)
            if cgroup is None:
                self._error(f"{name}: no readable cgroup for process {pid}")
        cpu = None if cgroup is None else cgroup.cpu_seconds()
        return _Part(name, sampler, cgroup, cpu, self._clock())

    @property
    def cpu_sources(self) -> dict[str, CpuSource]:
        """Where each part's ``cpu_seconds`` comes from."""
        return {p.name: "cgroup" if p.cgroup is not None else "psutil" for p in self._parts}

    def cpu_limit_cores(self) -> dict[str, float | None]:
        """Each part's CPU quota in cores (``--cpus``), None where unlimited or unknown."""
        return {
            p.name: None if p.cgroup is None else p.cgroup.cpu_limit_cores() for p in self._parts
        }

    def samples(self) -> list[ResourceSample]:
        """Every sample so far, ``t`` relative to the current origin, in time order."""
        with self._lock:
            origin, taken = self._origin, list(self._samples)
        return [replace(sample, t=tick(at - origin)) for at, sample in taken]

    def mark(self, name: str) -> None:
        """Record every part's CPU counters now, under ``name``."""
        with self._lock:
            now = self._clock()
            cgroup = {
                p.name: None if p.cgroup is None else p.cgroup.cpu_seconds() for p in self._parts
            }
            tree = {p.name: self._poll_tree(p) for p in self._parts}
            self._marks[name] = _Mark(now, cgroup, tree)

    def mark_start(self, at: float | None = None) -> None:
        """Start of the measured phase: the origin of ``t`` and the mark "start"."""
        super().mark_start(at)
        self.mark("start")

    def cpu_seconds(
        self, since: str = "start", until: str | None = None, *, source: CpuSource | None = None
    ) -> dict[str, float | None]:
        """CPU seconds each part used between two marks (``until`` None: now).

        From the cgroup where there is one (every process, the dead included),
        else from the psutil tree (see the module docstring for what it misses);
        ``source`` forces one of them (None where it has no figure).
        """
        if until is None:
            until = "_now"
            self.mark(until)
        with self._lock:
            if since not in self._marks or until not in self._marks:
                missing = since if since not in self._marks else until
                raise KeyError(f"no mark named {missing!r}; marks: {sorted(self._marks)}")
            first, last = self._marks[since], self._marks[until]
        result: dict[str, float | None] = {}
        for part in self._parts:
            kind = source or ("cgroup" if part.cgroup is not None else "psutil")
            a = (first.cgroup_cpu if kind == "cgroup" else first.tree_cpu).get(part.name)
            b = (last.cgroup_cpu if kind == "cgroup" else last.tree_cpu).get(part.name)
            result[part.name] = None if a is None or b is None else max(0.0, b - a)
        return result

    def total_cpu_seconds(self, since: str = "start", until: str | None = None) -> float | None:
        """CPU seconds of all parts between two marks; None if any part has no figure."""
        values = self.cpu_seconds(since, until).values()
        return None if any(v is None for v in values) else sum(v or 0.0 for v in values)

    def _poll_tree(self, part: _Part) -> float | None:
        if part.sampler is None:
            return None
        if part.gone:
            return part.sampler.cpu_seconds
        try:
            return part.sampler.poll_cpu()
        except TargetGone:
            return part.sampler.cpu_seconds  # its CPU up to the last poll is still right
        except (OSError, psutil.Error) as exc:
            self._error(f"{part.name}: {exc}")
            return None

    def _tick(self, now: float) -> None:
        taken = []
        with self._lock:
            for part in self._parts:
                sample = self._sample_part(part)
                if sample is not None:
                    taken.append((now, sample))
            self._samples.extend(taken)

    def _sample_part(self, part: _Part) -> ResourceSample | None:
        """One part's sample; a failure is recorded and never stops the other parts."""
        if part.sampler is None or part.gone:
            return None
        try:
            sample = part.sampler.sample(0.0)
        except TargetGone as exc:
            self._error(str(exc))
            part.gone = True  # its samples end here; the cgroup (if any) says the rest
            return None
        except Exception as exc:  # one part's failure must not kill the thread
            self._error(f"{part.name}: sampling failed: {exc!r}")
            return None
        if part.cgroup is None:
            return sample
        now, cpu = self._clock(), part.cgroup.cpu_seconds()
        memory = part.cgroup.memory_bytes()
        percent = None
        if cpu is not None and part.last_cgroup_cpu is not None and now > part.last_at:
            percent = (cpu - part.last_cgroup_cpu) / (now - part.last_at) * 100
        part.last_cgroup_cpu, part.last_at = cpu, now
        return replace(
            sample,
            cgroup_cpu_percent=percent,
            cgroup_memory_mb=None if memory is None else memory / MB,
        )


class GeneratorMonitor(_PeriodicMonitor):
    """The load generator's own CPU every ``interval``, all its processes (workers too)."""

    def __init__(
        self, pid: int, *, interval: float = 1.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__(interval, clock)
        # CPU and process count only: nothing that costs fd walks in the generator's tree
        self._sampler: ProcessTreeSampler | None = ProcessTreeSampler(
            pid, "generator", full_memory_every=0, fds=False, connections=False, clock=clock
        )
        self._samples: list[tuple[float, GeneratorSample]] = []

    def __enter__(self) -> GeneratorMonitor:
        self.start()
        return self

    def samples(self) -> list[GeneratorSample]:
        with self._lock:
            origin, taken = self._origin, list(self._samples)
        return [replace(sample, t=tick(at - origin)) for at, sample in taken]

    def _tick(self, now: float) -> None:
        if self._sampler is None:
            return
        try:
            sample = self._sampler.sample(0.0)
        except TargetGone:  # the swarm finished: the end of the series, not an error
            self._sampler = None
            return
        except Exception as exc:
            self._error(f"generator: sampling failed: {exc!r}")
            return
        with self._lock:
            self._samples.append(
                (
                    now,
                    GeneratorSample(
                        t=0.0, cpu_percent=sample.cpu_percent, processes=sample.processes
                    ),
                )
            )


class _HasParts(Protocol):
    def parts(self) -> Mapping[str, int]: ...


class RunMonitor:
    """One repetition's monitoring: the target's parts, and the generator once it runs.

    The shape ``measure.Monitor`` asks for. Entered before the swarm starts;
    ``watch_generator`` when its pid is known, ``mark_start`` when the measured
    phase starts (one origin for both series); leaving the block marks "end",
    so ``server_cpu_seconds`` covers measure-start to the end of the swarm. A
    target without parts (an external URL) still gets its generator measured.
    """

    def __init__(
        self,
        parts: Mapping[str, int],
        *,
        interval: float = 1.0,
        use_cgroup: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval = interval
        self._clock = clock
        self._resources = (
            ResourceMonitor(parts, interval=interval, use_cgroup=use_cgroup, clock=clock)
            if parts
            else None
        )
        self._generator: GeneratorMonitor | None = None
        self._origin: float | None = None
        self._ended = False
        self._lock = threading.Lock()

    @classmethod
    def for_target(cls, target: _HasParts, *, interval: float = 1.0) -> RunMonitor:
        return cls(dict(target.parts()), interval=interval)

    def __enter__(self) -> RunMonitor:
        if self._resources is not None:
            self._resources.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.mark_end()
        with self._lock:
            generator = self._generator
        if generator is not None:
            generator.stop()
        if self._resources is not None:
            self._resources.stop()

    def watch_generator(self, pid: int) -> None:
        """Sample the generator's process tree (rooted at ``pid``) from now on."""
        try:
            generator = GeneratorMonitor(pid, interval=self.interval, clock=self._clock)
        except TargetGone:  # it already finished: nothing to measure
            log.warning("webperf sampler: generator process %d is gone", pid)
            return
        with self._lock:
            if self._generator is not None:
                self._generator.stop()
            if self._origin is not None:
                generator.mark_start(self._origin)
            self._generator = generator
        generator.start()

    def mark_start(self) -> None:
        now = self._clock()
        with self._lock:
            self._origin = now
            generator = self._generator
        if self._resources is not None:
            self._resources.mark_start(now)
        if generator is not None:
            generator.mark_start(now)

    def mark_end(self) -> None:
        """End of the measured phase (once; leaving the block does it if not done)."""
        with self._lock:
            if self._ended or self._origin is None:
                return
            self._ended = True
        if self._resources is not None:
            self._resources.mark("end")

    def resource_samples(self) -> list[ResourceSample]:
        return [] if self._resources is None else self._resources.samples()

    def generator_samples(self) -> list[GeneratorSample]:
        with self._lock:
            generator = self._generator
        return [] if generator is None else generator.samples()

    def server_cpu_seconds(self) -> float | None:
        """CPU seconds of all parts over the measured phase; None if not measured."""
        if self._resources is None or self._origin is None:
            return None
        return self._resources.total_cpu_seconds("start", "end" if self._ended else None)

    @property
    def errors(self) -> list[str]:
        with self._lock:
            generator = self._generator
        found = [] if self._resources is None else self._resources.errors
        return found + ([] if generator is None else generator.errors)


# -- CPU of the machine and of this process tree (what other processes took) ---------------


def machine_busy_seconds() -> float:
    """CPU seconds this machine spent not idle, all cores, since boot (steal included:
    a VM's neighbours take CPU from the run as surely as a local process does)."""
    times = psutil.cpu_times()
    return float(
        sum(times)
        - times.idle
        - getattr(times, "iowait", 0.0)
        - getattr(times, "guest", 0.0)
        - getattr(times, "guest_nice", 0.0)
    )


def own_tree_seconds() -> float:
    """CPU seconds of this process and all its descendants (the generator, the MQTT
    observer, the sampler's thread), children already reaped included."""
    me = psutil.Process()
    total = 0.0
    for proc in [me, *me.children(recursive=True)]:
        try:
            times = proc.cpu_times()
        except _GONE:
            continue
        total += times.user + times.system
        if proc.pid == me.pid:
            total += times.children_user + times.children_system
    return total


def foreign_cpu_percent(other_s: float, server_s: float | None, duration_s: float) -> float | None:
    """CPU used during the measured phase by processes that are neither the server nor
    this measurement (``other_s``: the machine's busy seconds minus this process tree's),
    100 = one core; None when the server's CPU is not known (a target given by URL)."""
    if server_s is None or duration_s <= 0:
        return None
    return max(0.0, other_s - server_s) / duration_s * 100
