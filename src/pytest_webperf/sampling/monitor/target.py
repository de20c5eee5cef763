"""The target's parts sampled every second: each part's process tree (psutil) and its
cgroup, CPU read at the swarm child's stamps of the measured phase, memory, threads.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import psutil

from pytest_webperf.models.samples import ResourceSample
from pytest_webperf.sampling.cgroup import CgroupReader, owns_its_cgroup
from pytest_webperf.sampling.monitor.periodic import _PeriodicMonitor
from pytest_webperf.sampling.tree import (
    MB,
    ProcessTreeSampler,
    TargetGone,
    stamped_delta,
    switches_between,
)
from pytest_webperf.swarm.stamp import CpuProbe

CpuSource = Literal["cgroup", "psutil"]


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
