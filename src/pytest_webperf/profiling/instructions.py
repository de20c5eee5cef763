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
  function on a cycle of calls through others (a recursion, a runtime's dispatch: its
  nested calls would count again, as ``callgrind_annotate --inclusive=yes`` counts them):
  not known for those; and a source frame's *own* (``naming``).
* **stacks**: with the callers kept, folded stacks in instructions (``root;...;leaf Ir``,
  the shape of the sampling profiles', so the flame graph draws them); a stack deeper than
  K frames is cut at the top and drawn under ``[deeper]``.

Names as callgrind writes them carry a recursion level (``fib'2``), a symbol version
(``malloc@@GLIBC_2.2.5``) and, with callers kept, the callers: ``naming.function_of`` is
the one reading of a name, and ``naming`` names JIT code from the processes' perf maps
and shows code without symbols under its nearest named caller. A function is known by its
object's (or source file's) label and its name, so the base, built by ``git archive`` in
another directory, and the change name it alike.

``diff`` compares two sides over their repetitions: per function, the change of exclusive
(a source frame's own) instructions per request B - A, and whether it is named as changed
(``named``: every repetition of B beyond every repetition of A, by more than twice either
side's own range); ranked the user's code first, then libraries', then the runtime's
(``rank``).
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
from typing import Any

from pytest_webperf.profiling import frames
from pytest_webperf.profiling.callgrind import Profile
from pytest_webperf.profiling.naming import (
    DEEPER,
    Function,
    Named,
    function_of,
    is_held,
    name_window,
)
from pytest_webperf.profiling.perfmap import PerfMap
from pytest_webperf.stats.ratio import mean

EVENT = "Ir"
MIN_SHARE = 1e-3  # a function is tested when it has this share of either side's instructions
MIN_CHANGE = 1e-4  # ... and named when its change is at least this share of the base's total
TOP = 25  # functions kept in the profile, ranked by their change
LEAD = 0.05  # a named change this share of the largest one is ranked by whose code it is
STACK_SHARE = 1e-5  # folded stacks below this share of a side's total are merged
OTHER = "[other stacks]"

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


# --- two sides -----------------------------------------------------------------------------


@dataclass(frozen=True)
class FunctionChange:
    """One function's instructions per request, A and B (means over the pairs): exclusive,
    inclusive and, for a source frame (``naming``), its own; the range of its change over
    the pairs."""

    function: Function
    base_exclusive: float
    change_exclusive: float
    base_inclusive: float | None  # None: not known (a cycle of calls, and no stacks)
    change_inclusive: float | None
    low: float | None  # the smallest and largest change of a pair; None: no pair
    high: float | None
    credible: bool  # named as changed (``diff``'s rule)
    kind: str = frames.USER
    own: tuple[float, float] | None = None  # A's and B's own cost: a source frame's

    @property
    def change(self) -> float:
        return self.change_exclusive - self.base_exclusive

    @property
    def change_inclusive_delta(self) -> float | None:
        if self.change_inclusive is None or self.base_inclusive is None:
            return None
        return self.change_inclusive - self.base_inclusive

    @property
    def figure(self) -> float:
        """The change it is ranked and named by: its own for a source frame, else its
        exclusive."""
        return self.change if self.own is None else self.own[1] - self.own[0]

    def to_dict(self) -> dict[str, Any]:
        found = {
            "function": label(self.function),
            "kind": self.kind,
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
        if self.own is not None:
            found.update(base_own_ir=self.own[0], change_own_ir=self.own[1], own_ir=self.figure)
        if is_held(self.function[1]):
            found["unnamed"] = self.function[0]  # the object without symbols
        return found


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
    """Per function, B - A instructions per request over ``pairs`` of windows (``(a, b)``
    each), ranked (``rank``): named changes first (``named``, on a source frame's own
    cost, else on the exclusive), the user's code before libraries before the runtime
    among those that matter (``LEAD``), then by size."""
    usable = [(a, b) for a, b in pairs if a.requests > 0 and b.requests > 0]
    if not usable:
        return Diff((), 0, 0, 0.0, 0.0)
    base_total = mean([a.instructions_per_req for a, _ in usable])
    change_total = mean([b.instructions_per_req for _, b in usable])
    functions = {f for a, b in usable for f in (*a.exclusive, *b.exclusive, *a.own, *b.own)}
    sources = {f for a, b in usable for f in (*a.own, *b.own)}

    def side(function: Function, index: int, figures: str = "exclusive") -> list[float]:
        windows = [pair[index] for pair in usable]
        return [w.per_request(getattr(w, figures).get(function, 0)) for w in windows]

    def inclusive(function: Function, index: int) -> float | None:
        windows = [pair[index] for pair in usable]
        if any(function in w.exclusive and function not in w.inclusive for w in windows):
            return None  # on a cycle of calls: not known from the arcs
        return mean(side(function, index, "inclusive"))

    largest = max(base_total, change_total)
    tested = [
        f
        for f in functions
        if max(mean(side(f, i, m)) for i in (0, 1) for m in ("exclusive", "own"))
        >= MIN_SHARE * largest
    ]
    changes = []
    for function in tested:
        a, b = side(function, 0), side(function, 1)
        own = (side(function, 0, "own"), side(function, 1, "own"))
        judged = own if function in sources else (a, b)
        deltas = [y - x for x, y in zip(*judged, strict=True)]
        changes.append(
            FunctionChange(
                function,
                mean(a),
                mean(b),
                inclusive(function, 0),
                inclusive(function, 1),
                min(deltas),
                max(deltas),
                named(*judged, base_total),
                kind=next(
                    (w.kinds[function] for p in usable for w in p if function in w.kinds), ""
                ),
                own=(mean(own[0]), mean(own[1])) if function in sources else None,
            )
        )
    ranked = rank(changes)
    return Diff(tuple(ranked[:TOP]), len(tested), len(usable), base_total, change_total)


def kind_of(pairs: Sequence[tuple[Window, Window]], function: Function) -> str:
    """Whose code ``function`` is, as the windows that hold it say."""
    return next((w.kinds[function] for p in pairs for w in p if function in w.kinds), "")


def rank(changes: Sequence[FunctionChange]) -> list[FunctionChange]:
    """Named changes first; among them, those of at least ``LEAD`` of the largest named
    change by whose code they are (the user's, a library's, the runtime's), the rest
    after; then by size."""
    largest = max((abs(c.figure) for c in changes if c.credible), default=0.0)

    def key(c: FunctionChange) -> tuple[bool, int, float, str]:
        leads = c.credible and abs(c.figure) >= LEAD * largest
        order = frames.kind_rank(c.kind) if leads else len(frames.RANK)
        return (not c.credible, order, -abs(c.figure), label(c.function))

    return sorted(changes, key=key)


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
