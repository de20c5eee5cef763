"""CPU placement: which cores the target and the load generator may use.

On a small machine the server and the generator fight over the same cores, and
which of them wins changes from run to run. ``split`` gives each its own cores
(the generator the low half, the target the rest); ``none`` leaves it to the
scheduler; ``auto`` splits on machines with 4 cores or more, where both halves
are big enough to be fair, and leaves 2-3 core machines alone (one core each
would cap a multi-process server at a single core). Explicit
``--webperf-target-cpuset`` / ``--webperf-generator-cpus`` win over the mode.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_webperf.values import PLACEMENTS, parse_cpu_list


def cpu_limit(limits: Mapping[str, Any]) -> float | None:
    """The CPUs a target's limits give it: its quota (``cpus``), else its cpuset's size."""
    if limits.get("cpus"):
        return float(limits["cpus"])
    cpuset = limits.get("cpuset")
    return float(len(parse_cpu_list(str(cpuset)))) if cpuset else None


def cpu_list(cpus: tuple[int, ...]) -> str:
    return ",".join(str(c) for c in cpus)


@dataclass(frozen=True)
class Placement:
    mode: str  # what was asked
    target_cpuset: str | None  # docker --cpuset-cpus of target containers
    generator_cpus: tuple[int, ...]  # sched_setaffinity of generator processes

    def describe(self) -> str:
        if not self.target_cpuset and not self.generator_cpus:
            return f"placement {self.mode}: target and generator share all cores"
        return (
            f"placement {self.mode}: target on CPUs {self.target_cpuset or 'all'}, "
            f"generator on CPUs {cpu_list(self.generator_cpus) or 'all'}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "target_cpuset": self.target_cpuset,
            "generator_cpus": list(self.generator_cpus),
        }


def plan(
    mode: str,
    *,
    cores: int | None = None,
    target_cpuset: str | None = None,
    generator_cpus: tuple[int, ...] = (),
) -> Placement:
    """Where target and generator run; explicit choices win over the mode."""
    if mode not in PLACEMENTS:
        raise ValueError(f"placement {mode!r} is not one of {', '.join(PLACEMENTS)}")
    cores = cores or os.cpu_count() or 1
    split = mode == "split" or (mode == "auto" and cores >= 4)
    if split and cores >= 2 and not (target_cpuset and generator_cpus):
        half = cores // 2
        generator = generator_cpus or tuple(range(half))
        target = target_cpuset or cpu_list(tuple(c for c in range(cores) if c not in generator))
        return Placement(mode, target, generator)
    return Placement(mode, target_cpuset, generator_cpus)
