"""What one counted window's callgrind dumps say, per request (pure: no I/O).

A *window* is the dumps of every process under callgrind, zeroed before and dumped after
exactly N requests (``valgrind.py``). From it, per request:

* **instructions** (``Ir``): the sum of every cost line of every part (every process,
  every thread), which is what ``totals:`` says. Not ``summary:``: a dump taken while a
  thread sits in a system call has a ``summary`` a few dozen instructions lower.
* **allocations**: every allocation the program asked for, once, whichever allocator took
  it: calls into libc's allocators (``malloc calloc realloc reallocarray aligned_alloc
  memalign posix_memalign valloc pvalloc``) and every ``operator new`` overload, from
  callers that are not allocators themselves (``realloc`` calling ``malloc`` is one
  allocation), plus calls into the runtime's own allocator: CPython's object and memory
  allocators (``PyObject_Malloc``, ``PyMem_Malloc`` and their ``Calloc``/``Realloc``), Go's
  heap (``runtime.mallocgc``), less the libc calls CPython's allocator makes for them
  (a large object's ``_PyObject_Malloc`` -> ``PyMem_RawMalloc`` -> ``malloc`` is one
  allocation): allocations moved from CPython's allocator to malloc read as what happened.
  libc's alone are kept beside (``libc_allocations``), and each runtime entry point's
  (``runtime_allocations``). Not counted: V8's heap (its JIT code bumps a pointer, with
  no call to count), and calls a build inlined (Debian's libpython inlines many).
* **per function**: exclusive instructions (exact: the deltas of all functions add up to
  the total's), and inclusive ones: exact from the stacks when the run kept its callers
  (``--separate-callers=K``: every cost under its chain of K callers, the function named
  ``f'caller'caller's caller``), else from the call arcs, which is exact except for a
  function on a cycle of calls through others (a recursion, a runtime's dispatch: its
  nested calls would count again, as ``callgrind_annotate --inclusive=yes`` counts them):
  not known for those; and a source frame's *own*, whole and by the function that ran
  it (``naming``).
* **stacks**: with the callers kept, folded stacks in instructions (``root;...;leaf Ir``,
  the shape of the sampling profiles', so the flame graph draws them); a stack deeper than
  K frames is cut at the top and drawn under ``[deeper]``.

Names as callgrind writes them carry a recursion level (``fib'2``), a symbol version
(``malloc@@GLIBC_2.2.5``) and, with callers kept, the callers: ``naming.function_of`` is
the one reading of a name, and ``naming`` names JIT code from the processes' perf maps
and shows code without symbols under its nearest named caller. A function is known by its
object's (or source file's) label and its name, so the base, built by ``git archive`` in
another directory, and the change name it alike.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pytest_webperf.profiling import frames
from pytest_webperf.profiling.callgrind import Profile
from pytest_webperf.profiling.naming import (
    DEEPER,
    Function,
    Named,
    function_of,
    name_window,
)
from pytest_webperf.profiling.perfmap import PerfMap

EVENT = "Ir"

# libc's allocation entry points (glibc's __libc_* names are aliases of the same address:
# callgrind names an address once, so they may appear under either name)
LIBC_ALLOCATORS = frozenset(
    {
        "malloc",
        "calloc",
        "realloc",
        "reallocarray",
        "aligned_alloc",
        "memalign",
        "posix_memalign",
        "valloc",
        "pvalloc",
        "__libc_malloc",
        "__libc_calloc",
        "__libc_realloc",
        "__libc_memalign",
    }
)
_OPERATOR_NEW = re.compile(r"^operator new(\[\])?\(")
# runtimes' own allocators' entry points (Go's heap; CPython's object and memory allocators)
RUNTIME_ALLOCATORS = frozenset(
    {
        "runtime.mallocgc",
        "PyObject_Malloc",
        "PyObject_Calloc",
        "PyObject_Realloc",
        "PyMem_Malloc",
        "PyMem_Calloc",
        "PyMem_Realloc",
    }
)
# inside CPython's allocator: what its entry points call, and where it asks libc (through
# PyMem_Raw*) for a large object: those libc calls are the entry point's allocation
_CPYTHON_INSIDE = frozenset({"_PyObject_Malloc", "_PyObject_Calloc", "_PyObject_Realloc"})
_CPYTHON_RAW = frozenset({"PyMem_RawMalloc", "PyMem_RawCalloc", "PyMem_RawRealloc"})


# --- allocations ---------------------------------------------------------------------------


def is_allocator(function: str) -> bool:
    """libc's allocators and every ``operator new``/``new[]`` overload (sized, aligned,
    nothrow), by a function's name (``function_of``)."""
    return function in LIBC_ALLOCATORS or _OPERATOR_NEW.match(function) is not None


def label(function: Function) -> str:
    """``hash_work (server)``, ``(anonymous) app.js:9``: how reports name a function."""
    return frames.label(*function)


def on_behalf(profile: Profile) -> int:
    """Calls CPython's allocator makes to libc (through ``PyMem_Raw*``) for an allocation
    its entry point was already counted for."""
    inside, raw = _CPYTHON_INSIDE, _CPYTHON_RAW
    arcs = (item for part in profile.parts for item in part.calls.items())
    return sum(
        arc.count
        for (caller, callee), arc in arcs
        if function_of(caller.name) in inside and function_of(callee.name) in raw
    )


def calls_into(profile: Profile, wanted: Callable[[str], bool]) -> dict[str, int]:
    """Calls into each function ``wanted`` accepts (by ``function_of`` name), from callers
    it does not accept, summed over the parts: ``realloc`` into ``malloc`` or ``operator
    new`` into ``malloc`` is not counted again, nor is a recursion."""
    counts: dict[str, int] = defaultdict(int)
    for part in profile.parts:
        for (caller, callee), arc in part.calls.items():
            name = function_of(callee.name)
            if wanted(name) and not wanted(function_of(caller.name)):
                counts[name] += arc.count
    return dict(counts)


# --- one window ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    """One counted window of one side: its requests and what its dumps say (totals over
    the window, not per request: ``per_request`` divides), its functions under the names
    shown (``naming``: JIT code named, code without symbols held by a named caller)."""

    requests: int
    instructions: int
    allocations: int  # every allocation once, libc's and the runtime's own
    runtime_allocations: Mapping[str, int]
    processes: int
    exclusive: Mapping[Function, int]
    inclusive: Mapping[Function, int]
    stacks: Mapping[str, int] = field(default_factory=dict)  # with the callers kept
    libc_allocations: int = 0  # libc's allocators and operator new alone
    own: Mapping[Function, int] = field(default_factory=dict)  # source frames (``naming``)
    kinds: Mapping[Function, str] = field(default_factory=dict)
    unnamed: Mapping[str, str] = field(default_factory=dict)  # object's label -> its path
    maps: int = 0  # processes whose perf map named their JIT code
    # a source frame's own cost by the function that ran it (``naming``): (source, function)
    own_by: Mapping[tuple[Function, Function], int] = field(default_factory=dict)

    def per_request(self, total: int | float) -> float:
        return total / self.requests if self.requests else 0.0

    @property
    def instructions_per_req(self) -> float:
        return self.per_request(self.instructions)

    @property
    def allocs_per_req(self) -> float:
        return self.per_request(self.allocations)


def window_of(
    profile: Profile,
    requests: int,
    *,
    callers: int = 0,
    maps: Mapping[int, PerfMap] | None = None,
) -> Window:
    """The figures of a window's dumps (``profile``: every dump of the window) for
    ``requests`` requests; ``callers``: the ``--separate-callers`` depth it ran with (0:
    none, so no stacks, and inclusive cost from the call arcs); ``maps``: the perf maps
    of its processes, by pid (JIT code named)."""
    parts = [part for part in profile.parts if EVENT in part.events]
    named = name_window(parts, maps or {}, callers, EVENT)
    total = sum(named.exclusive.values())
    stacks = dict(named.stacks)
    inclusive = inclusive_of(stacks, named.frames) if callers else arc_inclusive(named)
    libc = sum(calls_into(profile, is_allocator).values())
    runtime = calls_into(profile, lambda name: name in RUNTIME_ALLOCATORS)
    pids = {part.pid for part in profile.parts}
    return Window(
        requests=requests,
        instructions=total,
        allocations=libc + sum(runtime.values()) - on_behalf(profile),
        libc_allocations=libc,
        runtime_allocations=runtime,
        processes=len(pids),
        exclusive=dict(named.exclusive),
        inclusive=inclusive,
        stacks=stacks,
        own=dict(named.own),
        own_by=dict(named.own_by),
        kinds=dict(named.kinds),
        unnamed=dict(named.unnamed),
        maps=sum(1 for pid in pids if pid is not None and pid in (maps or {})),
    )


def inclusive_of(
    stacks: Mapping[str, int], functions: Mapping[str, Function]
) -> dict[Function, int]:
    """Inclusive instructions per function from exact stacks: each stack's cost counted
    once per distinct function on it, so a recursion is not counted twice."""
    inclusive: dict[Function, int] = defaultdict(int)
    for stack, cost in stacks.items():
        for text in set(stack.split(";")) - {DEEPER}:
            inclusive[functions.get(text, ("", text))] += cost
    return dict(inclusive)


def arc_inclusive(named: Named) -> dict[Function, int]:
    """Inclusive instructions per function from the call arcs: the incoming arcs' cost (a
    function nobody called in the window: its own cost and its outgoing arcs). Exact
    unless the function is on a cycle of calls through others (a recursion; a runtime's
    dispatch): those counted a nested call again, and are left out (not known)."""
    incoming: dict[Function, int] = defaultdict(int)
    outgoing: dict[Function, int] = defaultdict(int)
    for (source, target), cost in named.arcs.items():
        incoming[target] += cost
        outgoing[source] += cost
    functions = (set(named.exclusive) | named.called | set(outgoing)) - named.cyclic()
    return {
        f: incoming[f] if f in named.called else named.exclusive.get(f, 0) + outgoing[f]
        for f in functions
    }
