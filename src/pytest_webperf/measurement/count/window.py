"""One side's counted repetition (``Repetition.run``), on fresh instances of its target:

1. **Counted window.** The target is started under callgrind (pinned to its own core when
   both sides run at once), uninstrumented; once healthy it gets its runtime's warm-up
   (``Pinning.warmup``: Valgrind without callgrind's counting runs them several times
   faster); then
   instrumentation goes on in every process and the probe counts its two halves (zeroed,
   ``PROBE_REQUESTS``, dumped, ``PROBE_REQUESTS``, dumped: every repetition takes the same
   steps, so every window follows the same history) on the warm-up's connections; the
   counters are zeroed, exactly N requests are sent on connections of their own
   (``sender.py``, at the plan's concurrency), and every process is dumped:
   instructions, allocations and the per-function profile of exactly those requests
   (``profiling/instructions.py``).
2. **Native window**, only when a check reads it (``syscalls_per_req``,
   ``ctx_switches_per_req``): the target is started again without Valgrind (whose
   serialised threads change what a runtime does), warmed up, and N requests (1000 at
   least) are sent with its system calls counted (``sampling/syscalls.py``) and its
   threads' context switches stamped at the window's bounds.

Every phase's wall time is kept (``Counts.phases``): where a counted test's time goes.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import psutil

from pytest_webperf.errors import TargetError
from pytest_webperf.measurement.count.sender import Sender
from pytest_webperf.measurement.count.sizing import PROBE_REQUESTS
from pytest_webperf.measurement.plan import RunPlan
from pytest_webperf.measurement.repetition import run_result
from pytest_webperf.models.counts import Counts, EndpointCounts
from pytest_webperf.models.measurement import RunResult
from pytest_webperf.models.workload import Workload
from pytest_webperf.profiling import valgrind
from pytest_webperf.profiling.instructions import Window, window_of
from pytest_webperf.sampling.monitor import RunMonitor
from pytest_webperf.sampling.syscalls import SyscallCounter
from pytest_webperf.swarm.recorder import Interval
from pytest_webperf.swarm.runner import SwarmOutcome
from pytest_webperf.swarm.stamp import stamp, thread_files
from pytest_webperf.targets.runtime import WARMUP_REQUESTS, Pinning
from pytest_webperf.targets.wrap import DIR, Wrap, Wrappable

SLOWDOWN = 10.0  # a target under callgrind gets this many times its health check's patience
# a warm-up of more than the default's requests stops after this long (uninstrumented, under
# Valgrind): a heavy request has run its functions often enough by then (Node's 1,000 took
# 0.9-1.5 s on /hello, 18-23 s on a handler of 21 million instructions)
WARMUP_S = 5.0
# the native window's requests at least: a runtime's timer wake-ups (CPython's server polls
# every 0.5 s) are a system call or two per window, so per request they shrink with N
NATIVE_MIN = 1000
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Settings:
    """What every repetition of one counted measurement sends, and how."""

    workload: Workload  # requests=0 here: each phase says its own count
    concurrency: int = 1
    callers: int = 0  # --separate-callers depth (0: no stacks)
    tls_ca: str | None = None
    tls_resume: bool = False
    native: bool = True  # a native window (a check reads system calls or switches)
    timeout_s: float = 60.0
    paced: bool = True  # each request once the target is at rest (``Repetition._sender``)
    native_paced: bool = True  # the same in the native window


@dataclass
class Probe:
    """The probe's two halves (instructions and allocations per request each) and its pace."""

    instructions: tuple[float, float]
    allocations: tuple[float, float]
    pace_s: float  # seconds per request under callgrind


# Given this side's probe (None: N was given, no probe), N and the window's time limit
# (both sides of a pair wait here for each other's probe, so that they send the same N)
Sizing = Callable[[Probe | None], tuple[int, float]]


@dataclass
class Repetition:
    """One side's repetition: ``run`` starts its instances, counts, and returns its
    result with its ``Counts``; its window is kept in ``window`` for the profile."""

    target: Wrappable
    settings: Settings
    plan: RunPlan
    index: int
    cpus: tuple[int, ...] = ()  # the core this side's instances are pinned to
    phases: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    window: Window | None = None
    packages: dict[str, str] = field(default_factory=dict)  # object without symbols -> package
    restless: bool = False  # a sender found the target never at rest
    native_restless: bool = False  # ... in the native window
    _last: float = 0.0

    def _phase(self, name: str) -> None:
        now = time.monotonic()
        self.phases[name] = self.phases.get(name, 0.0) + now - self._last
        self._last = now

    def run(self, sizing: Sizing, pinning: Pinning, tool: valgrind.Callgrind) -> RunResult:
        started = self._last = time.monotonic()
        # V8 under callgrind keeps its main thread running between requests (found running
        # in 20 looks of 20 over a second): never at rest, so never paced there (natively
        # it rests: its native window is paced)
        self.restless = not self.settings.paced or pinning.runtime == "node"
        directory = valgrind.window_directory()
        try:
            counted, interval, seconds, cpu_s = self._counted(directory, sizing, pinning, tool)
            native = self._native(pinning, counted) if self.settings.native else None
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        result = self._result(interval, seconds, cpu_s)
        assert self.window is not None
        counts = self._counts(result, self.window, native, pinning, tool, counted, started)
        return replace(
            result,
            counts=counts,
            ctx_switches=native.result.ctx_switches if native is not None else None,
        )

    def _counted(
        self, directory: Path, sizing: Sizing, pinning: Pinning, tool: valgrind.Callgrind
    ) -> tuple[int, Interval, float, float | None]:
        """The counted window: (N, what its requests did, its seconds, the target's CPU)."""
        target, settings = self.target, self.settings
        wrap = Wrap(
            pinning.named(),
            prefix=tuple(tool.argv(DIR)),
            directory=str(directory),
            valgrind=True,
            slowdown=SLOWDOWN,
            what="under callgrind",
            cpus=self.cpus,
        )
        target.relaunch(wrap)
        self._phase("start under callgrind")
        seen = target.seen(str(directory))
        monitor = valgrind.Monitor(directory, seen, target.beside, target.name)
        sender = self._sender()
        try:
            self._warm_up(sender, pinning)
            self._phase("warm-up")
            pids = monitor.pids()
            monitor.every(pids, "instrumentation on")
            probe = None if settings.workload.requests else self._probe(monitor, pids, sender)
            self._phase("probe")
            requests, limit_s = sizing(probe)
            self._phase("waiting for the other side's probe")
            # the window on connections of its own, opened after the zero: on the warm-up's
            # a stdlib CPython server's windows read +1.4 % or +2.8 % in 6 of 8 (whole
            # events of 38,000 instructions a request), on new ones 5 of 5 agreed within
            # 0.02 %; the accept is counted in the window, alike on both sides
            self._done_with(sender)
            monitor.every(pids, "zero")
            sender = self._sender()
            with RunMonitor.for_target(target) as cpu:
                cpu.mark_start(stamp(cpu.cpu_probes()))
                interval, seconds = sender.send(requests, limit_s)
                cpu.mark_end(stamp(cpu.cpu_probes()))
            cpu_s = cpu.server_cpu_seconds()
            self._phase("window")
            now = monitor.pids()
            if set(now) != set(pids):
                raise TargetError(
                    f"{target.name}: the processes under callgrind changed during the counted "
                    f"window ({sorted(pids)} -> {sorted(now)}): a server that starts processes "
                    "per request or connection cannot be counted exactly yet",
                    valgrind.valgrind_logs(directory),
                )
            dumps = monitor.dump(pids)
            maps = monitor.maps(pids)  # before the processes can go: their JIT code named
            self._phase("dump")
        finally:
            self._done_with(sender)
        self.window = window_of(
            valgrind.read_dumps(dumps, target.name),
            interval.requests,
            callers=tool.callers,
            maps=maps,
        )
        self.packages = monitor.packages(list(self.window.unnamed.values()))
        self._phase("reading the dumps")
        return requests, interval, seconds, cpu_s

    def _sender(self, *, native: bool = False) -> Sender:
        """What sends this repetition's requests: at concurrency 1, each request only once
        the target is at rest (``at_rest``): an event loop that found the next request
        already there before it slept takes another path than one woken by it, and the
        share of each moved with the machine's load (the catalogue's asyncio server: its
        windows 0.8 % apart back to back, 0.4 % paced; its system calls 7.46 to 7.68 a
        request back to back, 8.00 in every window paced)."""
        settings = self.settings
        pids = [pid for root in self.target.parts().values() for pid in _tree(root)]
        restless = not settings.native_paced if native else self.restless
        return Sender(
            self.target,
            settings.workload,
            concurrency=settings.concurrency,
            timeout_s=settings.timeout_s,
            tls_ca=settings.tls_ca,
            tls_resume=settings.tls_resume,
            idle=None if restless else lambda: at_rest(pids),
        )

    def _done_with(self, sender: Sender, *, native: bool = False) -> None:
        if native:
            self.native_restless = self.native_restless or sender.restless
        else:  # what the counted window's note says
            self.restless = self.restless or sender.restless
        sender.close()

    def _probe(self, monitor: valgrind.Monitor, pids: list[int], sender: Sender) -> Probe:
        """Two halves of ``PROBE_REQUESTS``, each zeroed and dumped."""
        halves: list[Window] = []
        began = time.monotonic()
        monitor.every(pids, "zero")
        for _ in range(2):
            self._check(sender.send(PROBE_REQUESTS)[0], "probe", PROBE_REQUESTS)
            dumps = monitor.dump(pids)
            halves.append(window_of(valgrind.read_dumps(dumps, self.target.name), PROBE_REQUESTS))
        pace = (time.monotonic() - began) / (2 * PROBE_REQUESTS)
        first, second = halves
        return Probe(
            (first.instructions_per_req, second.instructions_per_req),
            (first.allocs_per_req, second.allocs_per_req),
            pace,
        )

    def _warm_up(self, sender: Sender, pinning: Pinning) -> None:
        """The runtime's warm-up requests (``Pinning.warmup``), within ``WARMUP_S`` when
        they are more than the default's: all of a short one must complete."""
        least = WARMUP_REQUESTS
        limit = WARMUP_S if pinning.warmup > least else None
        done = sender.send(pinning.warmup, limit)[0]
        self._check(done, "warm-up", pinning.warmup if limit is None else least)

    def _check(self, interval: Interval, phase: str, asked: int) -> None:
        """A phase before the window whose requests failed or did not all complete: the
        target is not counted."""
        if interval.requests < asked:
            raise TargetError(
                f"{self.target.name}: {interval.requests:,} of the {asked:,} requests of the "
                f"{phase} before the counted window completed",
                self.target.logs(),
            )
        if interval.errors:
            kinds = ", ".join(f"{k} {n}" for k, n in sorted(interval.error_kinds.items()))
            example = next(iter(interval.error_examples.values()), "")
            raise TargetError(
                f"{self.target.name}: {interval.errors:,} of {interval.requests:,} requests of "
                f"the {phase} before the counted window failed ({kinds}){': ' if example else ''}"
                f"{example}",
                self.target.logs(),
            )

    def _native(self, pinning: Pinning, requests: int) -> _Native:
        """The target relaunched without Valgrind (pinned alike), warmed up, and N
        requests (``NATIVE_MIN`` at least) sent with its system calls counted and its
        threads' switches stamped."""
        target = self.target
        target.relaunch(Wrap(pinning, cpus=self.cpus))
        sender = self._sender(native=True)
        try:
            sender.send(pinning.warmup, paced=False)  # not counted: no need to wait
            pids = [pid for root in target.parts().values() for pid in _tree(root)]
            count = max(requests, NATIVE_MIN)
            with RunMonitor.for_target(target) as monitor, SyscallCounter(pids) as counter:
                monitor.mark_start(stamp(monitor.cpu_probes()))
                interval, seconds = sender.send(count)
                monitor.mark_end(stamp(monitor.cpu_probes()))
        finally:
            self._done_with(sender, native=True)
        result = replace(
            run_result(SwarmOutcome(seconds, interval), self.index, self.plan, monitor),
            requests_asked=count,
        )
        found = counter.result
        self._phase("native window")
        return _Native(result, found.calls, found.tool, found.why)

    def _result(self, interval: Interval, seconds: float, cpu_s: float | None) -> RunResult:
        workload = self.settings.workload
        outcome = SwarmOutcome(seconds, interval, users=self.settings.concurrency)
        result = run_result(outcome, self.index, self.plan, None, weights=workload.weights())
        return replace(result, server_cpu_seconds=cpu_s)

    def _counts(  # noqa: PLR0917 - the repetition's pieces, gathered once
        self,
        result: RunResult,
        window: Window,
        native: _Native | None,
        pinning: Pinning,
        tool: valgrind.Callgrind,
        asked: int,
        started: float,
    ) -> Counts:
        extra = list(self.notes)
        if native is not None:
            nat = native.result
            if nat.errors:
                extra.append(f"the native window had {nat.errors:,} failed of {nat.requests:,}")
            if native.syscalls is None:
                extra.append(f"system calls not counted: {native.why}")
        else:
            extra.append(
                "no native window: no check reads system calls or context switches "
                "(syscalls_per_req, ctx_switches_per_req)"
            )
        if result.requests < asked:
            extra.append(f"the counted window completed {result.requests:,} of {asked:,}")
        if self.native_restless and native is not None:
            extra.append(
                "the native window not paced: the target never came to rest between its "
                "requests, so its system calls per request may move with timing"
            )
        if self.restless:
            extra.append(
                "not paced: requests went back to back (a thread of the target never sleeps "
                "between requests: V8 under callgrind, or one that polls), so an event loop's "
                "path per request may move with timing"
            )
        nat_result = native.result if native is not None else None
        return Counts(
            requests=result.requests,
            instructions=window.instructions,
            allocations=window.allocations,
            libc_allocations=window.libc_allocations,
            processes=window.processes,
            window_s=result.duration_s,
            native_requests=nat_result.requests if nat_result else 0,
            native_window_s=nat_result.duration_s if nat_result else 0.0,
            tool=tool.describe(valgrind.version()),
            runtime=pinning.runtime,
            pinning=pinning.note,
            runtime_allocations=window.runtime_allocations,
            cpu_s=result.server_cpu_seconds,
            native_cpu_s=nat_result.server_cpu_seconds if nat_result else None,
            native_errors=nat_result.errors if nat_result else 0,
            syscalls=native.syscalls if native is not None else None,
            syscall_tool=native.tool if native is not None else None,
            ctx_switches=nat_result.ctx_switches if nat_result else None,
            run_s=time.monotonic() - started,
            notes=tuple(dict.fromkeys(extra)),
            phases=dict(self.phases),
            cpus=self.cpus,
            endpoints={
                name: EndpointCounts(part.requests)
                for name, part in result.endpoints.items()
                if self.settings.workload.mix
            },
        )


@dataclass
class _Native:
    """What the native window measured."""

    result: RunResult
    syscalls: int | None
    tool: str | None
    why: str


def at_rest(pids: list[int]) -> tuple[bool, float]:
    """Whether every thread of ``pids`` is asleep (``S`` in ``/proc/PID/task/TID/stat``:
    under Valgrind, blocked in a system call or waiting for the thread that runs), and
    the CPU seconds they have used. A process that is gone is at rest."""
    rest, ticks = True, 0
    for _, stat in thread_files(pids, "stat"):
        fields = stat.rsplit(b")", 1)[-1].split()
        if len(fields) < 13:
            continue
        rest = rest and fields[0] == b"S"
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return rest, ticks / CLOCK_TICKS


def _tree(root: int) -> list[int]:
    try:
        process = psutil.Process(root)
        return [root, *(child.pid for child in process.children(recursive=True))]
    except psutil.Error:
        return []
