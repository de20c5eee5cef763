"""What a counted window's callgrind dumps say, per request (pure: no I/O).

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
  recursion through other functions (an interpreter's eval loop: counted again per level,
  as ``callgrind_annotate --inclusive=yes`` does).
* **stacks**: with the callers kept, folded stacks in instructions (``root;...;leaf Ir``,
  the shape of the sampling profiles', so the flame graph draws them); a stack deeper than
  K frames is cut at the top and drawn under ``[deeper]``.

Names as callgrind writes them carry a recursion level (``fib'2``), a symbol version
(``malloc@@GLIBC_2.2.5``) and, with callers kept, the callers: ``function_of`` is the one
reading of a name. A function is known by its object's file name and its name, so the
base, built by ``git archive`` in another directory, and the change name it alike.

``diff`` compares two sides over their repetitions: per function, the change of exclusive
instructions per request B - A, and whether it is named as changed (``named``: every
repetition of B beyond every repetition of A, by more than twice either side's own range).
Counts are not samples: a deterministic server's repetitions agree exactly, so a change
of one instruction per request is real; a runtime whose own threads run in the window
(Go's scheduler, V8's compiler) wanders, and its functions are named only when the change
dwarfs the wandering. A t-interval over two pairs (one degree of freedom) would name
nothing at all.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from pytest_webperf.profiling.callgrind import Profile
from pytest_webperf.stats.ratio import mean

EVENT = "Ir"
MIN_SHARE = 1e-3  # a function is tested when it has this share of either side's instructions
MIN_CHANGE = 1e-4  # ... and named when its change is at least this share of the base's total
TOP = 25  # functions kept in the profile, ranked by their change
STACK_SHARE = 1e-5  # folded stacks below this share of a side's total are merged
DEEPER = "[deeper]"  # the root of a stack cut at the callers' depth
OTHER = "[other stacks]"

_VERSION = re.compile(r"(@@?[A-Za-z][A-Za-z0-9_.]*)+$")

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


# --- names ---------------------------------------------------------------------------------


def _plain(piece: str) -> str:
    return _VERSION.sub("", piece).strip() if "@" in piece else piece.strip()


def canonical_name(name: str) -> str:
    """``malloc@@GLIBC_2.2.5`` -> ``malloc``, ``fib'2`` -> ``fib``: one name per function
    across symbol versions and recursion levels (a name without callers)."""
    return _plain(name.split("'", 1)[0])


@lru_cache(maxsize=1 << 18)
def context_frames(name: str) -> tuple[str, ...]:
    """``f'2'g'h`` (f at recursion level 2, called by g, called by h) -> ``("h", "g", "f")``,
    root first; a name without callers is one frame. A name with a quote of its own is
    split there too: callgrind gives no way to tell. (Cached: a dump with callers kept
    names each context once per part, and reads it again for every call into it.)"""
    frames: list[str] = []
    for piece in name.split("'"):
        if frames and piece.isdigit():
            continue  # the recursion level of the frame before
        frames.append(_plain(piece))
    return tuple(frames[::-1])


@lru_cache(maxsize=1 << 18)
def function_of(name: str) -> str:
    """The function a callgrind name is (its callers and recursion level dropped)."""
    return canonical_name(name)


def is_allocator(function: str) -> bool:
    """libc's allocators and every ``operator new``/``new[]`` overload (sized, aligned,
    nothrow), by a function's name (``function_of``)."""
    return function in LIBC_ALLOCATORS or _OPERATOR_NEW.match(function) is not None


def object_name(obj: str) -> str:
    """An ELF object's file name: ``/usr/lib/x86_64-linux-gnu/libc.so.6`` -> ``libc.so.6``."""
    return obj.rsplit("/", 1)[-1]


Function = tuple[str, str]  # (object's file name, function name)


def label(function: Function) -> str:
    """``hash_work (server)``: how reports name a function."""
    obj, name = function
    return f"{name} ({obj})" if obj else name


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
    the window, not per request: ``per_request`` divides)."""

    requests: int
    instructions: int
    allocations: int  # every allocation once, libc's and the runtime's own
    runtime_allocations: Mapping[str, int]
    processes: int
    exclusive: Mapping[Function, int]
    inclusive: Mapping[Function, int]
    stacks: Mapping[str, int] = field(default_factory=dict)  # with the callers kept
    libc_allocations: int = 0  # libc's allocators and operator new alone

    def per_request(self, total: int | float) -> float:
        return total / self.requests if self.requests else 0.0

    @property
    def instructions_per_req(self) -> float:
        return self.per_request(self.instructions)

    @property
    def allocs_per_req(self) -> float:
        return self.per_request(self.allocations)


def window_of(profile: Profile, requests: int, *, callers: int = 0) -> Window:
    """The figures of a window's dumps (``profile``: every dump of the window) for
    ``requests`` requests; ``callers``: the ``--separate-callers`` depth it ran with (0:
    none, so no stacks, and inclusive cost from the call arcs)."""
    exclusive: dict[Function, int] = defaultdict(int)
    total = 0
    for part in profile.parts:
        if EVENT not in part.events:
            continue
        index = part.events.index(EVENT)
        for key, cost in part.self_cost.items():
            exclusive[(object_name(key.obj), function_of(key.name))] += cost[index]
            total += cost[index]
    stacks = folded(profile, callers) if callers else {}
    inclusive = (
        inclusive_of(stacks, objects_of(profile)) if stacks else arc_inclusive(profile, exclusive)
    )
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
        exclusive=dict(exclusive),
        inclusive=inclusive,
        stacks=stacks,
    )


def folded(profile: Profile, callers: int) -> dict[str, int]:
    """Exclusive instructions per call context as folded stacks of function names, root
    first (the run kept ``callers`` callers: a context that long may be cut, and goes
    under ``[deeper]``)."""
    stacks: dict[str, int] = defaultdict(int)
    for part in profile.parts:
        if EVENT not in part.events:
            continue
        index = part.events.index(EVENT)
        for key, cost in part.self_cost.items():
            if not cost[index]:
                continue
            frames = [f.replace(";", ",") for f in context_frames(key.name)]
            if len(frames) > callers:
                frames = [DEEPER, *frames]
            stacks[";".join(frames)] += cost[index]
    return dict(stacks)


def objects_of(profile: Profile) -> dict[str, str]:
    """Each function name's object (callgrind names a context's callers by name only)."""
    found: dict[str, str] = {}
    for part in profile.parts:
        for key in part.self_cost:
            found.setdefault(function_of(key.name), object_name(key.obj))
        for _, callee in part.calls:
            found.setdefault(function_of(callee.name), object_name(callee.obj))
    return found


def inclusive_of(stacks: Mapping[str, int], objects: Mapping[str, str]) -> dict[Function, int]:
    """Inclusive instructions per function from exact stacks: each stack's cost counted
    once per distinct function on it, so a recursion is not counted twice."""
    inclusive: dict[Function, int] = defaultdict(int)
    for stack, cost in stacks.items():
        for name in set(stack.split(";")) - {DEEPER}:
            inclusive[(objects.get(name, ""), name)] += cost
    return dict(inclusive)


def arc_inclusive(profile: Profile, exclusive: Mapping[Function, int]) -> dict[Function, int]:
    """Inclusive instructions per function from the call arcs: the incoming arcs' cost (a
    function nobody called in the window: its own cost and its outgoing arcs). Exact
    unless the function is in a recursion through others (then counted per level)."""
    incoming: dict[Function, int] = defaultdict(int)
    outgoing: dict[Function, int] = defaultdict(int)
    called: set[Function] = set()
    for part in profile.parts:
        if EVENT not in part.events:
            continue
        index = part.events.index(EVENT)
        for (caller, callee), arc in part.calls.items():
            source = (object_name(caller.obj), function_of(caller.name))
            target = (object_name(callee.obj), function_of(callee.name))
            if source == target:
                continue
            incoming[target] += arc.inclusive[index]
            outgoing[source] += arc.inclusive[index]
            called.add(target)
    functions = set(exclusive) | called | set(outgoing)
    return {f: incoming[f] if f in called else exclusive.get(f, 0) + outgoing[f] for f in functions}


# --- two sides -----------------------------------------------------------------------------


@dataclass(frozen=True)
class FunctionChange:
    """One function's instructions per request, A and B (means over the pairs), and the
    range of its exclusive change over the pairs."""

    function: Function
    base_exclusive: float
    change_exclusive: float
    base_inclusive: float
    change_inclusive: float
    low: float | None  # the smallest and largest change of a pair; None: no pair
    high: float | None
    credible: bool  # named as changed (``diff``'s rule)

    @property
    def change(self) -> float:
        return self.change_exclusive - self.base_exclusive

    @property
    def change_inclusive_delta(self) -> float:
        return self.change_inclusive - self.base_inclusive

    def to_dict(self) -> dict[str, Any]:
        return {
            "function": label(self.function),
            "change_ir": self.change,
            "low_ir": self.low,
            "high_ir": self.high,
            "base_ir": self.base_exclusive,
            "change_side_ir": self.change_exclusive,
            "base_inclusive_ir": self.base_inclusive,
            "change_inclusive_ir": self.change_inclusive,
            "change_total_ir": self.change_inclusive_delta,
            "credible": self.credible,
        }


@dataclass(frozen=True)
class Diff:
    """The functions ranked by the size of their change (named ones first), and the
    totals they add up to."""

    changes: tuple[FunctionChange, ...]
    tested: int
    pairs: int
    base_total: float  # instructions per request, mean over the pairs
    change_total: float


def named(a: Sequence[float], b: Sequence[float], total: float) -> bool:
    """Whether a function's exclusive instructions per request changed from A (``a``: one
    value per repetition) to B, by the rule for counts: two repetitions a side at least,
    every repetition of B beyond every one of A, by more than twice either side's own
    range, and by at least ``MIN_CHANGE`` of the total (or half an instruction). A
    deterministic server's repetitions agree exactly, so any such change is named; a
    function whose count wanders between fresh processes (a collector's, a scheduler's)
    is named only when the change dwarfs its wandering."""
    if min(len(a), len(b)) < 2:
        return False
    change = mean(b) - mean(a)
    separated = min(b) > max(a) if change > 0 else max(b) < min(a)
    spread = max(max(a) - min(a), max(b) - min(b))
    return separated and abs(change) > 2 * spread and abs(change) >= max(MIN_CHANGE * total, 0.5)


def exclusive_changes(pairs: Sequence[tuple[Window, Window]]) -> dict[Function, float]:
    """Every function's change of exclusive instructions per request, B - A, mean over
    the pairs: they add up to the change of the total (exclusive cost is exact)."""
    usable = [(a, b) for a, b in pairs if a.requests > 0 and b.requests > 0]
    functions = {f for a, b in usable for f in (*a.exclusive, *b.exclusive)}
    return {
        f: mean(
            [
                b.per_request(b.exclusive.get(f, 0)) - a.per_request(a.exclusive.get(f, 0))
                for a, b in usable
            ]
        )
        for f in functions
    }


def diff(pairs: Sequence[tuple[Window, Window]]) -> Diff:
    """Per function, B - A exclusive instructions per request over ``pairs`` of windows
    (``(a, b)`` each), ranked: named changes first (``named``), then by size."""
    usable = [(a, b) for a, b in pairs if a.requests > 0 and b.requests > 0]
    if not usable:
        return Diff((), 0, 0, 0.0, 0.0)
    base_total = mean([a.instructions_per_req for a, _ in usable])
    change_total = mean([b.instructions_per_req for _, b in usable])
    functions = {f for a, b in usable for f in (*a.exclusive, *b.exclusive)}

    def side(function: Function, index: int, inclusive: bool = False) -> list[float]:
        windows = [pair[index] for pair in usable]
        return [
            w.per_request((w.inclusive if inclusive else w.exclusive).get(function, 0))
            for w in windows
        ]

    largest = max(base_total, change_total)
    tested = [
        f for f in functions if max(mean(side(f, 0)), mean(side(f, 1))) >= MIN_SHARE * largest
    ]
    changes = []
    for function in tested:
        a, b = side(function, 0), side(function, 1)
        deltas = [y - x for x, y in zip(a, b, strict=True)]
        changes.append(
            FunctionChange(
                function,
                mean(a),
                mean(b),
                mean(side(function, 0, inclusive=True)),
                mean(side(function, 1, inclusive=True)),
                min(deltas),
                max(deltas),
                named(a, b, base_total),
            )
        )
    changes.sort(key=lambda c: (not c.credible, -abs(c.change), label(c.function)))
    return Diff(tuple(changes[:TOP]), len(tested), len(usable), base_total, change_total)


def merged_stacks(windows: Sequence[Window]) -> tuple[dict[str, int], int]:
    """A side's stacks over its windows, and their requests; stacks carrying less than
    ``STACK_SHARE`` of the side's instructions are merged into ``[other stacks]`` (an
    interpreter's thousands of contexts would weigh megabytes in a report)."""
    merged: dict[str, int] = defaultdict(int)
    for window in windows:
        for stack, cost in window.stacks.items():
            merged[stack] += cost
    total = sum(merged.values())
    kept: dict[str, int] = {}
    for stack, cost in merged.items():
        key = stack if cost >= STACK_SHARE * total else OTHER
        kept[key] = kept.get(key, 0) + cost
    return kept, sum(w.requests for w in windows)
