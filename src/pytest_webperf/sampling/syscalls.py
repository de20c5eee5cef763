"""The system calls a target's processes make while a counted measurement's native window
runs (the target without Valgrind, whose serialised threads change what a runtime does).

Two counters, the first that works here:

* ``perf stat -e raw_syscalls:sys_enter -p PIDS``: the kernel's tracepoint at every
  system call's entry, counted in the kernel for every thread of those processes (threads
  and children created later inherit the counter). Exact (3.004-3.007 per request for a
  server that makes 3), with no slowdown we could see in the window. Needs perf (Debian's
  ``linux-perf``) and its tracepoints (root, or ``perf_event_paranoid`` <= -1 and tracefs).
* ``strace -f -c -p PID ...``: ptrace on every thread (``-f``: those created later too),
  its summary's total. The same count for a single-threaded server, but every system call
  stops the thread twice: the window ran 1.2-7 times slower, and a runtime with threads of
  its own behaves differently under it (the JVM: 20 per request under strace, 26.6 by
  perf).

Neither works: the figure is not measured, and the report says why.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import TracebackType

PERF = "perf stat (raw_syscalls:sys_enter)"
STRACE = "strace -f -c"
ATTACH_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 30.0
_SUMMARY_LINE = re.compile(r"^\s*\d+\.\d+\s")


@dataclass(frozen=True)
class SyscallCount:
    """A window's system calls, by which counter; ``calls`` None: not counted (``why``)."""

    calls: int | None
    tool: str | None
    why: str = ""


@cache
def perf_problem() -> str | None:
    """Why ``perf stat -e raw_syscalls:sys_enter`` cannot count here, or None (tried once)."""
    perf = shutil.which("perf")
    if perf is None:
        return "no perf binary (Debian: apt-get install linux-perf)"
    argv = [perf, "stat", "-x,", "-e", "raw_syscalls:sys_enter", "--", "true"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"perf cannot run: {exc}"
    if done.returncode != 0 or perf_count(done.stderr) is None:
        lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
        return f"perf cannot count system calls here ({(lines or ['no count'])[0][:160]})"
    return None


def strace_problem() -> str | None:
    return None if shutil.which("strace") else "no strace binary (Debian: apt-get install strace)"


def counter_problem() -> str | None:
    """Why no counter works here, or None."""
    perf, strace = perf_problem(), strace_problem()
    return None if perf is None or strace is None else f"{perf}; {strace}"


def perf_count(text: str) -> int | None:
    """The count in ``perf stat -x,`` output (``<not counted>`` is 0); None if absent."""
    for line in text.splitlines():
        fields = line.split(",")
        if len(fields) > 2 and fields[2].startswith("raw_syscalls:sys_enter"):
            if fields[0].strip().isdigit():
                return int(fields[0])
            return 0 if "not counted" in fields[0] else None
    return None


def strace_total(text: str) -> int | None:
    """The total calls of a ``strace -c`` summary; None when there is no total line."""
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 5 and fields[-1] == "total" and _SUMMARY_LINE.match(line):
            return int(fields[3]) if fields[3].isdigit() else None  # % s usecs/call calls
    return None


def _perf_fds(pid: int) -> int:
    """How many perf event descriptors process ``pid`` has open."""
    count = 0
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                if "perf_event" in os.readlink(f"/proc/{pid}/fd/{fd}"):
                    count += 1
    return count


def _tracer(pid: int, tid: str) -> int:
    with contextlib.suppress(OSError, AttributeError):
        text = Path(f"/proc/{pid}/task/{tid}/status").read_text()
        return int(re.search(r"^TracerPid:\s+(\d+)", text, re.M).group(1))  # type: ignore[union-attr]
    return -1


def _tasks(pids: Sequence[int]) -> list[tuple[int, str]]:
    found = []
    for pid in pids:
        with contextlib.suppress(OSError):
            found += [(pid, tid) for tid in os.listdir(f"/proc/{pid}/task")]
    return found


class SyscallCounter:
    """Counts the system calls of ``pids`` (every thread) from entering to leaving::

    with SyscallCounter(pids) as counter:
        ...the window's requests...
    counter.result   # SyscallCount
    """

    def __init__(self, pids: Sequence[int]) -> None:
        self.pids = list(pids)
        self.result = SyscallCount(None, None, "not counted yet")
        self._process: subprocess.Popen[bytes] | None = None
        self._tool: str | None = None
        self._out = Path(tempfile.mkstemp(prefix="webperf-syscalls-")[1])

    def __enter__(self) -> SyscallCounter:
        why = counter_problem()
        if why is not None or not self.pids:
            self.result = SyscallCount(None, None, why or "no process to count")
            return self
        try:
            if perf_problem() is None:
                self._attach_perf()
            else:
                self._attach_strace()
        except (OSError, TimeoutError) as exc:
            self._kill()
            self.result = SyscallCount(None, self._tool, f"{self._tool} did not attach: {exc}")
        return self

    def _attach_perf(self) -> None:
        self._tool = PERF
        argv = ["perf", "stat", "-x,", "-o", str(self._out), "-e", "raw_syscalls:sys_enter"]
        argv += ["-p", ",".join(map(str, self.pids))]
        self._process = process = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        wanted = len(_tasks(self.pids))
        deadline = time.monotonic() + ATTACH_TIMEOUT_S
        while _perf_fds(process.pid) < wanted:  # one event per thread, opened at its start
            if process.poll() is not None or time.monotonic() > deadline:
                raise TimeoutError(f"perf stat opened {_perf_fds(process.pid)} of {wanted}")
            time.sleep(0.02)

    def _attach_strace(self) -> None:
        self._tool = STRACE
        argv = ["strace", "-f", "-c", "-o", str(self._out)]
        for pid in self.pids:
            argv += ["-p", str(pid)]
        self._process = process = subprocess.Popen(argv, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + ATTACH_TIMEOUT_S
        while not all(_tracer(pid, tid) == process.pid for pid, tid in _tasks(self.pids)):
            if process.poll() is not None or time.monotonic() > deadline:
                raise TimeoutError("strace did not attach to every thread")
            time.sleep(0.02)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        process, tool = self._process, self._tool
        if process is None or tool is None:
            self._out.unlink(missing_ok=True)
            return
        process.send_signal(signal.SIGINT)  # perf prints its count, strace its summary
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._kill()
            self.result = SyscallCount(None, tool, f"{tool} did not stop")
            return
        finally:
            self._process = None
        text = self._out.read_text(errors="replace") if self._out.exists() else ""
        self._out.unlink(missing_ok=True)
        calls = perf_count(text) if tool == PERF else strace_total(text)
        why = "" if calls is not None else f"{tool} wrote no count ({text.strip()[:120]!r})"
        self.result = SyscallCount(calls, tool, why)

    def _kill(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        self._process = None
