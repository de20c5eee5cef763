"""Whose code a profile's frame is, and how it is labelled (pure): the user's own (the
server's binary, its scripts, its package), a library's (a shared library, a Python
package from ``site-packages``, a JavaScript one from ``node_modules``) or the runtime's
(the interpreter, its standard library, libc, the loader, the kernel), so a profile lists
the user's code first, then the libraries, then the runtime.

Every decision is read from a path: an ELF object's as callgrind or perf names it, a
script's as a runtime's perf map writes it (CPython 3.12's ``py::qualname:/srv/app.py``,
V8's ``JS:*render /srv/app/app.js:9:3``). A file's label is short and the same on both
sides of an A/B run (the base is built in another directory): a dependency's path inside
its package directory (``fastapi/routing.py``, ``express/lib/router/index.js``), the
standard library's inside it (``http/server.py``, ``node:events``), the user's own file
by its name (``app.py``).
"""

from __future__ import annotations

import os
import re

from pytest_webperf.targets.runtime import NODE_PROGRAM, PYTHON_PROGRAM

USER, LIBRARY, RUNTIME = "user", "library", "runtime"
RANK = {USER: 0, LIBRARY: 1, RUNTIME: 2}  # the order a profile lists them in
ANONYMOUS = "(anonymous)"
UNKNOWN = "[unknown]"  # code without symbols that no named caller holds
HELD = " > " + UNKNOWN  # ... and the end of the name of code that one holds

# the runtime's own objects: an interpreter's library, libc and its family, the loader,
# the C++ runtime, Valgrind's preloads, code no object holds
_RUNTIME_OBJECT = re.compile(
    r"^(?:lib(?:python|node|jvm|php|ruby|perl)[\w.+-]*"
    r"|lib(?:c|m|dl|rt|pthread|stdc\+\+|gcc_s|resolv|crypt|util|anl|nsl|mvec)(?:[-.].*)?"
    r"|ld-linux.*|ld64\.so.*|ld\.so.*|vgpreload_.*|linux-vdso.*|\[\w+\]|kernel|\?\?\?|jit|v8"
    r"|java)$"
)
_PACKAGE_DIRS = ("site-packages/", "dist-packages/")
_STDLIB = re.compile(r"/lib(?:64)?/python3?\.?\d*[^/]*/")


def label(obj: str, name: str) -> str:
    """``hash_work (server)``, ``render (app.js)``; an anonymous function by its file and
    line alone: ``(anonymous) app.js:9``."""
    if not obj:
        return name
    return f"{name} {obj}" if name == ANONYMOUS else f"{name} ({obj})"


def held(holder: str, obj: str) -> str:
    """Code of ``obj`` without symbols, shown under its nearest named caller (``holder``,
    a label): ``deflate (libz.so.1.2.13) > [unknown] (libz.so.1.2.13)``; never a bare
    address."""
    return f"{holder}{HELD} ({obj})"


def native_kind(path: str) -> str:
    """An ELF object's kind from its path: the interpreter's binary and the system's
    libraries are the runtime's, a Python extension module of the standard library too;
    a package's extension module or another shared library is a library; any other
    program is the user's (the server's own binary)."""
    base = os.path.basename(path)
    if any(d in path for d in (*_PACKAGE_DIRS, "node_modules/")):
        return LIBRARY
    if "/lib-dynload/" in path or _RUNTIME_OBJECT.match(base):
        return RUNTIME
    if PYTHON_PROGRAM.fullmatch(base) or NODE_PROGRAM.fullmatch(base):
        return RUNTIME
    if re.search(r"\.so(\.|$)", base):
        return LIBRARY
    return USER


def python_file(path: str) -> tuple[str, str]:
    """A Python source file's label and kind: a package's by its path inside
    ``site-packages`` (a library), the standard library's inside it (the runtime; frozen
    modules too), the user's by its name."""
    for directory in _PACKAGE_DIRS:
        if directory in path:
            return path.rsplit(directory, 1)[1], LIBRARY
    if path.startswith("<frozen "):
        return path.strip("<>").removeprefix("frozen "), RUNTIME
    found = _STDLIB.search(path)
    if found:
        return path[found.end() :], RUNTIME
    return os.path.basename(path) or "?", USER


def js_file(path: str) -> tuple[str, str]:
    """A JavaScript file's label and kind: Node's own (``node:events``: the runtime), a
    dependency's path after ``node_modules/`` (a library), the application's by its name."""
    if not path:
        return "?", USER
    if path.startswith("node:"):
        return path, RUNTIME
    if "node_modules/" in path:
        return path.rsplit("node_modules/", 1)[1], LIBRARY
    return os.path.basename(path), USER


def kind_rank(kind: str) -> int:
    return RANK.get(kind, len(RANK))
