"""CPU profiles of a target's process trees while a repetition is measured (the I/O
side of ``profile``): ``perf`` for native code, ``py-spy`` for Python.

Per part of the target (its root pid on this host, a container's too), the process tree
as it is when the measured phase starts:

* **Python** (a process of the tree is a Python interpreter) with ``py-spy`` found (on
  the PATH or beside this interpreter: a dependency of the plugin):
  ``py-spy record --format raw -r 99 --pid ROOT --subprocesses --nonblocking --gil``.
  Only the thread holding the GIL is sampled (a thread waiting for it is not using the
  CPU, and would blur the profile of a threaded server), so a sample is 1/99 s of
  Python running; code that releases the GIL (I/O, some C extensions) is not counted.
  The process frame (``process PID:"cmdline"``) and line numbers are dropped, so A and
  B name functions alike (``beta (server.py)``). ``--subprocesses`` follows processes
  forked later.
* **Anything else**: ``perf record -e cpu-clock -F 99 -g -p PIDS`` (the software clock,
  so a sample is 1/99 s of CPU; hardware counters are not needed), then ``perf script``.
  ``-p`` takes the pids when it starts: a process forked later is **not** sampled (perf
  does not follow it); the capture says how many the tree gained meanwhile. Symbols of a
  container's binaries resolve without ``--symfs``: perf reads them through the
  process's mount namespace (``/proc/PID/root``) while it lives, so the stacks are
  folded right after sampling stops, before the container can go. Call chains come from
  frame pointers (``-g``): binaries built without them (most distribution packages)
  give the leaf function right and the callers partly wrong, so the diff ranks by
  *self* time; frames perf cannot name at all (``[unknown]`` in no file) are dropped.

Where neither works (no ``perf`` binary: Debian's ``linux-perf``; not allowed to
sample: not root, ``perf_event_paranoid``; py-spy refused), the capture is a sentence
saying why: the run goes on without a profile.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import psutil

from pytest_webperf.profiling.stacks import fold, merge, parse_folded

RATE = 99  # samples per second: off the beat of 100 Hz timers, cheap
STOP_TIMEOUT_S = 30.0  # a profiler that does not finish writing in this time is killed


@dataclass(frozen=True)
class Capture:
    """One repetition's profile of the whole target: stacks, the CPU time one sample
    stands for, which tools sampled it, and anything the reader should know."""

    stacks: Mapping[str, int]
    period_s: float
    tools: tuple[str, ...]
    notes: tuple[str, ...] = ()


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
        argv = [perf, "record", "-q", "-e", "cpu-clock", "-F", str(RATE), "-g"]
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
    try:
        process = psutil.Process(pid)
        names = [process.name(), os.path.basename(process.exe() or "")]
    except (psutil.Error, OSError):
        return False
    return any(re.fullmatch(r"python[\d.]*|pypy[\d.]*|uwsgi|gunicorn", n) for n in names if n)


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
    """What the run's header says about profiles: ``auto`` in an A/B run with no
    profiler that works here; ``on`` in a run that is not A/B."""
    if mode == "on" and not against:
        return (
            "webperf: --webperf-profile=on profiles A/B runs only (--webperf-against); "
            "stored baselines carry no profile yet"
        )
    if mode != "auto" or not against:
        return None
    why = problem()
    return None if why is None else f"webperf: no CPU profiles in this A/B run: {why}"


# --- perf script, folded ------------------------------------------------------------------

_FRAME = re.compile(r"^\s*[0-9a-f]+\s+(?P<sym>.*?)\s+\((?P<dso>[^()]*)\)\s*$")


def perf_frame(sym: str, dso: str) -> str | None:
    """``sha256_block_data_order (libcrypto.so.3)``; kernel frames ``(kernel)``; a frame
    with neither a symbol nor a file is None (unwinding garbage without frame pointers)."""
    sym = re.sub(r"\+0x[0-9a-f]+$", "", sym.strip())
    where = "kernel" if dso.startswith("[kernel") else os.path.basename(dso)
    if sym in ("", "[unknown]") and where in ("", "[unknown]", "unknown"):
        return None
    return f"{sym or '[unknown]'} ({where or '?'})"


def fold_perf_script(text: str) -> tuple[dict[str, int], float | None]:
    """``perf script -F pid,period,ip,sym,dso`` output as folded stacks (root first),
    and the mean sample period in seconds (None if no sample)."""
    stacks: list[list[str]] = []
    periods: list[int] = []
    frames: list[str] | None = None
    for line in [*text.splitlines(), ""]:
        if line.startswith("\t") and frames is not None:
            match = _FRAME.match(line)
            frame = perf_frame(match["sym"], match["dso"]) if match else None
            if frame is not None:
                frames.append(frame)
            continue
        if frames is not None:  # a sample ends at a blank line or at the next header
            stacks.append(frames[::-1] or ["[unknown] (?)"])
            frames = None
        fields = line.split()
        if fields:  # a sample's header: pid period
            if fields[-1].isdigit():
                periods.append(int(fields[-1]))
            frames = []
    period = sum(periods) / len(periods) / 1e9 if periods else None
    return fold(stacks), period


_PROCESS_FRAME = re.compile(r'^process \d+:".*?"$|^process \d+$')
_LINE = re.compile(r" \(([^()]*?):\d+\)$")


def fold_py_spy(text: str) -> dict[str, int]:
    """py-spy's raw output without its process frames (a pid differs from A to B) and
    without line numbers (a function is one function whichever line was running, and
    whatever lines the change added above it)."""
    folded: dict[str, int] = {}
    for stack, count in parse_folded(text).items():
        frames = [_LINE.sub(r" (\1)", f) for f in stack.split(";") if not _PROCESS_FRAME.match(f)]
        if frames:
            key = ";".join(frames)
            folded[key] = folded.get(key, 0) + count
    return folded


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
    python: bool = False  # a Python interpreter in the tree (sampled by perf: no py-spy)


@dataclass
class Recording:
    """One repetition's profile of a target: ``start`` when the measured phase starts,
    ``stop`` when it ends (sampling stops: cheap), ``collect`` afterwards (folding: perf
    script takes a second or two), ``close`` always."""

    parts: Mapping[str, int]
    runs: list[_Run] = field(default_factory=list)
    directory: Path | None = None

    def start(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="webperf-profile-"))
        for part, root in self.parts.items():
            pids = tree(root)
            run = _Run(part, "", pids, self.directory / f"{part}.out")
            self.runs.append(run)
            if not pids:
                run.problem = f"{part}: no process to sample"
                continue
            spy = py_spy_path()
            run.python = any(is_python(pid) for pid in pids)
            if spy is not None and run.python:
                run.tool = "py-spy"
                argv = [spy, "record", "--format", "raw", "-r", str(RATE), "--pid", str(root)]
                argv += ["--subprocesses", "--nonblocking", "--gil", "-o", str(run.output)]
            else:
                why = perf_problem()
                if why is not None:
                    run.problem = why
                    continue
                run.tool = "perf"
                perf = shutil.which("perf") or "perf"
                argv = [perf, "record", "-q", "-e", "cpu-clock", "-F", str(RATE), "-g"]
                argv += ["-p", ",".join(map(str, pids)), "-o", str(run.output)]
            run.stderr = self.directory / f"{part}.err"
            try:  # called from the swarm's events: a profiler that cannot start is a reason
                with run.stderr.open("wb") as err:
                    run.process = subprocess.Popen(
                        argv,
                        stdin=subprocess.DEVNULL,
                        stdout=err,
                        stderr=err,
                        start_new_session=True,
                    )
            except OSError as exc:
                run.problem = f"{part}: {run.tool} cannot start ({exc})"

    def stop(self) -> None:
        for run in self.runs:
            if run.process is not None and run.process.poll() is None:
                with contextlib.suppress(OSError):
                    run.process.send_signal(signal.SIGINT)

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
            if run.tool == "perf" and run.python:
                notes.append(
                    f"{run.part}: a Python interpreter sampled by perf, which names the "
                    "interpreter's C functions, not the Python ones: no py-spy found "
                    "(pip install py-spy)"
                )
            if run.tool == "perf":
                later = [pid for pid in tree(self.parts[run.part]) if pid not in run.pids]
                if later:
                    notes.append(
                        f"{run.part}: {len(later)} process(es) started during the measured "
                        "phase were not sampled (perf -p takes the pids at the start)"
                    )
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
        return Capture(stacks, sum(periods) / len(periods), tools, tuple(notes))

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

    @staticmethod
    def _fold(run: _Run) -> tuple[dict[str, int], float]:
        if run.tool == "py-spy":
            return fold_py_spy(run.output.read_text(errors="replace")), 1 / RATE
        perf = shutil.which("perf") or "perf"
        argv = [perf, "script", "-i", str(run.output), "-F", "pid,period,ip,sym,dso"]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise ValueError(done.stderr.strip().splitlines()[-1:] or done.returncode)
        stacks, period = fold_perf_script(done.stdout)
        return stacks, period or 1 / RATE

    def close(self) -> None:
        for run in self.runs:
            if run.process is not None and run.process.poll() is None:
                run.process.kill()
                run.process.wait()
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None
