"""The load generator's own CPU every second, all its processes (workers too)."""

from __future__ import annotations

import time
from collections.abc import Callable

from pytest_webperf.models.samples import GeneratorSample
from pytest_webperf.sampling.monitor.periodic import _PeriodicMonitor
from pytest_webperf.sampling.tree import (
    ProcessTreeSampler,
    TargetGone,
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
