"""What a measurement runs with: its plan (RunPlan: users, durations, repetitions,
generator processes) and the monitor that samples the target and the generator alongside
(Monitor, MonitorFactory)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, Protocol

from pytest_webperf.models.samples import GeneratorSample, ResourceSample
from pytest_webperf.sampling.monitor import RunMonitor
from pytest_webperf.swarm.spec import Remote, SwarmSpec
from pytest_webperf.swarm.stamp import CpuProbe
from pytest_webperf.targets.base import Target


class Monitor(Protocol):
    """Samples the target (and the generator) while a swarm runs."""

    def watch_generator(self, pid: int) -> None: ...

    def cpu_probes(self) -> tuple[CpuProbe, ...]:
        """The parts whose CPU the swarm child stamps at the measured phase's bounds."""
        ...

    def mark_start(self, stamp: Mapping[str, Any] | None = None) -> None:
        """The measured phase starts; ``stamp``: the child's reading at that instant."""
        ...

    def resource_samples(self) -> list[ResourceSample]: ...

    def generator_samples(self) -> list[GeneratorSample]: ...

    def server_cpu_seconds(self) -> float | None: ...

    def server_ctx_switches(self) -> int | None:
        """The target's threads' context switches over the measured phase, or None."""
        ...

    def mark_end(self, stamp: Mapping[str, Any] | None = None) -> None: ...

    @property
    def errors(self) -> list[str]: ...


MonitorFactory = Callable[[Target], AbstractContextManager[Monitor | None]]


def no_monitor(target: Target) -> AbstractContextManager[Monitor | None]:
    return nullcontext(None)


def sampling_monitor(target: Target) -> AbstractContextManager[Monitor | None]:
    """The target's process trees and cgroups, and the generator, every second."""
    return RunMonitor.for_target(target)


@dataclass(frozen=True)
class RunPlan:
    """How to run each repetition, whatever the kind of load."""

    concurrency: int
    duration_s: float
    warmup_s: float
    repeat: int
    timeout_s: float = 10.0
    workers: int = 1
    spawn_rate: float = 0.0
    server_cores: float | None = None  # the target's CPU limit, for the generator-bound rule
    generator_cpus: tuple[int, ...] = ()  # pin the generator here (split placement)
    remote: Remote | None = None  # generator workers on other machines join each swarm
    profile: str = "off"  # A/B runs: CPU profiles of both sides (auto, on, off)

    def swarm(self, host: str, **load: object) -> SwarmSpec:
        """The swarm of one repetition: this plan's users and times, the kind's load."""
        return SwarmSpec(
            host=host,
            users=self.concurrency,
            duration_s=self.duration_s,
            warmup_s=self.warmup_s,
            spawn_rate=self.spawn_rate,
            timeout_s=self.timeout_s,
            workers=self.workers,
            cpus=self.generator_cpus,
            remote=self.remote,
            **load,  # type: ignore[arg-type]
        )
