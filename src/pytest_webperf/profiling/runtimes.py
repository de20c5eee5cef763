"""What each runtime needs to be profiled by name, and what the profile says when it
cannot be: the environment a target starts with, which runtime a process is, and the
notes for JavaScript without a perf map, a JVM that wrote none, PHP, and native
libraries without symbols.

* **Node**: V8 writes ``/tmp/perf-<pid>.map`` with ``--perf-basic-prof`` (named JIT
  frames, with their file); ``--interpreted-frames-native-stack`` names interpreted
  frames too. Both pass through ``NODE_OPTIONS``, so every target webperf starts gets
  them while profiling is on (both sides alike; measured cost +0.1 % CPU per request,
  95 % CI -5.4..+5.9 %: the map is written when code is compiled, not per request).
* **JVM**: HotSpot writes its map on request (``attach.write_perfmap``, JDK 17+);
  ``-XX:+PreserveFramePointer`` (through ``JAVA_TOOL_OPTIONS``) keeps the callers of
  compiled methods on the stack (no cost measured); the leaf is named without it.
* **PHP**: Debian's PHP 8.2 runs no JIT (so no perf map), and no maintained sampler
  names PHP functions from outside the process: the profile says so in one sentence.
* **Native code without symbols** (``[unknown] (libz.so.1.2.13)``): shown under its
  nearest named caller, with the package to install for its functions' names (Debian's
  ``-dbgsym``, found through the image's own dpkg database; ``symbols_fix``). The nearest
  exported symbol is not used as a name: measured on zlib, 638 of 711 samples fell after
  ``crc32_combine_op`` (deflate's static functions lie there), a function a zlib stream
  never runs.
* **Counted** (``naming_notes``): CPython 3.12+ and Node name their functions through
  the pinning's counted-window flags (``targets/runtime.py``); a CPython before 3.12 or
  a node that wrote no map is said so, with the fix, and V8's inlining is said.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path

import psutil

from pytest_webperf.profiling.instructions import Window
from pytest_webperf.targets.runtime import NODE_PROGRAM, PYTHON_PROGRAM

# Appended to what the target already has, for every target started while profiling is on.
PROFILE_ENV: dict[str, tuple[str, ...]] = {
    "NODE_OPTIONS": ("--perf-basic-prof", "--interpreted-frames-native-stack"),
    "JAVA_TOOL_OPTIONS": ("-XX:+PreserveFramePointer",),
}

PHP_NOTE = (
    "PHP functions are not named: perf sees the Zend VM (execute_ex), and PHP 8.2 tells "
    "perf the names of JIT-compiled code only (opcache JIT with opcache.jit_debug=0x10), "
    "which this server does not run; the native frames are PHP's own C functions"
)


def profile_env(
    env: Mapping[str, str] | None, inherited: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``env`` with the runtimes' profiling flags appended to each variable's value (the
    one in ``env``, else the one ``inherited``), each flag once."""
    merged = dict(env or {})
    for key, flags in PROFILE_ENV.items():
        current = merged.get(key, (inherited or {}).get(key, ""))
        words = current.split()
        merged[key] = " ".join([*words, *(f for f in flags if f not in words)])
    return merged


def _names(pid: int) -> list[str]:
    try:
        process = psutil.Process(pid)
        return [n for n in (process.name(), os.path.basename(process.exe() or "")) if n]
    except (psutil.Error, OSError):
        return []


def _maps(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return ""


def runtime_of(pid: int) -> str:
    """``python``, ``node``, ``hotspot``, ``php`` or ``native``."""
    names = _names(pid)
    if any(PYTHON_PROGRAM.fullmatch(n) for n in names):
        return "python"
    if any(NODE_PROGRAM.fullmatch(n) for n in names):
        return "node"
    maps = _maps(pid)
    if "/libjvm.so" in maps:
        return "hotspot"
    if re.search(r"/libphp[\d.]*\.so|/php[\d.]*(-fpm[\d.]*)?$", maps, re.MULTILINE) or any(
        re.fullmatch(r"php(-fpm)?[\d.]*", n) for n in names
    ):
        return "php"
    return "native"


def node_note(part: str) -> str:
    return (
        f"{part}: node wrote no perf map, so its JavaScript shows as [unknown] (jit): start "
        "node with --perf-basic-prof (NODE_OPTIONS; webperf sets it for the targets it "
        "starts)"
    )


def jvm_note(part: str, why: str) -> str:
    return (
        f"{part}: the JVM wrote no perf map ({why[:120]}), so its compiled Java shows as "
        "[unknown] (jit): HotSpot writes one on request from JDK 17 (Compiler.perfmap)"
    )


def symbols_fix(package: str | None, *, counted: bool = True) -> str:
    """How to get a library's names where the target runs: its Debian debug symbols
    (for a catalogue server counted, in its counted image: ``debug_symbols`` in its
    ``[count]`` table), or, counted, debuginfod (Valgrind asks it through
    ``debuginfod-find`` when ``DEBUGINFOD_URLS`` is set; Debian's perf is built without);
    a library no package installed: built with its symbols. Used when present: Valgrind
    and perf read ``/usr/lib/debug/.build-id``."""
    if package is None:
        return (
            "no Debian package installed it: build it with its symbols, or keep its debug "
            "file under /usr/lib/debug/.build-id where it runs"
        )
    if not counted:
        return f"install {package}-dbgsym (Debian's debug archive) in the image"
    return (
        f"install {package}-dbgsym where it runs (a catalogue server: "
        f'debug_symbols = ["{package}"] in its [count] table), or set DEBUGINFOD_URLS'
    )


def library_note(library: str, package: str | None) -> str:
    return (
        f"{library} has no symbol for some of the code sampled in it: its samples are shown "
        f"under its nearest named caller; {symbols_fix(package, counted=False)} to name its "
        "functions"
    )


def python_note(version: str | None) -> str:
    """Why a counted CPython's functions are not named, and the fix."""
    return (
        f"Python functions are not named: CPython {version or 'before 3.12'} runs every one "
        "inside _PyEval_EvalFrameDefault; CPython 3.12 or later names each with its own "
        "instructions (webperf turns its perf trampolines on), and the timed profile "
        "(py-spy) names them by samples"
    )


NODE_COUNTED_NOTE = (
    "node wrote no perf map, so its JavaScript is shown as [unknown] (jit) under the "
    "runtime functions that call it: node starts with --perf-basic-prof in the counted "
    "window; a node that cannot write /tmp/perf-PID.map (its user, a read-only /tmp) names "
    "none"
)
NODE_BASELINE_NOTE = (
    "counted on V8's baseline code (--no-opt --always-sparkplug): nothing is inlined, and "
    "a JavaScript function's own instructions are its code's and those of the builtins it "
    "calls (V8's code without symbols, shown under it as NAME > [unknown])"
)
_PYTHON_VERSION = re.compile(r"python(\d+\.\d+)")


def naming_notes(runtime: str, windows: Sequence[Window]) -> list[str]:
    """What a counted profile says when its runtime's functions went unnamed (a CPython
    or a node that wrote no perf map), or how they were compiled (V8's baseline code)."""
    if not windows:
        return []
    if any(w.maps for w in windows):
        return [NODE_BASELINE_NOTE] if runtime == "node" else []
    if runtime == "node":
        return [NODE_COUNTED_NOTE]
    if runtime != "python":
        return []
    versions = {
        m[1] for w in windows for obj, _ in w.exclusive if (m := _PYTHON_VERSION.search(obj))
    }
    return [python_note(min(versions) if versions else None)]


def package_of(pid: int, library: str) -> str | None:
    """The Debian package that installed ``library`` (its path as the process maps it),
    from the dpkg database of the process's own root (its image)."""
    return _package_in(f"/proc/{pid}/root", library)


@cache
def _package_in(root: str, library: str) -> str | None:
    # merged /usr: dpkg may list /lib/x/libz.so where the process maps /usr/lib/x/libz.so
    plain = library.removeprefix("/usr") if library.startswith("/usr/") else library
    wanted = {f"\n{plain}\n", f"\n/usr{plain}\n"}
    info = Path(root) / "var/lib/dpkg/info"
    try:
        lists = sorted(info.glob("*.list"))
    except OSError:
        return None
    for listing in lists:
        try:
            text = "\n" + listing.read_text(errors="replace") + "\n"
        except OSError:
            continue
        if any(path in text for path in wanted):
            return listing.name.removesuffix(".list").split(":")[0]
    return None
