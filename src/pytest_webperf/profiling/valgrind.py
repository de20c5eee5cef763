"""Valgrind's callgrind for a counted window (the I/O side of ``instructions``): its command
line, the vgdb monitor commands that bound the window, and the window's dumps.

The command (``Callgrind.argv``)::

    valgrind --tool=callgrind --trace-children=yes --instr-atstart=no
      --callgrind-out-file=DIR/callgrind.out.%p --vgdb=yes --vgdb-prefix=DIR/vgdb
      --dump-line=no --dump-instr=no --log-file=DIR/valgrind.%p.log
      [--smc-check=all-non-file]   # a JIT writes code into anonymous memory (V8, HotSpot)
      [--separate-callers=K]       # stacks: each cost under its K callers
      [--fn-skip=F ...]            # a runtime's trampolines, folded into their callers

* ``--trace-children=yes`` follows a process tree (a shell script's ``exec``, forked
  workers): every process is counted and the window sums them.
* ``--instr-atstart=no``: start-up (and the warm-up) run uninstrumented (3-6 s to
  healthy instead of 11-15 s for CPython), then ``instrumentation on`` is sent to every
  process.
  The counts are as repeatable either way, but not equal between the two modes (CPython's
  caches depend on addresses valgrind's own memory moves): one mode for good.
* ``--collect-systime`` is left out (its ``sysCount`` is not a system call count: 3.62 per
  request for a server making 3.00) and so is ``--separate-threads`` (one part per
  process is what a total per request wants).
* An explicit ``--vgdb-prefix`` in the window's own directory: the default (``/tmp``) is
  shared by every valgrind on the machine, and a target with another ``$TMPDIR`` looks
  elsewhere. The directory is sticky and world-writable: a server that runs as another
  user writes its FIFOs and dumps there.

The window (``Monitor``): ``vgdb -l`` lists the callgrind processes behind the prefix;
``vgdb --pid=P zero`` before the first request, ``vgdb --pid=P dump`` after the last one
(``callgrind.out.P.N``, N counting P's dumps). Zero and dump are the outside control:
they cover every thread of a process at once, and frames entered before the zero
(``main``, the event loop) appear with the cost since. ``callgrind_control`` is a Perl
wrapper around the same commands; vgdb is called directly. vgdb runs where the target
runs (``docker exec`` in a container: the FIFOs carry the pid as the target's pid
namespace sees it), and needs to ptrace an idle process to wake it (root, or the target's
own user). A server that drops privileges after valgrind made its FIFOs (nginx's workers,
``user www-data``) cannot be reached: vgdb waits forever, so every call is bounded.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from pytest_webperf.errors import TargetError
from pytest_webperf.profiling.callgrind import CallgrindFormatError, Profile, parse_file
from pytest_webperf.profiling.perfmap import MAX_MAP_BYTES, PerfMap

VGDB_TIMEOUT_S = 30.0  # a vgdb command that has not answered in this time never will
DUMP_TIMEOUT_S = 300.0  # ... but a dump writes a file: with callers kept, tens of MB
DUMP_WAIT_S = 30.0  # how long a dump file may take to appear after its dump command
OUTPUT = "callgrind.out"
_LISTED = re.compile(r"--pid=(\d+)")

# Runs a command where the target runs (this host, or inside its container): argv and a
# timeout in seconds -> (exit status, output); raises TimeoutError past it.
Beside = Callable[[Sequence[str], float], tuple[int, str]]


@cache
def version() -> str | None:
    """``valgrind-3.19.0``, or None when there is no valgrind here."""
    found = shutil.which("valgrind")
    if found is None:
        return None
    try:
        done = subprocess.run(
            [found, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None


def problem() -> str | None:
    """Why a local command cannot be counted here, or None."""
    if version() is None:
        return (
            "no valgrind here: count=True runs the target under Valgrind's callgrind "
            "(Debian: apt-get install valgrind; scripts/setup.sh installs it as root)"
        )
    if shutil.which("vgdb") is None:
        return "valgrind is here but vgdb is not (Debian's valgrind package has both)"
    return None


@dataclass(frozen=True)
class Callgrind:
    """The callgrind options of a counted pass: the same on both sides of a comparison,
    and said with every figure (counts depend on them, not only on the code)."""

    smc_check: str | None = None  # "all-non-file" for JIT runtimes
    callers: int = 0  # --separate-callers: 0 keeps no stacks
    skip: tuple[str, ...] = ()  # --fn-skip: a runtime's trampolines, folded into callers

    def argv(self, directory: str) -> list[str]:
        """valgrind's command line, its files in ``directory`` as the target sees it."""
        argv = [
            "valgrind",
            "--tool=callgrind",
            "--trace-children=yes",
            "--instr-atstart=no",
            f"--callgrind-out-file={directory}/{OUTPUT}.%p",
            "--vgdb=yes",
            f"--vgdb-prefix={directory}/vgdb",
            "--dump-line=no",
            "--dump-instr=no",
            f"--log-file={directory}/valgrind.%p.log",
        ]
        if self.smc_check:
            argv.append(f"--smc-check={self.smc_check}")
        if self.callers:
            argv.append(f"--separate-callers={self.callers}")
        argv += [f"--fn-skip={name}" for name in self.skip]
        return argv

    def describe(self, valgrind: str | None) -> str:
        """``callgrind (valgrind-3.19.0), late instrumentation, --separate-callers=40``"""
        options = ["late instrumentation"]
        if self.smc_check:
            options.append(f"--smc-check={self.smc_check}")
        if self.callers:
            options.append(f"--separate-callers={self.callers}")
        if self.skip:
            options.append(f"--fn-skip of {len(self.skip)} runtime trampoline(s)")
        return f"callgrind ({valgrind or 'valgrind'}), {', '.join(options)}"


def window_directory(root: str | None = None) -> Path:
    """A new directory for one window's FIFOs, dumps and logs: sticky, world-writable."""
    path = Path(tempfile.mkdtemp(prefix="webperf-count-", dir=root))
    path.chmod(0o1777)
    return path


def valgrind_logs(directory: Path, lines: int = 20) -> str:
    """The tail of each process's valgrind log, for a message."""
    texts = []
    for log in sorted(directory.glob("valgrind.*.log")):
        try:
            tail = log.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            continue
        texts.append(f"--- {log.name} ---\n" + "\n".join(tail))
    return "\n".join(texts)


class Monitor:
    """The vgdb monitor of every callgrind process behind one prefix: ``seen`` is the
    directory as the target sees it, ``host`` as this process does; ``beside`` runs vgdb
    where the target runs."""

    def __init__(self, host: Path, seen: str, beside: Beside, name: str) -> None:
        self.host, self.seen, self.beside, self.name = host, seen, beside, name

    def _vgdb(self, *args: str) -> tuple[int, str]:
        argv = ["vgdb", f"--vgdb-prefix={self.seen}/vgdb", *args]
        timeout = DUMP_TIMEOUT_S if args[-1] == "dump" else VGDB_TIMEOUT_S
        try:
            return self.beside(argv, timeout)
        except TimeoutError:
            why = (
                "a dump that long is a profile too large to write (--webperf-profile=off "
                "keeps no callers)"
                if args[-1] == "dump"
                else "a process that changed its user after valgrind started it (a master "
                "forking workers that drop privileges, nginx's 'user www-data;') cannot be "
                "reached; count it in one process (a counted start in its server.toml "
                "[count] table, see docs/reference/catalogue.md)"
            )
            raise TargetError(
                f"{self.name}: vgdb {' '.join(args)} did not answer within {timeout:.0f} s: {why}",
                valgrind_logs(self.host),
            ) from None
        except OSError as exc:
            raise TargetError(f"{self.name}: vgdb cannot run: {exc}") from None

    def pids(self) -> list[int]:
        """The processes under callgrind now (``vgdb -l``, which exits 1 when done)."""
        _, output = self._vgdb("-l")
        return sorted({int(pid) for pid in _LISTED.findall(output)})

    def command(self, pid: int, command: str) -> None:
        status, output = self._vgdb(f"--pid={pid}", command)
        if status != 0:
            last = output.strip().splitlines()[-1:] or [f"exit status {status}"]
            raise TargetError(
                f"{self.name}: vgdb {command} to process {pid} failed: {last[0]}",
                valgrind_logs(self.host),
            )

    def every(self, pids: Sequence[int], command: str) -> None:
        for pid in pids:
            self.command(pid, command)

    def dumped(self) -> set[Path]:
        """The window dumps written so far (``callgrind.out.PID.N``; the file without
        ``.N`` is written at exit, the costs since the last dump: not a window's)."""
        return {p for p in self.host.glob(f"{OUTPUT}.*.*") if p.suffix[1:].isdigit()}

    def dump(self, pids: Sequence[int]) -> list[Path]:
        """Dump every process in ``pids``; the files written (one per process), once each
        has appeared whole."""
        before = self.dumped()
        self.every(pids, "dump")
        deadline = time.monotonic() + DUMP_WAIT_S
        while True:
            new = sorted(self.dumped() - before)
            owners = {p.name.split(".")[2] for p in new}
            if owners >= {str(pid) for pid in pids} and all(_complete(p) for p in new):
                return new
            if time.monotonic() > deadline:
                raise TargetError(
                    f"{self.name}: the dumps of processes {sorted(pids)} did not all appear "
                    f"in {self.host} within {DUMP_WAIT_S:.0f} s (found {len(new)})",
                    valgrind_logs(self.host),
                )
            time.sleep(0.05)

    def maps(self, pids: Sequence[int]) -> dict[int, PerfMap]:
        """The perf maps the processes wrote (``/tmp/perf-PID.map``: a JIT runtime's, CPython
        3.12's trampolines), moved where they run into the window's directory and read, by
        pid as callgrind's dumps name it (the target's own namespace's). Taken after the
        window's dump: every function that ran in it has its entry. A process without a
        map (or whose map cannot be read) has none: its JIT code is held by named
        callers."""
        found: dict[int, PerfMap] = {}
        for pid in pids:
            move = 'cp "$0" "$1" && { rm -f "$0" || true; }'
            argv = ["sh", "-c", move, f"/tmp/perf-{pid}.map", f"{self.seen}/perf-{pid}.map"]
            try:
                status, _ = self.beside(argv, VGDB_TIMEOUT_S)
            except (TimeoutError, OSError):
                continue
            path = self.host / f"perf-{pid}.map"
            try:
                if status != 0 or path.stat().st_size > MAX_MAP_BYTES:
                    continue
                found[pid] = PerfMap.parse(path.read_text(errors="replace"))
            except OSError:
                continue
        return found

    def packages(self, paths: Sequence[str]) -> dict[str, str]:
        """The Debian package that installed each object (its path as the process maps
        it), asked of the dpkg database where it runs (merged /usr: dpkg may list
        ``/lib/...`` for ``/usr/lib/...``); objects no package holds are left out."""
        found: dict[str, str] = {}
        ask = 'dpkg-query -S "$0" 2>/dev/null || dpkg-query -S "${0#/usr}" 2>/dev/null'
        for path in paths:
            try:
                status, output = self.beside(["sh", "-c", ask, path], VGDB_TIMEOUT_S)
            except (TimeoutError, OSError):
                continue
            line = output.strip().splitlines()[:1]
            if status == 0 and line and ":" in line[0]:
                found[path] = line[0].split(":", 1)[0].split(",")[0].strip()
        return found


def _complete(path: Path) -> bool:
    """Whether a dump has been written to its end (its last line is ``totals:``)."""
    try:
        with open(path, "rb") as file:
            file.seek(max(0, os.path.getsize(path) - 200))
            return b"\ntotals:" in file.read()
    except OSError:
        return False


def read_dumps(paths: Sequence[Path], name: str) -> Profile:
    """Every part of a window's dumps; a dump that is not callgrind's format is a
    ``TargetError`` naming it."""
    profile = Profile()
    for path in paths:
        try:
            profile.extend(parse_file(path))
        except (CallgrindFormatError, OSError) as exc:
            raise TargetError(f"{name}: cannot read the callgrind dump {path}: {exc}") from None
    return profile
