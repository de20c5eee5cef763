"""A counted measurement's settings and what it gathers across repetitions
(``CountedRequests``): what is sent, N once sized (``sizing.py``), each side's windows for
the differential profile, and what cannot be counted (``refusal``)."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import psutil

from pytest_webperf.errors import OptionError
from pytest_webperf.measurement.count import sizing
from pytest_webperf.measurement.count.window import Probe, Settings
from pytest_webperf.models.workload import Workload
from pytest_webperf.profiling import valgrind
from pytest_webperf.profiling.instructions import Window, diff, merged_stacks
from pytest_webperf.profiling.runtimes import naming_notes, symbols_fix
from pytest_webperf.profiling.stacks import write_folded
from pytest_webperf.targets.base import Target
from pytest_webperf.targets.paired import PairedTarget
from pytest_webperf.targets.process import ProcessTarget
from pytest_webperf.targets.runtime import Pinning, launcher
from pytest_webperf.targets.wrap import Wrappable

CALLERS = 40  # --separate-callers when the run is profiled: exact stacks up to this depth
# the checks whose figures a window's size is set for, and those a native window feeds
SIZED_BY = ("instructions_per_req", "allocs_per_req")
NATIVE_CHECKS = ("syscalls_per_req", "ctx_switches_per_req")


def refusal(target: Target) -> str | None:
    """Why ``target`` cannot be counted, or None."""
    if isinstance(target, PairedTarget):
        return next((why for why in map(refusal, sides(target)) if why), None)
    if not isinstance(target, Wrappable):
        return (
            f"{target.name}: count=True starts the target under Valgrind, and a server that "
            "is already running (--webperf-target-url) cannot be started again: count a "
            "webperf.process(...) or webperf.server(...) target"
        )
    pinning = target.pinning()
    if pinning.refused:
        return f"{target.name}: {pinning.refused}"
    return None


def sides(target: Target) -> list[Target]:
    if isinstance(target, PairedTarget):
        return [target.change] + ([target.base] if target.base is not None else [])
    return [target]


def threads(target: Target) -> tuple[int, int]:
    """(processes, threads) of the target's trees now."""
    processes = found = 0
    for pid in target.parts().values():
        try:
            root = psutil.Process(pid)
            for process in [root, *root.children(recursive=True)]:
                processes += 1
                found += process.num_threads()
        except psutil.Error:
            continue
    return processes, found


@dataclass
class CountedRequests:
    """``workload`` (its ``requests``: N given, 0: sized by the probe) sent at the plan's
    concurrency, counted; ``callers``: ``--separate-callers`` depth (0: no stacks)."""

    workload: Workload
    user_class: str = "native"
    callers: int = 0
    tls_ca: str | None = None
    tls_resume: bool = False
    note: str | None = None
    fresh: bool = True  # each repetition starts its own instances
    threshold: float = sizing.DEFAULT_THRESHOLD  # the counted checks' smallest, relative
    native: bool = True  # a native window: a check reads system calls or switches
    paced: bool = True  # each request once the target is at rest; False once one never was
    native_paced: bool = True  # the same in the native window (V8 rests there, not under
    # callgrind: a Node server's native windows back to back read 3.1-3.7 system calls a
    # request, paced 4.07 in every one)
    # each side's windows (by the side target's id): the differential profile's input
    windows: dict[int, list[Window]] = field(default_factory=dict)
    packages: dict[str, str] = field(default_factory=dict)  # object without symbols -> package
    requests: int = 0  # N, once known
    limit_s: float = sizing.MIN_LIMIT_S  # a window's time limit, from the probe's pace
    probed: bool = False
    spread: float | None = None  # the probe's halves apart, relative (what sized N)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self.requests = self.workload.requests
        if self.requests:  # no probe: a bound as generous as the slowest runtime needs
            self.limit_s = sizing.given_limit(self.requests)

    @property
    def tool(self) -> valgrind.Callgrind:
        return valgrind.Callgrind(callers=self.callers)

    def judged_by(self, checks: Sequence[Any]) -> None:
        """Size the windows for ``checks`` (the measurement's): the smallest relative
        threshold of the figures the window counts, and a native window only when a
        check reads what it measures."""
        metrics = {getattr(c, "metric", "") for c in checks}
        relative = [
            c.percent / 100
            for c in checks
            if getattr(c, "metric", "") in SIZED_BY and hasattr(c, "percent") and c.percent > 0
        ]
        if relative:
            self.threshold = min(relative)
        self.native = bool(metrics & set(NATIVE_CHECKS))

    def settings(self, concurrency: int) -> Settings:
        return Settings(
            self.workload,
            concurrency=concurrency,
            callers=self.callers,
            tls_ca=self.tls_ca,
            tls_resume=self.tls_resume,
            native=self.native,
            paced=self.paced,
            native_paced=self.native_paced,
        )

    def size(self, probes: Sequence[Probe]) -> tuple[int, float]:
        """N and the window's time limit: given, or from the first repetition's probes
        (both sides' at once: the larger N of the two)."""
        with self._lock:
            if not self.probed and not self.workload.requests and probes:
                spreads = [sizing.largest_spread([p.instructions, p.allocations]) for p in probes]
                self.spread = max(spreads)
                self.requests = sizing.sized(self.spread, self.threshold)
                pace = max(p.pace_s for p in probes)
                self.limit_s = sizing.time_limit(pace, self.requests)
                self.probed = True
            return self.requests, self.limit_s

    def check(self, target: Target) -> None:
        why = refusal(target)
        if why is not None:
            raise OptionError(why)
        problem = valgrind.problem()
        local = [t for t in sides(target) if isinstance(t, ProcessTarget)]
        if problem is not None and local:
            raise OptionError(f"{target.name}: {problem}")

    def keep(
        self, target: Target, window: Window, packages: Mapping[str, str] | None = None
    ) -> None:
        with self._lock:
            self.windows.setdefault(id(target), []).append(window)
            self.packages.update(packages or {})

    def windows_of(self, target: Target) -> list[Window]:
        return self.windows.get(id(target), [])

    def notes(self, target: Wrappable, pinning: Pinning, tool: valgrind.Callgrind) -> list[str]:
        """What a repetition says of how it was counted."""
        notes = [f"counted by {tool.describe(valgrind.version())}", pinning.note]
        processes, found = threads(target)
        if found > processes:
            notes.append(
                "more threads than processes: Valgrind runs one thread at a time, so the "
                "threads are serialised; instructions per request stay the program's, but "
                "lock hand-offs and background work (a collector, a compiler) land "
                "differently than natively"
            )
        if self.workload.ordered:
            notes.append(
                f"a mix of {len(self.workload.mix)} sent in its fixed order by weight, the "
                "same on both sides"
            )
        argv = getattr(target, "argv", None)
        why = launcher(argv) if isinstance(argv, list) else None
        return [n for n in (*notes, why) if n]

    def profile(self, base: Target, change: Target) -> dict[str, Any]:
        """The exact differential profile of an A/B run, as the JSON report holds it:
        per function, exclusive and inclusive instructions per request of A and B, the
        changes ranked (credible ones first), both sides' stacks in instructions."""
        a, b = self.windows_of(base), self.windows_of(change)
        pairs = list(zip(a, b, strict=False))
        if not pairs:
            return {"why": "no pair was counted on both sides"}
        found = diff(pairs)
        base_stacks, base_requests = merged_stacks([x for x, _ in pairs])
        change_stacks, change_requests = merged_stacks([y for _, y in pairs])
        notes = []
        runtime = change.pinning().runtime if isinstance(change, Wrappable) else "native"
        if not base_stacks:
            notes.append(
                f"no stacks: callers are not kept for {runtime} (its pinning says why)"
                if self.callers
                else "no stacks: the run kept no callers (--webperf-profile=off)"
            )
        if found.pairs < 2:
            notes.append("one pair: no interval, no function named")
        windows = [w for pair in pairs for w in pair]
        notes += naming_notes(runtime, windows)
        total = sum(c.change for c in found.changes)
        return {
            "unit": "Ir",
            "tools": [self.tool.describe(valgrind.version())],
            "pairs": found.pairs,
            "tested": found.tested,
            "base_ir": found.base_total,
            "change_ir": found.change_total,
            "listed_change_ir": total,
            "changes": [c.to_dict() for c in found.changes],
            "requests": {"A": base_requests, "B": change_requests},
            "unnamed": {
                label: symbols_fix(self.packages.get(path))
                for w in windows
                for label, path in w.unnamed.items()
            },
            "base_folded": write_folded(base_stacks),
            "change_folded": write_folded(change_stacks),
            "notes": notes,
        }
