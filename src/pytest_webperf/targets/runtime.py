"""What runs a target's program (native code, CPython, Go, Node, the JVM), read from its
command, and what a counted measurement pins for it (``Pinning``): the sources of
variation the runtime lets us fix, or why it is refused.

Measured with callgrind at concurrency 1, 5 fresh processes each (the figures page has
the commands): native code repeats exactly (C, nginx: 0.000 % apart); CPython to 0.010 %
with ``PYTHONHASHSEED=0``; Go to 1.0 % with ``GOMAXPROCS=1 GOGC=off`` (5.1 % without: its
scheduler and collector run in the window), and ``GODEBUG=asyncpreemptoff=1`` is required
(its preemption signals abort callgrind at start-up); Node to 0.14 % with ``--predictable
--single-threaded --no-opt --always-sparkplug`` and 1,000 warm-up requests (1.7 % without
the first two: V8's heuristics and its platform threads; 0.1-0.4 % with N 2,000 and its
optimizing compiler, still tiering up after thousands of requests), which, as any JIT,
writes code into anonymous memory (``--smc-check=all-non-file``); the JVM to 4.6 %
(its compiler and collector threads run in the window; 0.45 % only with ``-Xint``, the
bytecode interpreter: another program), so it is refused for the timed checks.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

# The programs' names, the one home of them: a command's program here, a running
# process's name and executable in ``profiling/runtimes.py``.
PYTHON_PROGRAM = re.compile(r"python[\d.]*(-dbg)?|pypy[\d.]*|uwsgi|gunicorn|uvicorn")
NODE_PROGRAM = re.compile(r"node(js)?[\d.]*")
_JVM = re.compile(r"java|catalina\.sh|jsvc")

JVM_REFUSED = (
    "the JVM is not counted: its JIT compiler and garbage collector threads run in the "
    "counted window, so its instructions per request vary by about 5 % between fresh "
    "processes; gate it with the timed checks (cpu_per_req) instead of count=True"
)


WARMUP_REQUESTS = 100  # a counted window's warm-up, unless its runtime needs more


@dataclass(frozen=True)
class Pinning:
    """What a counted start of one runtime adds: environment (the user's own values
    win), flags after the program's name, callgrind's ``--smc-check``; or a refusal."""

    runtime: str
    env: Mapping[str, str] = field(default_factory=dict)
    flags: tuple[str, ...] = ()
    smc_check: str | None = None
    refused: str | None = None
    note: str = ""  # what was pinned, for the report
    # the most callers callgrind keeps per cost (--separate-callers) for this runtime: its
    # contexts multiply with a JIT's code addresses and Go's scheduler frames (Node: 1.6
    # MB of dump for 200 requests without, 115 MB with 12 callers, 365 MB with 40)
    callers: int = 40
    # what names its functions in a counted window (and only there: the native window
    # counts system calls, which a perf map's writes would add to), and the runtime's
    # trampolines callgrind folds into their callers (--fn-skip)
    named_env: Mapping[str, str] = field(default_factory=dict)
    named_flags: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    # requests before the probe (uninstrumented): what the runtime does once is done by
    # then (Node's probe halves after 100: 495,694 and 352,293 instructions a request,
    # V8 still compiling; after 1,000: 352,439 and 353,397)
    warmup: int = WARMUP_REQUESTS

    def applied(self, env: Mapping[str, str]) -> dict[str, str]:
        """``env`` with this pinning's values where ``env`` has none."""
        return {**self.env, **env}

    def named(self) -> Pinning:
        """This pinning for a counted window: with what names its runtime's functions."""
        flags = (*self.flags, *(f for f in self.named_flags if f not in self.flags))
        return replace(self, env={**self.env, **self.named_env}, flags=flags)


PINNINGS: Mapping[str, Pinning] = {
    "native": Pinning("native", note="native code: nothing to pin"),
    "python": Pinning(
        "python",
        {"PYTHONHASHSEED": "0"},
        note=(
            "CPython: PYTHONHASHSEED=0 (a fixed hash seed); PYTHONPERFSUPPORT=1 in the counted "
            "window (3.12+: each Python function runs through a trampoline of its own, which "
            "names it; +1.7 % instructions measured on http.server)"
        ),
        named_env={"PYTHONPERFSUPPORT": "1"},
    ),
    "go": Pinning(
        "go",
        {"GODEBUG": "asyncpreemptoff=1", "GOMAXPROCS": "1", "GOGC": "off"},
        note=(
            "Go: GODEBUG=asyncpreemptoff=1 (callgrind needs it), GOMAXPROCS=1 GOGC=off "
            "(one scheduler thread, no collection: its scheduler and sysmon still run in "
            "the window, about 1 % apart); no stacks kept (its contexts run to tens of MB)"
        ),
        callers=0,
    ),
    "node": Pinning(
        "node",
        flags=("--predictable", "--single-threaded", "--no-opt", "--always-sparkplug"),
        smc_check="all-non-file",
        note=(
            "Node: --predictable --single-threaded (V8's heuristics fixed, no platform "
            "threads), --no-opt --always-sparkplug (counted on V8's baseline code: its "
            "optimizing compiler still tiers up after thousands of requests, past any "
            "window's warm-up; what only it changes is for the timed checks), "
            "--smc-check=all-non-file (its JIT writes code), --perf-basic-prof in "
            "the counted window (its map names the JavaScript functions; +0.3 % "
            "instructions measured); no stacks kept (its JIT's contexts run to hundreds of MB)"
        ),
        callers=0,
        named_flags=("--perf-basic-prof",),
        skip=("Builtins_BaselineOutOfLinePrologue", "Builtins_BaselineOutOfLinePrologueDeopt"),
        warmup=1000,
    ),
    "jvm": Pinning("jvm", refused=JVM_REFUSED),
}


def resolve(program: str, path: str | None = None, cwd: str | None = None) -> Path | None:
    """The file a command's program names (through ``PATH`` when it has no slash)."""
    if "/" in program:
        found = Path(cwd or os.getcwd(), program)
        return found if found.is_file() else None
    located = shutil.which(program, path=path)
    return Path(located) if located else None


def elf_sections(path: Path) -> set[str]:
    """The section names of an ELF file (empty for anything else, or an unreadable one)."""
    try:
        with open(path, "rb") as file:
            ident = file.read(64)
            if len(ident) < 52 or ident[:4] != b"\x7fELF":
                return set()
            wide, endian = ident[4] == 2, "<" if ident[5] == 1 else ">"
            if wide:
                shoff, entsize, count, names = struct.unpack(endian + "40xQ10xHHH", ident)
            else:
                shoff, entsize, count, names = struct.unpack(endian + "32xI10xHHH", ident[:52])
            file.seek(shoff + names * entsize)
            header = file.read(entsize)
            offset_format = endian + ("24xQQ" if wide else "16xII")
            offset, size = struct.unpack(offset_format, header[: 40 if wide else 24])
            file.seek(offset)
            table = file.read(min(size, 1 << 20))
            file.seek(shoff)
            headers = file.read(entsize * count)
    except (OSError, struct.error):
        return set()
    found = set()
    for i in range(count):
        (start,) = struct.unpack(endian + "I", headers[i * entsize : i * entsize + 4])
        end = table.find(b"\0", start)
        found.add(table[start:end].decode("latin-1"))
    return found


def runtime_of(
    argv: Sequence[str], env: Mapping[str, str] | None = None, *, look: bool = True
) -> str:
    """``python``, ``node``, ``jvm``, ``go`` or ``native``, from the command's program:
    its name (an interpreter), else (``look``: the program is a file on this host) its
    ELF sections (Go writes ``.go.buildinfo``)."""
    if not argv:
        return "native"
    name = os.path.basename(argv[0])
    if PYTHON_PROGRAM.fullmatch(name):
        return "python"
    if NODE_PROGRAM.fullmatch(name):
        return "node"
    if _JVM.fullmatch(name):
        return "jvm"
    if not look:
        return "native"
    found = resolve(argv[0], (env or {}).get("PATH", os.environ.get("PATH")))
    if found is None:
        return "native"
    real = found.resolve()
    for candidate in (real.name, found.name):
        if PYTHON_PROGRAM.fullmatch(candidate):
            return "python"
        if NODE_PROGRAM.fullmatch(candidate):
            return "node"
    sections = elf_sections(real)
    if ".go.buildinfo" in sections or ".note.go.buildid" in sections:
        return "go"
    return "native"


def launcher(argv: Sequence[str], env: Mapping[str, str] | None = None) -> str | None:
    """Why the program is a script that starts another program (a pyenv shim, ``npx``),
    or None: under ``--trace-children=yes`` each process it runs is counted too."""
    found = resolve(argv[0], (env or {}).get("PATH", os.environ.get("PATH"))) if argv else None
    if found is None:
        return None
    try:
        with open(found, "rb") as file:
            head = file.read(128)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    line = head.split(b"\n", 1)[0].decode("latin-1")
    return (
        f"{argv[0]} is a script ({line}): every process it starts runs under callgrind too, "
        "which slows the start and counts the launcher's work; name the real program"
    )


def pinned_argv(argv: Sequence[str], pinning: Pinning) -> list[str]:
    """The command with the runtime's flags after its program (``node --predictable
    app.js``); flags the command already has are not added twice."""
    flags = [f for f in pinning.flags if f not in argv[1:]]
    return [argv[0], *flags, *argv[1:]] if argv else []
