"""What a repetition's resource samples add up to: the one place that summarises them.

Server CPU, server memory and generator CPU of a run are read here and nowhere
else: the metrics a check looks at (``metrics``), the JSON report's flat figures
(which the table, the HTML page and the charts' captions read), and the
generator-bound rule all call these functions, so a figure has one answer.

The rules:

- **Measured phase only.** Samples with ``t < 0`` are the warm-up and are left
  out unless ``include_warmup`` is asked for.
- **One tick, one time.** The monitor samples every part of a target in one
  tick and stamps them with one ``t``, relative to the start of the measured
  phase, rounded to the millisecond (``tick``). Samples are grouped into ticks
  by ``tick(t)``, so samples read back from a file or built by hand group the
  same way as fresh ones; ticks are an interval (1 s by default) apart, so no
  two ticks share a millisecond.
- **The server is the sum of its parts.** A composite target's CPU % and RSS at a
  tick are the sums over its parts at that tick; the mean and max of server CPU
  are over those per-tick sums, and peak RSS is the peak of the per-tick sum
  (not the sum of each part's peak, reached at different times).
- **The generator** is one process tree sampled once a tick: its CPU is the mean
  of its samples.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import fmean, median
from typing import Any, Literal

from pytest_webperf.models.samples import GeneratorSample, ResourceSample

TICK_DECIMALS = 3  # the monitor's t is in milliseconds
SummedField = Literal["cpu_percent", "rss_mb"]


def tick(t: float) -> float:
    """The tick a sample taken at ``t`` belongs to (the monitor stamps samples with it)."""
    return round(t, TICK_DECIMALS)


@dataclass(frozen=True)
class CpuStats:
    mean: float
    max: float


def measured(
    samples: Iterable[ResourceSample], include_warmup: bool = False
) -> list[ResourceSample]:
    return [s for s in samples if include_warmup or s.t >= 0]


def per_tick_totals(samples: Iterable[ResourceSample], field: SummedField) -> list[float]:
    """The sum over parts of ``field`` at each tick, in time order."""
    totals: dict[float, float] = {}
    for sample in samples:
        at = tick(sample.t)
        totals[at] = totals.get(at, 0.0) + float(getattr(sample, field))
    return [totals[t] for t in sorted(totals)]


def server_cpu_series(
    samples: Sequence[ResourceSample], part: str | None = None, *, include_warmup: bool = False
) -> list[float]:
    """CPU % per tick of one part, or of all parts summed (part None); 100 = one core."""
    chosen = [s for s in measured(samples, include_warmup) if part is None or s.part == part]
    return per_tick_totals(chosen, "cpu_percent")


def usable_threads_peak(samples: Iterable[ResourceSample]) -> int | None:
    """The most threads the target could run at once in any measured tick, summed over
    its parts (a process under a global interpreter lock counts one: ``usable_threads``,
    else ``threads``); None without a measured sample."""
    totals: dict[float, int] = {}
    for sample in measured(samples):
        runnable = sample.threads if sample.usable_threads is None else sample.usable_threads
        at = tick(sample.t)
        totals[at] = totals.get(at, 0) + runnable
    return max(totals.values()) if totals else None


def cpu_stats(
    samples: Sequence[ResourceSample], part: str | None = None, *, include_warmup: bool = False
) -> CpuStats | None:
    """Mean and max CPU % of one part, or of all parts summed per tick (part None)."""
    values = server_cpu_series(samples, part, include_warmup=include_warmup)
    return CpuStats(fmean(values), max(values)) if values else None


def peak_rss_mb(
    samples: Sequence[ResourceSample], *, include_warmup: bool = False
) -> dict[str, float]:
    """Peak RSS per part, plus ``"total"``: the peak of the per-tick sum over parts.

    RSS double counts pages shared between processes (a prefork server's
    children); ``pss_mb`` and ``cgroup_memory_mb`` do not.
    """
    chosen = measured(samples, include_warmup)
    peaks: dict[str, float] = {}
    for sample in chosen:
        peaks[sample.part] = max(peaks.get(sample.part, 0.0), sample.rss_mb)
    totals = per_tick_totals(chosen, "rss_mb")
    if totals:
        peaks["total"] = max(totals)
    return peaks


def server_rss_peak(samples: Sequence[ResourceSample]) -> float | None:
    """The server's peak RSS (MB) over the measured phase, all parts summed per tick."""
    return peak_rss_mb(samples).get("total")


def rss_plateau_mb(samples: Sequence[ResourceSample]) -> float | None:
    """The server's resident memory through the measured phase, all parts summed per
    tick: the median tick (a stream run holds its connections open throughout, so a
    collector's passing peak or dip does not move it); None without a measured sample."""
    totals = per_tick_totals(measured(samples), "rss_mb")
    return float(median(totals)) if totals else None


def generator_cpu_stats(
    samples: Sequence[GeneratorSample], *, include_warmup: bool = False
) -> CpuStats | None:
    values = [s.cpu_percent for s in samples if include_warmup or s.t >= 0]
    return CpuStats(fmean(values), max(values)) if values else None


def generator_bound(
    gen_samples: Sequence[GeneratorSample],
    server_samples: Sequence[ResourceSample],
    gen_processes: int,
    *,
    server_cores: float | None = None,
    generator_threshold: float = 0.8,
    server_threshold: float = 0.9,
    cores: int | None = None,
) -> bool:
    """Whether the generator, not the server, limited the throughput of a run.

    The rule: the generator is saturated, its mean CPU over the measured phase
    at least ``generator_threshold`` of what its load-generating processes can
    use (each Locust process is single-threaded: 100 % per process, and never
    more than the machine's ``cores``), while the server is not, its mean CPU
    (all parts) below ``server_threshold`` of the CPU it could have had: its
    quota (``server_cores``), or else what the generator left of the machine.
    80 % for the generator, because on a shared machine a saturated Python
    process is seldom given a whole core (measured here: 85 % with the server
    at 13 %). A server whose CPU is saturated is the bottleneck even when the
    generator is busy too. No generator samples: False (nothing shows the
    generator was the limit).
    """
    gen = generator_cpu_stats(gen_samples)
    if gen is None or gen_processes < 1:
        return False
    machine = cores or os.cpu_count() or 1
    generator_capacity = min(gen_processes, machine) * 100.0
    server = cpu_stats(server_samples)
    if server_cores:
        server_capacity = min(server_cores, machine) * 100.0
    else:  # unlimited: what the generator leaves of the machine, at least one core
        server_capacity = max(machine * 100.0 - gen.mean, 100.0)
    server_busy = server is not None and server.mean >= server_threshold * server_capacity
    return gen.mean >= generator_threshold * generator_capacity and not server_busy


def remote_bound(
    outcome: Any,
    server_samples: Sequence[ResourceSample],
    server_cores: float | None = None,
    *,
    generator_threshold: float = 0.8,
    server_threshold: float = 0.9,
    cores: int | None = None,
) -> bool:
    """Whether a generator process on another machine limited the run (a swarm's
    outcome: its ``generators`` and ``duration_s``): the busiest remote worker (its
    CPU seconds in the measured phase came with its intervals) used at least
    ``generator_threshold`` of its one core, while the server was not saturated (as
    ``generator_bound``). Its users share its core; Locust gives every worker its
    share of the users, so the slowest worker holds back its share of the load."""
    remote = [g for g in outcome.generators if getattr(g, "remote", False)]
    if not remote or outcome.duration_s <= 0:
        return False
    busiest = max(g.cpu_s for g in remote) / outcome.duration_s
    machine = cores or os.cpu_count() or 1
    server = cpu_stats(server_samples)
    capacity = min(server_cores, machine) * 100.0 if server_cores else machine * 100.0
    server_busy = server is not None and server.mean >= server_threshold * capacity
    return busiest >= generator_threshold and not server_busy
