"""The threads that sample a target's parts and the load generator every second.

- ``ResourceMonitor`` / ``GeneratorMonitor``: a background thread sampling the
  target's parts (with ``tree.ProcessTreeSampler``, and the cgroup of each)
  or the generator's processes every ``interval``, with marks for the measured
  phase.
- ``RunMonitor``: one repetition's monitoring, the shape ``plan.Monitor`` asks
  for.

What the samples add up to (server CPU, peak RSS, generator-bound) is in
``resources``; how much CPU other processes took, in ``contention``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Literal, Protocol, TypeVar

import psutil

from pytest_webperf.models.samples import GeneratorSample, ResourceSample
from pytest_webperf.sampling.cgroup import CgroupReader, owns_its_cgroup
from pytest_webperf.sampling.resources import tick
from pytest_webperf.sampling.tree import (
    MB,
    ProcessTreeSampler,
    TargetGone,
    stamped_delta,
    switches_between,
)
from pytest_webperf.swarm.stamp import CpuProbe

__all__ = [
    "CpuSource",
    "GeneratorMonitor",
    "ResourceMonitor",
    "RunMonitor",
]

log = logging.getLogger(__name__)

CpuSource = Literal["cgroup", "psutil"]
S = TypeVar("S", ResourceSample, GeneratorSample)


class _PeriodicMonitor(Generic[S]):
    """A daemon thread calling ``_tick`` every ``interval`` on a drift-free schedule;
    ``_tick`` appends (when, sample) to ``_samples`` under the lock."""

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
        self._samples: list[tuple[float, S]] = []

    def __enter__(self) -> _PeriodicMonitor[S]:
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

    def samples(self) -> list[S]:
        """Every sample so far, ``t`` relative to the current origin, in time order."""
        with self._lock:
            origin, taken = self._origin, list(self._samples)
        return [replace(sample, t=tick(at - origin)) for at, sample in taken]

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
    # the swarm child's stamp of each part's tree at this bound (``cpustamp``), if any
    stamped: Mapping[str, Sequence[Sequence[float]]] = field(default_factory=dict)
    switches: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # part: tid: n


class ResourceMonitor(_PeriodicMonitor[ResourceSample]):
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

    def cpu_probes(self) -> tuple[CpuProbe, ...]:
        """Each part, for the swarm child to stamp (``cpustamp``)."""
        return tuple(
            CpuProbe(p.name, p.sampler.root_pid, p.cgroup.cpu_counter() if p.cgroup else None)
            for p in self._parts
            if p.sampler is not None
        )

    def mark(self, name: str, stamp: Mapping[str, Any] | None = None) -> None:
        """Record every part's CPU counters under ``name``: now, or as ``stamp`` (the
        swarm child's, at the bound it defines) holds them."""
        parts = (stamp or {}).get("parts", {})
        with self._lock:
            now = self._clock()
            cgroup, tree = {}, {}
            for p in self._parts:
                given = parts.get(p.name) or {}
                read = None if p.cgroup is None else p.cgroup.cpu_seconds()
                cgroup[p.name] = given["cgroup"] if given.get("cgroup") is not None else read
                tree[p.name] = self._poll_tree(p)
            stamped = {k: v["tree"] for k, v in parts.items() if v.get("tree") is not None}
            switches = {k: v["switches"] for k, v in parts.items() if v.get("switches") is not None}
            self._marks[name] = _Mark(now, cgroup, tree, stamped, switches)

    def mark_start(self, at: float | None = None, stamp: Mapping[str, Any] | None = None) -> None:
        """Start of the measured phase: the origin of ``t`` and the mark "start"."""
        super().mark_start(at)
        self.mark("start", stamp)

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
            if kind == "psutil" and part.name in first.stamped and part.name in last.stamped:
                # both bounds stamped by the child: exactly the requests' window
                result[part.name] = stamped_delta(first.stamped[part.name], last.stamped[part.name])
                continue
            a = (first.cgroup_cpu if kind == "cgroup" else first.tree_cpu).get(part.name)
            b = (last.cgroup_cpu if kind == "cgroup" else last.tree_cpu).get(part.name)
            result[part.name] = None if a is None or b is None else max(0.0, b - a)
        return result

    def context_switches(self, since: str = "start", until: str = "end") -> int | None:
        """Context switches of every part's threads between two stamped marks (the swarm
        child's, at the bounds of the measured phase); None when a bound was not stamped."""
        with self._lock:
            first, last = self._marks.get(since), self._marks.get(until)
        if first is None or last is None:
            return None
        names = [p.name for p in self._parts]
        if not all(n in first.switches and n in last.switches for n in names):
            return None
        return sum(switches_between(first.switches[n], last.switches[n]) for n in names)

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


class GeneratorMonitor(_PeriodicMonitor[GeneratorSample]):
    """The load generator's own CPU every ``interval``, all its processes (workers too)."""

    def __init__(
        self, pid: int, *, interval: float = 1.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__(interval, clock)
        # CPU and process count only: nothing that costs fd walks in the generator's tree
        self._sampler: ProcessTreeSampler | None = ProcessTreeSampler(
            pid, "generator", full_memory_every=0, fds=False, connections=False, clock=clock
        )

    def __enter__(self) -> GeneratorMonitor:
        self.start()
        return self

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

    The shape ``plan.Monitor`` asks for. Entered before the swarm starts;
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

    def cpu_probes(self) -> tuple[CpuProbe, ...]:
        return () if self._resources is None else self._resources.cpu_probes()

    def mark_start(self, stamp: Mapping[str, Any] | None = None) -> None:
        """The measured phase starts: now, or at the instant the child's ``stamp`` was
        read (the origin of both series, and of the server's CPU)."""
        now = self._clock()
        if stamp is not None and isinstance(stamp.get("at"), int | float):
            now = min(now, float(stamp["at"]))  # the same monotonic clock, machine-wide
        with self._lock:
            self._origin = now
            generator = self._generator
        if self._resources is not None:
            self._resources.mark_start(now, stamp)
        if generator is not None:
            generator.mark_start(now)

    def mark_end(self, stamp: Mapping[str, Any] | None = None) -> None:
        """End of the measured phase (once; leaving the block does it if not done)."""
        with self._lock:
            if self._ended or self._origin is None:
                return
            self._ended = True
        if self._resources is not None:
            self._resources.mark("end", stamp)

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

    def server_ctx_switches(self) -> int | None:
        """Context switches of all parts' threads over the measured phase (stamped by the
        swarm child at its bounds); None if not measured."""
        if self._resources is None or not self._ended:
            return None
        return self._resources.context_switches("start", "end")

    @property
    def errors(self) -> list[str]:
        with self._lock:
            generator = self._generator
        found = [] if self._resources is None else self._resources.errors
        return found + ([] if generator is None else generator.errors)
