"""One repetition's monitoring (``RunMonitor``): the target's parts, and the generator
once it runs; the shape ``measurement/plan.Monitor`` asks for.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from pytest_webperf.models.samples import GeneratorSample, ResourceSample
from pytest_webperf.sampling.monitor.generator import GeneratorMonitor
from pytest_webperf.sampling.monitor.target import ResourceMonitor
from pytest_webperf.sampling.tree import (
    TargetGone,
)
from pytest_webperf.swarm.stamp import CpuProbe

log = logging.getLogger(__name__)


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
