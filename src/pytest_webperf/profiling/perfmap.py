"""JIT-compiled frames named: the perf maps a runtime writes (V8's ``--perf-basic-prof``,
HotSpot's ``Compiler.perfmap``, PHP's ``opcache.jit_debug=0x10``), copied through the
process's own mount namespace when sampling stops, and frame names made alike for A
and B.

Why the addresses are resolved here
-----------------------------------
A runtime writes ``/tmp/perf-<pid>.map`` with *its* pid and *its* ``/tmp``: in a
container that is ``/tmp/perf-1.map`` inside the container's mount namespace, while
perf on the host knows the host pid. perf 6.1 finds it through ``/proc/PID/root``
**only while the process lives**: once the container is gone every JIT frame is
``[unknown] (/tmp/perf-<hostpid>.map)`` (measured: 18,635 of 18,635 frames). So the maps
are copied when sampling stops (``snapshot``), beside the recording, and **every**
frame ``perf script`` places in a map is named from the copy (``resolve_script``): no
write to the host's ``/tmp``, no race with another process reusing the pid, whatever
perf's version. Never from the name perf gave it: perf may read a map from the
*host's* ``/tmp``, another process's. Seen here: in 2 of 45 A/B runs of a container's
Node, every JavaScript frame of one repetition came out of ``perf script`` named after
a Node process's start-up code (576 of 576 samples of ``checksum (app.js)`` as
``(anonymous) (node:internal/fixed_queue)``, its callers as ``setupBuffer``), on a host
whose ``/tmp`` held a stale map of an earlier host process.

A map is ``START SIZE name`` per line, hex, appended as code is made. V8 does not
compact code space under ``--perf-basic-prof``, but freed code's addresses are reused:
where two entries overlap, the later one is the live one.
"""

from __future__ import annotations

import bisect
import re
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pytest_webperf.profiling import frames

MAX_MAP_BYTES = 64 << 20  # a map past this is a runaway (a JIT that never stops making code)
OVERLAPS = 16  # entries looked back at for an address: overlaps are rare and short


def namespace_pid(pid: int) -> int | None:
    """The pid the process has in its own (innermost) pid namespace, from ``NSpid`` in
    ``/proc/PID/status`` (the host pid when it has none); None when it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("NSpid:"):
            return int(line.split()[-1])
    return pid  # kernels before 4.1 have no NSpid: no pid namespaces either


def map_of(pid: int) -> Path | None:
    """Where the process's perf map is, seen from the host (through its root)."""
    inner = namespace_pid(pid)
    if inner is None:
        return None
    path = Path(f"/proc/{pid}/root/tmp/perf-{inner}.map")
    return path if path.is_file() else None


def snapshot(pids: Iterable[int], into: Path) -> dict[int, Path]:
    """Copies of the perf maps of ``pids`` (host pids) that have one, by host pid: taken
    when sampling stops, before a container can go."""
    copies: dict[int, Path] = {}
    for pid in pids:
        source = map_of(pid)
        if source is None:
            continue
        target = into / f"perf-{pid}.map"
        try:
            if source.stat().st_size > MAX_MAP_BYTES:
                continue
            shutil.copyfile(source, target)
        except OSError:
            continue  # the process went meanwhile: its frames stay [unknown]
        copies[pid] = target
    return copies


@dataclass
class PerfMap:
    """Address -> name, the later entry winning where two overlap."""

    starts: list[int]
    ends: list[int]
    order: list[int]
    names: list[str]

    @classmethod
    def parse(cls, text: str) -> PerfMap:
        rows = []
        for index, line in enumerate(text.splitlines()):
            parts = line.split(" ", 2)
            if len(parts) < 3:
                continue
            try:
                start, size = int(parts[0], 16), int(parts[1], 16)
            except ValueError:
                continue
            rows.append((start, start + size, index, parts[2].strip()))
        rows.sort()
        return cls(
            [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows]
        )

    def lookup(self, address: int) -> str | None:
        best: tuple[int, str] | None = None
        i = bisect.bisect_right(self.starts, address) - 1
        for j in range(i, max(-1, i - OVERLAPS), -1):
            if self.starts[j] <= address < self.ends[j] and (
                best is None or self.order[j] > best[0]
            ):
                best = (self.order[j], self.names[j])
        return best[1] if best else None


_MAP_FRAME = re.compile(  # whatever perf named it (a symbol has spaces: "JS:*f /a.js:1")
    r"^(?P<indent>\s*)(?P<ip>[0-9a-f]+)\s+(?P<sym>.*?)\s*\(/tmp/perf-(?P<pid>\d+)\.map\)\s*$"
)
MAP_DSO = re.compile(r"^perf-\d+\.map$")  # a frame's file (base name) that is a perf map


def resolve_script(text: str, maps: Mapping[int, PerfMap]) -> tuple[str, int, int]:
    """``perf script`` output with every frame in a perf map named from the copies
    (``[unknown]`` where the copy has no entry, or there is no copy: a name perf read
    from the host's ``/tmp`` is another process's); also how many such frames there
    were and how many got a name."""
    out: list[str] = []
    seen = named = 0
    for line in text.splitlines():
        match = _MAP_FRAME.match(line)
        if match is None:
            out.append(line)
            continue
        seen += 1
        table = maps.get(int(match["pid"]))
        name = table.lookup(int(match["ip"], 16)) if table else None
        named += name is not None
        where = f"(/tmp/perf-{match['pid']}.map)"
        out.append(f"{match['indent']}{match['ip']} {name or '[unknown]'} {where}")
    return "\n".join(out) + "\n", seen, named


# --- frame names alike for A and B ---------------------------------------------------------

_V8 = re.compile(
    r"^(?:JS|LazyCompile|Function|Script|Eval):[*~^+-]?(?P<name>[^ ]*)"
    r"(?: (?P<file>.*?))?(?::(?P<line>\d+))?(?::\d+)?$"
)
_V8_KINDS = ("RegExp:", "BytecodeHandler:", "Stub:", "Handler:", "CodeStub:")
# CPython 3.12's perf trampolines: "py::Handler.do_GET:/srv/app/server.py"
_PYTHON = re.compile(r"^py::(?P<name>[^:]+):(?P<file>.*)$")
# HotSpot's Compiler.perfmap: "java.util.List webperf.Server.quicksort(java.util.List)";
# perf-map-agent's: "Lwebperf/Server;::quicksort"
_JVM = re.compile(
    r"^(?:\[\w+\] )?(?:[\w$.\[\]<>]+ )?(?P<method>[\w$/.;<>]+(?:::|\.)[\w$<>]+)(?P<sig>\(.*\))?$"
)
_JVM_RUNTIME = ("java.", "javax.", "jdk.", "sun.", "com.sun.")
# PHP 8 opcache.jit_debug=0x10: "TRACE-2$quicksort$8" (trace 2, in quicksort, from line
# 8), "JIT$quicksort" (function JIT), "JIT$$exception_handler" / "jit$$trace_exit_0"
_PHP = re.compile(r"^(?:TRACE-\d+\$(?P<trace>[^$]+)\$\d+|JIT\$(?P<fn>[^$]+)|(?:JIT|jit)\$\$\w+)$")


def jit_function(symbol: str) -> tuple[str, str, str] | None:
    """A JIT frame as a profile keeps it: its file's label, its name and its kind
    (``frames``), without V8's tier (``*`` optimised, ``^`` baseline, ``~`` interpreted:
    one function is one function whichever tier ran it) and without line numbers (they
    move when the change adds lines above), except an anonymous function's, which has no
    other name (``(anonymous) app.js:9``). None if ``symbol`` is no runtime's JIT name."""
    match = _V8.match(symbol)
    if match:
        obj, kind = frames.js_file(match["file"] or "")
        if match["name"]:
            return obj, match["name"], kind
        return (f"{obj}:{match['line']}" if match["line"] else obj), frames.ANONYMOUS, kind
    match = _PYTHON.match(symbol)
    if match:
        obj, kind = frames.python_file(match["file"])
        return obj, match["name"], kind
    if symbol.startswith("Builtin:"):
        return "v8", symbol.split(":", 1)[1], frames.RUNTIME
    if symbol.startswith(_V8_KINDS):
        return "v8", f"[{symbol.split(':', 1)[0]}]", frames.RUNTIME
    match = _PHP.match(symbol)
    if match:
        name = match["trace"] or match["fn"]
        return "php", name or "[jit stub]", frames.USER if name else frames.RUNTIME
    match = _JVM.match(symbol)
    if match and (match["sig"] is not None or "::" in match["method"]):
        method = _java_method(match["method"])
        return "java", method, frames.RUNTIME if method.startswith(_JVM_RUNTIME) else frames.USER
    return None


def jit_name(symbol: str) -> str | None:
    """A JIT frame's label (``jit_function``): ``render (app.js)``, ``(anonymous)
    app.js:9``, ``do_GET (server.py)``; None if ``symbol`` is no runtime's JIT name."""
    found = jit_function(symbol)
    return frames.label(found[0], found[1]) if found else None


def map_frame(symbol: str) -> str:
    """A frame of a perf map as folded stacks keep it: named alike on both sides (the
    map's file names the pid, which differs from A to B), ``(jit)`` when no runtime's
    naming applies, ``[unknown] (jit)`` when the map had no entry for it."""
    if symbol in ("", "[unknown]"):
        return "[unknown] (jit)"
    return jit_name(symbol) or f"{symbol} (jit)"


def _java_method(method: str) -> str:
    """``Lcom/example/Work;::sort`` and ``com.example.Work::sort`` alike:
    ``com.example.Work.sort``."""
    method = method.replace("::", ".").replace("/", ".")
    if method.startswith("L") and ";" in method:
        method = method[1:].replace(";", "")
    return method
