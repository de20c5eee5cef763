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
* **Native code without symbols** (``[unknown] (libz.so.1.2.13)``): the library is
  named, with the package to install for its functions' names (Debian's ``-dbgsym``,
  found through the image's own dpkg database). The nearest exported symbol is not
  used as a name: measured on zlib, 638 of 711 samples fell after ``crc32_combine_op``
  (deflate's static functions lie there), a function a zlib stream never runs.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path

import psutil

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


def library_note(library: str, package: str | None) -> str:
    fix = (
        f"install {package}-dbgsym (Debian's debug archive) in the image"
        if package
        else "install its debug symbols (Debian: the package's -dbgsym) where it runs"
    )
    return (
        f"{library} has no symbol for some of the code sampled in it ([unknown] ({library})): "
        f"{fix} to name its functions"
    )


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
