"""A counted measurement (``webperf.http(..., count=True)``): each repetition counts what
the target does for exactly N requests, instead of timing it.

One repetition (``CountedRequests.round``), on fresh instances of the target:

1. **Counted window.** The target is started under Valgrind's callgrind
   (``profiling/valgrind.py``), its runtime pinned alike on both passes
   (``targets/runtime.py``); once healthy it gets 200 warm-up requests (uninstrumented:
   Valgrind without callgrind's counting runs them several times faster), then
   instrumentation is switched on in every process, every process's counters are zeroed,
   the native loop sends exactly N requests at concurrency 1, and every process is dumped:
   instructions, allocations and the per-function profile of exactly those requests
   (``profiling/instructions.py``). Unless the test gave N, 50 requests are zeroed and
   dumped before the window, in every repetition (every window follows the same steps:
   a dump in one repetition only moved CPython's count by 0.3 %, and a server's heap after
   250 requests is not its heap after 200); the first repetition's give the instructions
   per request N is sized by: ``BUDGET_IR`` of them, clamped to 200..2000.
2. **Native window.** The target is started again without Valgrind (whose serialised
   threads change what a runtime does), warmed up, and N requests (1000 at least) are
   sent with its system calls counted (``sampling/syscalls.py``) and its threads' context
   switches stamped at the window's bounds (``swarm/stamp.py``).

Concurrency 1 is the default: at 2, epoll batching and lock hand-offs depend on timing
(nginx 1.2 % apart instead of 0.000 %). Each round starts its own instances (``fresh``):
the loop does not restart the target, and each repetition is an instance of its own. The
repetition's figures are the counted window's (its latency is Valgrind's, not the
server's); ``RunResult.counts`` holds both windows' counts and what they cost.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import psutil

from pytest_webperf.errors import OptionError, TargetError
from pytest_webperf.measurement.loop import MachineClock, events_to
from pytest_webperf.measurement.plan import RunPlan
from pytest_webperf.measurement.repetition import run_result
from pytest_webperf.models.counts import Counts
from pytest_webperf.models.measurement import RunResult
from pytest_webperf.models.workload import Request, Workload
from pytest_webperf.profiling import valgrind
from pytest_webperf.profiling.instructions import (
    Window,
    diff,
    merged_stacks,
    window_of,
)
from pytest_webperf.profiling.stacks import write_folded
from pytest_webperf.sampling.monitor import RunMonitor
from pytest_webperf.sampling.syscalls import SyscallCounter
from pytest_webperf.swarm.runner import run_swarm
from pytest_webperf.swarm.spec import SwarmSpec
from pytest_webperf.targets.base import Target
from pytest_webperf.targets.client import warm
from pytest_webperf.targets.paired import PairedTarget
from pytest_webperf.targets.process import ProcessTarget
from pytest_webperf.targets.runtime import Pinning, launcher
from pytest_webperf.targets.wrap import DIR, Wrap, Wrappable

WARMUP_REQUESTS = 200
PROBE_REQUESTS = 50
BUDGET_IR = 2.5e9  # instructions a counted window is sized to: 20-30 CPU-s under callgrind
MIN_REQUESTS, MAX_REQUESTS = 200, 2000
CALLERS = 40  # --separate-callers when the run is profiled: exact stacks up to this depth
SLOWDOWN = 10.0  # a target under callgrind gets this many times its health check's patience
MIN_LIMIT_S = 60.0  # a window's time limit: at least this, else 20 times the probe's pace
GIVEN_LIMIT_S = 0.25  # ... or, with N given (no probe), this much per request
# the native window's requests at least: a runtime's timer wake-ups (CPython's server polls
# every 0.5 s) are a system call or two per window, so per request they shrink with N
NATIVE_MIN = 1000


def sized(instructions_per_req: float) -> int:
    """N for a target that runs ``instructions_per_req``: ``BUDGET_IR`` of them, clamped."""
    if instructions_per_req <= 0:
        return MAX_REQUESTS
    return max(MIN_REQUESTS, min(MAX_REQUESTS, round(BUDGET_IR / instructions_per_req)))


def refusal(target: Target) -> str | None:
    """Why ``target`` cannot be counted, or None."""
    if isinstance(target, PairedTarget):
        sides = [target.change] + ([target.base] if target.base is not None else [])
        return next((why for why in map(refusal, sides) if why), None)
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
class _Native:
    """What the native window measured."""

    result: RunResult
    syscalls: int | None
    tool: str | None
    why: str


@dataclass
class _CountedRound:
    """The counted window's swarm, and what it adds to the repetition's result."""

    spec: SwarmSpec
    kind: CountedRequests
    target: Wrappable
    plan: RunPlan
    monitor: valgrind.Monitor
    pids: list[int]
    pinning: Pinning
    tool: valgrind.Callgrind
    started: float
    notes: list[str] = field(default_factory=list)

    def account(self, result: RunResult) -> RunResult:
        name = self.target.name
        now = self.monitor.pids()
        if set(now) != set(self.pids):
            raise TargetError(
                f"{name}: the processes under callgrind changed during the counted window "
                f"({sorted(self.pids)} -> {sorted(now)}): a server that starts processes per "
                "request or connection cannot be counted exactly yet",
                valgrind.valgrind_logs(self.monitor.host),
            )
        dumps = self.monitor.dump(self.pids)
        window = window_of(
            valgrind.read_dumps(dumps, name), result.requests, callers=self.tool.callers
        )
        self.kind.windows.setdefault(id(self.target), []).append(window)
        native = self.kind.native_window(self.target, self.plan, self.pinning)
        counts = self.counts(result, window, native)
        # a counted window is no fixed count of ab's: its time is Valgrind's
        notes = tuple(n for n in result.notes if not n.startswith("short count:"))
        return replace(
            result,
            counts=counts,
            ctx_switches=native.result.ctx_switches,
            requests_asked=None,
            notes=notes,
        )

    def counts(self, result: RunResult, window: Window, native: _Native) -> Counts:
        """The repetition's counts from its two windows."""
        extra = list(self.notes)
        nat, requests = native.result, self.kind.requests
        if nat.errors:
            extra.append(f"the native window had {nat.errors:,} failed of {nat.requests:,}")
        if native.syscalls is None:
            extra.append(f"system calls not counted: {native.why}")
        if result.requests < requests:
            extra.append(f"the counted window completed {result.requests:,} of {requests:,}")
        return Counts(
            requests=result.requests,
            instructions=window.instructions,
            allocations=window.allocations,
            processes=window.processes,
            window_s=result.duration_s,
            native_requests=nat.requests,
            native_window_s=nat.duration_s,
            tool=self.tool.describe(valgrind.version()),
            runtime=self.pinning.runtime,
            pinning=self.pinning.note,
            runtime_allocations=window.runtime_allocations,
            cpu_s=result.server_cpu_seconds,
            native_cpu_s=nat.server_cpu_seconds,
            native_errors=nat.errors,
            syscalls=native.syscalls,
            syscall_tool=native.tool,
            ctx_switches=nat.ctx_switches,
            run_s=time.monotonic() - self.started,
            notes=tuple(dict.fromkeys(extra)),
        )


@dataclass
class CountedRequests:
    """``requests`` (0: sized by a probe) sent by ``user_class`` at the plan's
    concurrency, counted; ``callers``: ``--separate-callers`` depth (0: no stacks)."""

    workload: Workload
    user_class: str = "native"
    callers: int = 0
    tls_ca: str | None = None
    tls_resume: bool = False
    note: str | None = None
    fresh: bool = True  # each round starts its own instances
    # each side's windows (by the side target's id): the differential profile's input
    windows: dict[int, list[Window]] = field(default_factory=dict)
    requests: int = 0  # N, once known
    limit_s: float = MIN_LIMIT_S  # a window's time limit, from the probe's pace
    probed: bool = False

    def __post_init__(self) -> None:
        self.requests = self.workload.requests
        if self.requests:  # no probe: a bound as generous as the slowest runtime needs
            self.limit_s = max(MIN_LIMIT_S, GIVEN_LIMIT_S * self.requests)

    @property
    def tool(self) -> valgrind.Callgrind:
        return valgrind.Callgrind(callers=self.callers)

    def check(self, target: Target) -> None:
        why = refusal(target)
        if why is not None:
            raise OptionError(why)
        problem = valgrind.problem()
        local = [t for t in _sides(target) if isinstance(t, ProcessTarget)]
        if problem is not None and local:
            raise OptionError(f"{target.name}: {problem}")

    def windows_of(self, target: Target) -> list[Window]:
        return self.windows.get(id(target), [])

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
        if not base_stacks:
            notes.append("no stacks: the run kept no callers (--webperf-profile=off)")
        if found.pairs < 2:
            notes.append("one pair: no interval, no function named")
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
            "base_folded": write_folded(base_stacks),
            "change_folded": write_folded(change_stacks),
            "notes": notes,
        }

    def _spec(self, target: Target, plan: RunPlan, requests: int = 0) -> SwarmSpec:
        workload = replace(self.workload, requests=requests or self.requests)
        spec = plan.swarm(
            target.url,
            workload=workload,
            user_class=self.user_class,
            tls_ca=self.tls_ca,
            tls_resume=self.tls_resume,
        )
        return replace(spec, duration_s=self.limit_s, warmup_s=0.0)

    @contextmanager
    def round(self, target: Target, plan: RunPlan, repetition: int) -> Iterator[_CountedRound]:
        """Relaunch ``target`` under callgrind, warm it up, zero it (sizing N first, once);
        the swarm of N requests; ``account`` dumps, then runs the native window."""
        if not isinstance(target, Wrappable):
            raise OptionError(refusal(target) or f"{target.name} cannot be counted")
        started = time.monotonic()
        pinning = target.pinning()
        tool = valgrind.Callgrind(pinning.smc_check, min(self.callers, pinning.callers))
        directory = valgrind.window_directory()
        try:
            wrap = Wrap(
                pinning,
                prefix=tuple(tool.argv(DIR)),
                directory=str(directory),
                valgrind=True,
                slowdown=SLOWDOWN,
                what="under callgrind",
            )
            target.relaunch(wrap)
            monitor = valgrind.Monitor(
                directory, target.seen(str(directory)), target.beside, target.name
            )
            entries = self.workload.entries()
            warm(target, entries, WARMUP_REQUESTS, self.tls_ca)  # uninstrumented: faster
            pids = monitor.pids()
            monitor.every(pids, "instrumentation on")
            self._probe(target, monitor, pids, entries)  # every round: the same history
            monitor.every(pids, "zero")
            notes = self._notes(target, pinning, tool)
            spec = self._spec(target, plan)
            yield _CountedRound(
                spec, self, target, plan, monitor, pids, pinning, tool, started, notes
            )
        finally:
            shutil.rmtree(directory, ignore_errors=True)

    def _probe(
        self,
        target: Target,
        monitor: valgrind.Monitor,
        pids: list[int],
        entries: Sequence[Request],
    ) -> None:
        """When the test did not give N: ``PROBE_REQUESTS`` zeroed and dumped, in every
        round (a dump between the warm-up and the window moved CPython's count by 0.3 %:
        every window follows the same steps); the first gives N from their instructions
        and the windows' time limit from their pace."""
        if self.workload.requests:
            return
        monitor.every(pids, "zero")
        began = time.monotonic()
        warm(target, entries, PROBE_REQUESTS, self.tls_ca)
        pace = (time.monotonic() - began) / PROBE_REQUESTS
        dumps = monitor.dump(pids)
        if self.probed:
            return
        probe = window_of(valgrind.read_dumps(dumps, target.name), PROBE_REQUESTS)
        self.requests = sized(probe.instructions_per_req)
        self.limit_s = max(MIN_LIMIT_S, 20 * pace * self.requests)
        self.probed = True

    def _notes(self, target: Wrappable, pinning: Pinning, tool: valgrind.Callgrind) -> list[str]:
        notes = [f"counted by {tool.describe(valgrind.version())}", pinning.note]
        processes, found = threads(target)
        if found > processes:
            notes.append(
                "more threads than processes: Valgrind runs one thread at a time, so the "
                "threads are serialised; instructions per request stay the program's, but "
                "lock hand-offs and background work (a collector, a compiler) land "
                "differently than natively"
            )
        argv = getattr(target, "argv", None)
        why = launcher(argv) if isinstance(argv, list) else None
        return [n for n in (*notes, why) if n]

    def native_window(self, target: Wrappable, plan: RunPlan, pinning: Pinning) -> _Native:
        """The target relaunched without Valgrind (pinned alike), warmed up, and N
        requests sent with its system calls counted and its switches stamped."""
        target.relaunch(Wrap(pinning))
        warm(target, self.workload.entries(), WARMUP_REQUESTS, self.tls_ca)
        pids = [pid for root in target.parts().values() for pid in _tree(root)]
        clock = MachineClock()
        with RunMonitor.for_target(target) as monitor, SyscallCounter(pids) as counter:
            requests = max(self.requests, NATIVE_MIN)
            spec = replace(self._spec(target, plan, requests), cpu_probes=monitor.cpu_probes())
            outcome = run_swarm(spec, events_to(monitor, clock))
        result = run_result(outcome, 0, plan, monitor, requests_asked=requests)
        found = counter.result
        return _Native(result, found.calls, found.tool, found.why)


def _tree(root: int) -> list[int]:
    try:
        process = psutil.Process(root)
        return [root, *(child.pid for child in process.children(recursive=True))]
    except psutil.Error:
        return []


def _sides(target: Target) -> list[Target]:
    if isinstance(target, PairedTarget):
        return [target.change] + ([target.base] if target.base is not None else [])
    return [target]
