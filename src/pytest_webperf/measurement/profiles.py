"""CPU profiles recorded alongside a measurement's repetitions (``--webperf-profile``):
the profiling monitor, the sampling rates planned as the repetitions go, and what the
measurement keeps of them (``Measurement.profile``, before the judge adds the diff).

Rates (``profiling/rates.py``): the first repetition (an A/B run's first pair, both
sides alike) as if the target used a quarter of a core; every later one from the cores
the repetitions so far used, so each side ends with ~2,000 samples (times the
dispersion the repetitions measured, from the second on), within the tools' caps. A/B
sides share every pair's rates, so the profiler's cost is the same on both. A run judged
against a stored baseline replays the rates the baseline was profiled at, repetition by
repetition (``schedule``): its figures then carry the same cost of the profiler as the
baseline's.

What is kept per side (``profiling/digest.py``): each repetition's largest functions
(self samples), samples, requests, CPU per request (the monitor's, or the sampler's
when the monitor measured none) and rates; the side's folded stacks for the JSON report
and the flame graph (the largest first, within ``REPORT_BYTES``, every sample still
counted: a Tomcat's deep stacks took 650 KB per side at 1999 Hz); the captures' notes.
The judge (``gate/attribution.py``) pools them into the diff with its own estimate of
the change of the target's CPU per request.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pytest_webperf.measurement.plan import Monitor, MonitorFactory
from pytest_webperf.models.measurement import RunResult
from pytest_webperf.models.samples import GeneratorSample, ResourceSample
from pytest_webperf.profiling import diff, digest, rates
from pytest_webperf.profiling.capture import Capture, Recording, problem
from pytest_webperf.profiling.stacks import merge, write_folded
from pytest_webperf.swarm.stamp import CpuProbe
from pytest_webperf.targets.base import Target

REPORT_BYTES = 256 * 1024  # a side's folded stacks in the JSON report, at most (all samples)


class _ProfilingMonitor:
    """The run's monitor, with a profile recorded over the measured phase."""

    def __init__(self, inner: Monitor | None, recording: Recording) -> None:
        self.inner, self.recording = inner, recording

    def watch_generator(self, pid: int) -> None:
        if self.inner is not None:
            self.inner.watch_generator(pid)

    def cpu_probes(self) -> tuple[CpuProbe, ...]:
        return () if self.inner is None else self.inner.cpu_probes()

    def mark_start(self, stamp: Mapping[str, Any] | None = None) -> None:
        if self.inner is not None:
            self.inner.mark_start(stamp)
        self.recording.start()

    def mark_end(self, stamp: Mapping[str, Any] | None = None) -> None:
        self.recording.stop()
        if self.inner is not None:
            self.inner.mark_end(stamp)

    def resource_samples(self) -> list[ResourceSample]:
        return self.inner.resource_samples() if self.inner is not None else []

    def generator_samples(self) -> list[GeneratorSample]:
        return self.inner.generator_samples() if self.inner is not None else []

    def server_cpu_seconds(self) -> float | None:
        return self.inner.server_cpu_seconds() if self.inner is not None else None

    def server_ctx_switches(self) -> int | None:
        return self.inner.server_ctx_switches() if self.inner is not None else None

    @property
    def errors(self) -> list[str]:
        return self.inner.errors if self.inner is not None else []


def cores_of(run: RunResult, capture: Capture | str | None = None) -> float | None:
    """The cores a repetition's target used: the monitor's CPU time over the measured
    phase, or (none measured) the samples over the rate."""
    if run.duration_s <= 0:
        return None
    if run.server_cpu_seconds is not None:
        return run.server_cpu_seconds / run.duration_s
    if isinstance(capture, Capture) and capture.rates:
        return capture.samples / max(capture.rates.values()) / run.duration_s
    return None


def repetition_of(run: RunResult, capture: Capture) -> diff.Repetition | None:
    """A repetition as the diff pools it: self samples, and CPU per request (the
    monitor's; else the sampler's own, samples x period over requests)."""
    own: dict[str, int] = {}
    for stack, count in capture.stacks.items():
        leaf = stack.rsplit(";", 1)[-1]
        own[leaf] = own.get(leaf, 0) + count
    cpu = run.cpu_per_req_us
    if cpu is None and run.requests > 0:
        cpu = capture.samples * capture.period_s * 1e6 / run.requests
    return diff.Repetition(own, cpu) if cpu else None


@dataclass
class Profiler:
    """Profiles of one measurement's repetitions (``captures`` per side: ``A`` the base of
    an A/B run, ``B`` the change or the measurement itself), at planned rates.
    ``unavailable``: why none can be recorded (``--webperf-profile=on`` says so)."""

    duration_s: float
    repetitions: int  # planned: the minimum pairs, or the repetitions
    schedule: Sequence[Mapping[str, int]] = ()  # a stored baseline's rates, replayed
    unavailable: str | None = None
    note: str | None = None  # said in the profile's notes
    rates: dict[str, int] = field(default_factory=dict)
    captures: dict[str, list[Capture | str]] = field(default_factory=lambda: {"A": [], "B": []})
    recordings: list[Recording] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rates = self._rates_for(0, [], [])

    @classmethod
    def of(
        cls,
        mode: str,
        duration_s: float,
        repetitions: int,
        schedule: Sequence[Mapping[str, int]] = (),
    ) -> Profiler | None:
        """The profiler ``mode`` asks for (``auto``: when a profiler works here), or None."""
        if mode == "off":
            return None
        why = problem()
        if why is not None and mode != "on":
            return None
        return cls(duration_s, repetitions, schedule, unavailable=why)

    @classmethod
    def against_stored(
        cls, mode: str, plan_duration_s: float, repetitions: int, stored: Any, saving: bool
    ) -> tuple[Profiler | None, dict[str, Any] | None]:
        """The profiler of a measurement judged against its stored baseline (``stored``,
        a ``Measurement`` or None), and what its profile says when there is none.
        ``auto`` profiles when the baseline carries a profile (at its rates: both then
        carry the profiler's cost alike) and when the run saves a baseline (which then
        keeps one); ``on`` always."""
        if mode == "off":
            return None, None
        kept = stored.profile if stored is not None else None
        reps = (kept or {}).get("repetitions")
        schedule = [
            r["rate_hz"]
            for r in (reps if isinstance(reps, list) else ())
            if isinstance(r, Mapping) and isinstance(r.get("rate_hz"), Mapping)
        ]
        if mode == "auto" and not schedule and not saving:
            if stored is None:
                return None, None  # nothing to compare with, nothing saved
            return None, {
                "why": "its stored baseline carries no profile, and profiling this run alone "
                "would add the profiler's cost to its figures: --webperf-save stores one "
                "(while --webperf-profile is auto or on)"
            }
        profiler = cls.of(mode, plan_duration_s, repetitions, schedule)
        if profiler is not None and stored is not None and not schedule:
            profiler.note = (
                "this run was profiled and its stored baseline was not: its CPU figures "
                "carry the profiler's cost, the baseline's do not"
            )
        return profiler, None

    def monitors(self, factory: MonitorFactory) -> MonitorFactory:
        """``factory``'s monitors, each recording a profile of the target it watches."""
        if self.unavailable is not None:
            return factory

        @contextmanager
        def monitor(target: Target) -> Iterator[Monitor | None]:
            recording = Recording(dict(target.parts()), dict(self.rates))
            self.recordings.append(recording)
            try:
                recording.prepare()  # perf starts before the warm-up: it is slow to start
                with factory(target) as inner:
                    yield _ProfilingMonitor(inner, recording)
            finally:
                recording.stop()

        return monitor

    def repetition(self, side: str, run: Callable[[], RunResult]) -> RunResult:
        """One repetition, and its profile (if one was recorded) added to the side's
        captures (folded right away: a container's binaries are readable while it lives)."""
        try:
            result = run()
            for recording in self.recordings:
                self.captures[side].append(recording.collect())
            return result
        finally:
            for recording in self.recordings:
                recording.close()
            self.recordings.clear()

    def replan(self, sides: Mapping[str, Sequence[RunResult]]) -> None:
        """The rates of the next repetition (or pair), from what the ones so far used."""
        done = min(len(runs) for runs in sides.values())
        pairs = [list(zip(runs, self.captures[side], strict=False)) for side, runs in sides.items()]
        self.rates = self._rates_for(done, *pairs)

    def _rates_for(
        self, done: int, *sides: Sequence[tuple[RunResult, Capture | str]]
    ) -> dict[str, int]:
        if self.schedule:
            replayed = self.schedule[min(done, len(self.schedule) - 1)]
            return {str(tool): int(rate) for tool, rate in replayed.items()}
        if done == 0 or not any(sides):
            return rates.first_rates(self.duration_s, self.repetitions)
        used = [c for side in sides if side for c in [_mean_cores(side)] if c is not None]
        have = min(sum(c.samples for _, c in side if isinstance(c, Capture)) for side in sides)
        reps = [_repetitions(side) for side in sides]
        phi = 1.0
        if all(len(side) >= 2 for side in reps):
            phi = diff.dispersion(reps, _tested(reps)).phi
        cores = min(used) if used else rates.FIRST_GUESS_CORES
        return {
            tool: rates.plan(
                tool, cores, self.duration_s, self.repetitions, have=have, done=done, dispersion=phi
            ).rate
            for tool in rates.TOOLS
        }

    def profile(
        self, sides: Mapping[str, Sequence[RunResult]], limit: int | None = None
    ) -> dict[str, Any]:
        """What the measurement keeps (``Measurement.profile``): per side its repetitions'
        digests and folded stacks; or ``{"why": ...}`` when there is none. ``sides``:
        ``{"B": runs}``, or ``{"A": base, "B": change}``; ``limit``: the pairs to keep."""
        if self.unavailable is not None:
            return {"why": self.unavailable}
        kept: dict[str, list[tuple[RunResult, Capture]]] = {}
        reasons: list[str] = []
        notes: list[str] = []
        for side, runs in sides.items():
            captures = self.captures[side][: limit if limit is not None else len(runs)]
            reasons += [c for c in captures if isinstance(c, str)]
            both = zip(runs, captures, strict=False)
            kept[side] = [(r, c) for r, c in both if isinstance(c, Capture)]
            notes += [n for _, c in kept[side] for n in c.notes]
        if not all(kept.values()):
            return {"why": "; ".join(dict.fromkeys(reasons)) or "no repetition was profiled"}
        if reasons:
            notes.append(f"{len(reasons)} repetition(s) not profiled: {reasons[0]}")
        captured = [c for side in kept.values() for _, c in side]
        names = {"A": "base", "B": "change"}
        found: dict[str, Any] = {
            "tools": sorted({tool for c in captured for tool in c.tools}),
            "samples": {side: sum(c.samples for _, c in got) for side, got in kept.items()},
            "requests": {side: sum(r.requests for r, _ in got) for side, got in kept.items()},
            "notes": list(dict.fromkeys(notes)),
        }
        for side, got in kept.items():
            key = "repetitions" if side == "B" else "base_repetitions"
            found[key] = [
                digest.repetition(c.stacks, r.requests, _cpu(r, c), c.rates) for r, c in got
            ]
            stacks = digest.bound(merge(*(c.stacks for _, c in got)), REPORT_BYTES)
            found[f"{names[side]}_folded"] = write_folded(stacks)
        for note in (self.note, self._short_note(kept)):
            if note:
                found["notes"].append(note)
        return found

    def _short_note(self, kept: Mapping[str, Sequence[tuple[RunResult, Capture]]]) -> str | None:
        fewest = min(sum(c.samples for _, c in side) for side in kept.values())
        cores = [c for side in kept.values() for c in [_mean_cores(side)] if c is not None]
        tools = sorted({t for side in kept.values() for _, c in side for t in c.rates})
        if not cores or not tools or self.schedule:
            return None
        tool = tools[0]
        rate = max(c.rates.get(tool, 0) for side in kept.values() for _, c in side)
        count = max(len(side) for side in kept.values())
        return rates.short_note(tool, rate, fewest, min(cores), count)


def _mean_cores(side: Sequence[tuple[RunResult, Capture | str]]) -> float | None:
    found = [c for r, capture in side for c in [cores_of(r, capture)] if c is not None]
    return sum(found) / len(found) if found else None


def _repetitions(side: Sequence[tuple[RunResult, Capture | str]]) -> list[diff.Repetition]:
    found = []
    for run, capture in side:
        if isinstance(capture, Capture):
            rep = repetition_of(run, capture)
            if rep is not None:
                found.append(rep)
    return found


def _tested(sides: Sequence[Sequence[diff.Repetition]]) -> list[str]:
    pooled = [diff.pool(side) for side in sides]
    sizes = [sum(p.values()) or 1 for p in pooled]
    names = {f for p in pooled for f in p}
    return sorted(
        f
        for f in names
        if sum(p.get(f, 0) / n for p, n in zip(pooled, sizes, strict=True)) / len(pooled)
        >= diff.MIN_SHARE
    )


def _cpu(run: RunResult, capture: Capture) -> float | None:
    rep = repetition_of(run, capture)
    return None if rep is None else rep.cpu_per_request_us
