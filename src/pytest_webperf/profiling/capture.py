"""CPU profiles of a target's process trees while a repetition is measured: ``perf``
for native code and JIT runtimes, ``py-spy`` for Python, at the rates the measurement
planned (``profiling/rates.py``).

Per part of the target (its root pid on this host, a container's too), the process tree
as it is when the measured phase starts:

* **Python** (a process of the tree is a Python interpreter) with ``py-spy`` found (on
  the PATH or beside this interpreter: a dependency of the plugin):
  ``py-spy record --format raw -r RATE --pid ROOT --subprocesses --nonblocking --gil``.
  Only the thread holding the GIL is sampled (a thread waiting for it is not using the
  CPU, and would blur the profile of a threaded server), so a sample is 1/RATE s of
  Python running; code that releases the GIL (I/O, some C extensions) is not counted.
  The process frame (``process PID:"cmdline"``) and line numbers are dropped, so A and
  B name functions alike (``beta (server.py)``). ``--subprocesses`` follows processes
  forked later.
* **Anything else**: ``perf record -N -k mono -e cpu-clock -c 1e9/RATE -g -p PIDS``
  (the software clock at a fixed period, so a sample is 1/RATE s of CPU; no hardware
  counters needed; ``-N``: no build-id cache, which grows without bound on a CI
  runner), then ``perf script``. perf starts when the repetition's monitor does,
  before the warm-up (``prepare``): it takes 1-2 s on a VM before it samples anything
  (it reads ``/proc/kallsyms`` several times first), and started with the measured
  phase it missed most of a 3 s window; only the samples inside the window
  (``start``..``stop``, on CLOCK_MONOTONIC: ``-k mono``) are folded. ``-p`` takes the
  pids when it starts: a process forked later is **not** sampled (perf does not follow
  it); the capture says how many the tree gained meanwhile. Symbols of a
  container's binaries resolve without ``--symfs``: perf reads them through the
  process's mount namespace (``/proc/PID/root``) while it lives, so the stacks are
  folded right after sampling stops, before the container can go. Call chains come from
  frame pointers (``-g``): binaries built without them (most distribution packages)
  give the leaf function right and the callers partly wrong, so the diff ranks by
  *self* time; frames perf cannot name at all (``[unknown]`` in no file) are dropped.
* **JIT runtimes under perf** (``profiling/perfmap.py``): when sampling stops, a HotSpot
  JVM is asked for its perf map (``profiling/attach.py``), and every sampled process's
  map is copied through its mount namespace; ``perf script``'s frames in a map are named
  from the copy and made alike for A and B (``quicksort (app.js)``,
  ``webperf.WorkloadServlet.quicksort (java)``). What a runtime cannot name is said in
  the capture's notes (``profiling/runtimes.py``): node without a map, a JVM that wrote
  none, PHP, libraries without symbols and the package that would name them.

Where neither tool works (no ``perf`` binary: Debian's ``linux-perf``; not allowed to
sample: not root, ``perf_event_paranoid``; py-spy refused), the capture is a sentence
saying why: the run goes on without a profile.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import psutil

from pytest_webperf.profiling import attach, perfmap, runtimes
from pytest_webperf.profiling.folding import (
    Window,
    fold_py_spy,
    fold_window,
    unnamed_libraries,
)
from pytest_webperf.profiling.stacks import merge

PROBE_RATE = 99  # the rate of the one-off probe that perf can sample here
DEFAULT_RATES: Mapping[str, int] = {"perf": 99, "py-spy": 99}  # off the beat of 100 Hz
STOP_TIMEOUT_S = 30.0  # a profiler that does not finish writing in this time is killed
LIBRARY_SHARE = 0.01  # a library without symbols is named in the notes from this share
LATE_S = 0.5  # perf's first sample this late into the window: it had not started yet


@dataclass(frozen=True)
class Capture:
    """One repetition's profile of the whole target: stacks, the CPU time one sample
    stands for, which tools sampled it at which rates, and what the reader should know."""

    stacks: Mapping[str, int]
    period_s: float
    tools: tuple[str, ...]
    notes: tuple[str, ...] = ()
    rates: Mapping[str, int] = field(default_factory=dict)  # tool -> Hz, the tools used

    @property
    def samples(self) -> int:
        return sum(self.stacks.values())


# --- which tool ---------------------------------------------------------------------------


def py_spy_path() -> str | None:
    found = shutil.which("py-spy")
    if found:
        return found
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else None


@cache
def perf_problem() -> str | None:
    """Why ``perf record -e cpu-clock`` cannot sample here, or None if it can (tried once)."""
    perf = shutil.which("perf")
    if perf is None:
        return "no perf binary (Debian: apt-get install linux-perf)"
    with tempfile.TemporaryDirectory(prefix="webperf-perf-") as tmp:
        argv = [perf, "record", "-q", "-N", "-e", "cpu-clock", "-F", str(PROBE_RATE), "-g"]
        argv += ["-o", os.path.join(tmp, "probe.data"), "--", "true"]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"perf cannot run: {exc}"
    if done.returncode != 0:
        lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
        why = lines[0] if lines else f"exit status {done.returncode}"
        return f"perf cannot sample here ({why[:160]})"
    return None


def is_python(pid: int) -> bool:
    return runtimes.runtime_of(pid) == "python"


def tree(root: int) -> list[int]:
    """The pids of the process tree rooted at ``root``, root first (empty if it is gone)."""
    try:
        process = psutil.Process(root)
        return [root, *(child.pid for child in process.children(recursive=True))]
    except psutil.Error:
        return []


def problem() -> str | None:
    """Why no target here could be profiled (neither tool works), or None. Tries perf
    once either way, so a repetition never waits for the try."""
    why = perf_problem()
    if why is None or (py_spy_path() is not None and os.geteuid() == 0):
        return None
    if py_spy_path() is None:
        return f"{why}; no py-spy for Python targets (pip install py-spy)"
    return f"{why}; py-spy needs root to attach here"


def header_note(mode: str, against: str | None) -> str | None:
    """What the run's header says about profiles: ``auto`` with no profiler that works
    here, in an A/B run (one against stored baselines profiles only what it compares
    with a profiled baseline or saves: ``measurer``)."""
    if mode != "auto" or not against:
        return None
    why = problem()
    if why is None:
        return None
    return f"webperf: no CPU profiles in this A/B run: {why}"


# --- one repetition -----------------------------------------------------------------------


@dataclass
class _Run:
    part: str
    tool: str
    pids: list[int]
    output: Path
    process: subprocess.Popen[bytes] | None = None
    stderr: Path | None = None
    problem: str | None = None
    argv: list[str] = field(default_factory=list)
    kinds: dict[int, str] = field(default_factory=dict)  # pid -> runtime (runtimes.runtime_of)
    maps: dict[int, Path] = field(default_factory=dict)  # pid -> its perf map, copied at stop
    notes: list[str] = field(default_factory=list)

    @property
    def python(self) -> bool:  # a Python interpreter in the tree (py-spy, or perf: no py-spy)
        return "python" in self.kinds.values()


@dataclass
class Recording:
    """One repetition's profile of a target: ``prepare`` when its monitor starts (perf
    starts), ``start`` when the measured phase starts, ``stop`` when it ends (sampling
    stops, the perf maps are copied: cheap), ``collect`` afterwards (folding: perf
    script takes a second or two), ``close`` always.
    ``rates``: samples per second per tool (``perf``, ``py-spy``)."""

    parts: Mapping[str, int]
    rates: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_RATES))
    runs: list[_Run] = field(default_factory=list)
    directory: Path | None = None
    stopped: bool = False
    window: Window | None = None  # the measured phase (CLOCK_MONOTONIC)

    def rate(self, tool: str) -> int:
        return int(self.rates.get(tool) or DEFAULT_RATES[tool])

    def prepare(self) -> None:
        """perf starts now, before the measured phase (it takes a second or two to start
        sampling: ``folding``); py-spy starts with the window."""
        if self.directory is not None:
            return
        self.directory = Path(tempfile.mkdtemp(prefix="webperf-profile-"))
        for part, root in self.parts.items():
            pids = tree(root)
            run = _Run(part, "", pids, self.directory / f"{part}.out")
            self.runs.append(run)
            if not pids:
                run.problem = f"{part}: no process to sample"
                continue
            run.kinds = {pid: runtimes.runtime_of(pid) for pid in pids}
            spy = py_spy_path()
            if spy is not None and run.python:
                run.tool = "py-spy"
                rate = str(self.rate("py-spy"))
                run.argv = [spy, "record", "--format", "raw", "-r", rate, "--pid", str(root)]
                run.argv += ["--subprocesses", "--nonblocking", "--gil", "-o", str(run.output)]
                continue
            why = perf_problem()
            if why is not None:
                run.problem = why
                continue
            run.tool = "perf"
            period = str(round(1e9 / self.rate("perf")))  # ns of CPU per sample
            run.argv = [shutil.which("perf") or "perf", "record", "-q", "-N", "-k", "mono"]
            run.argv += ["-e", "cpu-clock", "-c", period, "-g", "-p", ",".join(map(str, pids))]
            run.argv += ["-o", str(run.output)]
            self._launch(run)

    def start(self) -> None:
        """The measured phase starts: its window opens, py-spy starts."""
        self.prepare()
        self.window = Window(time.monotonic())
        for run in self.runs:
            if run.tool == "py-spy" and run.problem is None:
                self._launch(run)

    def _launch(self, run: _Run) -> None:
        assert self.directory is not None
        run.stderr = self.directory / f"{run.part}.err"
        try:  # called from the swarm's events: a profiler that cannot start is a reason
            with run.stderr.open("wb") as err:
                run.process = subprocess.Popen(
                    run.argv,
                    stdin=subprocess.DEVNULL,
                    stdout=err,
                    stderr=err,
                    start_new_session=True,
                )
        except OSError as exc:
            run.problem = f"{run.part}: {run.tool} cannot start ({exc})"

    def stop(self) -> None:
        """Sampling stops (the window closes); the JIT runtimes' perf maps are copied
        while they live (a JVM is asked for its map first: it writes it on request)."""
        if self.window is not None and self.window.end is None:
            self.window = Window(self.window.start, time.monotonic())
        for run in self.runs:
            if run.process is not None and run.process.poll() is None:
                with contextlib.suppress(OSError):
                    run.process.send_signal(signal.SIGINT)
        if self.stopped or self.directory is None:
            return
        self.stopped = True
        for run in self.runs:
            if run.tool == "perf" and run.problem is None:
                self._copy_maps(run, self.directory)

    @staticmethod
    def _copy_maps(run: _Run, directory: Path) -> None:
        for pid, kind in run.kinds.items():
            if kind == "hotspot":
                try:
                    attach.write_perfmap(pid)
                except (attach.AttachError, OSError) as exc:
                    run.notes.append(runtimes.jvm_note(run.part, str(exc)))
        run.maps = perfmap.snapshot(run.kinds, directory)
        if any(k == "node" and pid not in run.maps for pid, k in run.kinds.items()):
            run.notes.append(runtimes.node_note(run.part))

    def collect(self) -> Capture | str:
        """The stacks of every part, or a sentence saying why there are none."""
        self.stop()
        captures: list[tuple[str, dict[str, int], float]] = []
        notes: list[str] = []
        problems: list[str] = []
        for run in self.runs:
            if run.problem is None:
                self._wait(run)
            if run.problem is not None:
                problems.append(run.problem)
                continue
            try:
                stacks, period = self._fold(run)
            except (OSError, ValueError, subprocess.SubprocessError) as exc:
                problems.append(f"{run.part}: {run.tool} output unreadable ({exc})")
                continue
            if not stacks:  # measured: perf -p lost every sample of a Go server at times
                problems.append(f"{run.part}: {run.tool} recorded no sample of it")
                continue
            notes += run.notes + self._notes(run, stacks)
            captures.append((run.part, stacks, period))
        if not captures:
            return "; ".join(dict.fromkeys(problems)) or "no process of the target on this host"
        notes += problems
        several = len(captures) > 1
        stacks = merge(
            *(
                {(f"{part};{stack}" if several else stack): n for stack, n in folded.items()}
                for part, folded, _ in captures
            )
        )
        periods = [period for _, _, period in captures]
        tools = tuple(dict.fromkeys(run.tool for run in self.runs if run.tool))
        rates = {tool: self.rate(tool) for tool in tools}
        return Capture(stacks, sum(periods) / len(periods), tools, tuple(notes), rates)

    def _notes(self, run: _Run, stacks: Mapping[str, int]) -> list[str]:
        notes = []
        if run.tool == "perf" and run.python:
            notes.append(
                f"{run.part}: a Python interpreter sampled by perf, which names the "
                "interpreter's C functions, not the Python ones: no py-spy found "
                "(pip install py-spy)"
            )
        if "php" in run.kinds.values() and not any(" (php)" in s for s in stacks):
            notes.append(f"{run.part}: {runtimes.PHP_NOTE}")
        if run.tool == "perf":
            later = [pid for pid in tree(self.parts[run.part]) if pid not in run.pids]
            if later:
                notes.append(
                    f"{run.part}: {len(later)} process(es) started during the measured "
                    "phase were not sampled (perf -p takes the pids at the start)"
                )
        return notes

    def _wait(self, run: _Run) -> None:
        if run.process is None:
            return
        try:
            run.process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            run.process.kill()
            run.process.wait()
            run.problem = f"{run.part}: {run.tool} did not stop in {STOP_TIMEOUT_S:g}s"
            return
        if not run.output.exists() or run.output.stat().st_size == 0:
            said = run.stderr.read_text(errors="replace") if run.stderr else ""
            lines = [x.strip() for x in said.splitlines() if x.strip() and "py-spy>" not in x]
            why = lines[-1][:160] if lines else f"exit status {run.process.returncode}"
            run.problem = f"{run.part}: {run.tool} recorded nothing ({why})"

    def _fold(self, run: _Run) -> tuple[dict[str, int], float]:
        if run.tool == "py-spy":
            text = run.output.read_text(errors="replace")
            return fold_py_spy(text), 1 / self.rate("py-spy")
        perf = shutil.which("perf") or "perf"
        argv = [perf, "script", "-i", str(run.output), "-F", "pid,time,period,ip,sym,dso"]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
        if done.returncode != 0:
            raise ValueError(done.stderr.strip().splitlines()[-1:] or done.returncode)
        tables = {
            pid: perfmap.PerfMap.parse(path.read_text(errors="replace"))
            for pid, path in run.maps.items()
        }
        text, _, _ = perfmap.resolve_script(done.stdout, tables)
        folded = fold_window(text, self.window)
        window = self.window
        if window is not None and folded.first_s is not None:
            late = folded.first_s - window.start
            if late > LATE_S and window.end is not None and late < window.end - window.start:
                run.notes.append(
                    f"{run.part}: perf's first sample came {late:.1f}s into the measured "
                    "phase (it had not started yet: a longer --webperf-warmup gives it time)"
                )
        run.notes += self._library_notes(run, text, sum(folded.stacks.values()))
        return folded.stacks, folded.period_s or 1 / self.rate("perf")

    @staticmethod
    def _library_notes(run: _Run, text: str, samples: int) -> list[str]:
        notes = []
        for library, count in sorted(unnamed_libraries(text).items()):
            if samples and count >= LIBRARY_SHARE * samples:
                package = next(
                    (p for pid in run.pids if (p := runtimes.package_of(pid, library))), None
                )
                notes.append(
                    f"{run.part}: " + runtimes.library_note(os.path.basename(library), package)
                )
        return notes

    def close(self) -> None:
        for run in self.runs:
            if run.process is not None and run.process.poll() is None:
                run.process.kill()
                run.process.wait()
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None
