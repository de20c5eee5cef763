"""A counted window's functions under the names a reader is shown (pure: no I/O): JIT code
named from its process's perf map, code without symbols held by its nearest named caller,
and each Python or JavaScript function's own cost.

* **JIT code.** Callgrind names code no ELF object holds by its address in ``???``
  (``0x000000000d0646c0``): the entry of a V8 function's compiled code, or of one of
  CPython 3.12's perf trampolines (one per Python function, through which every call of
  it runs: ``-X perf``). The process's perf map (``/tmp/perf-PID.map``, copied when the
  window is dumped) names it: ``render (app.js)``, ``(anonymous) app.js:9``,
  ``Handler.do_GET (server.py)`` (``perfmap.jit_function``).
* **Never a bare address.** Code with no name at all (an address in a library without
  symbols, ``0x0000000000004970`` in ``libz.so.1.2.13``; JIT code the map does not hold)
  is never shown alone: it is shown under its nearest named caller, as that caller's
  unnamed callee, ``deflate (libz.so.1.2.13) > [unknown] (libz.so.1.2.13)`` (``held``),
  one frame for all the unnamed code of one object under one caller. With the callers
  kept, the nearest named frame above it in each stack; without, the caller of its
  largest incoming call (a library's static function has one caller, or few). Only code
  with no named caller at all is ``[unknown] (libz.so.1.2.13)`` alone.
* **Own cost.** A *source* frame is a function of the program's source: a Python or
  JavaScript function (named from the map, whoever's package it is in) or a function of
  the user's own binary. Its own cost is every cost whose innermost source frame it is:
  itself and the library and runtime code it calls (a Python function's bytecode runs in
  ``_PyEval_EvalFrameDefault``, its hashing in libcrypto), up to the next source frame.
  It is kept whole and by the function that ran it (``Named.own_by``): the differential
  tells a part that repeats exactly from one that wanders (CPython's allocator).
  That needs the stacks: without them (Node's, Go's, ``--webperf-profile=off``) a source
  frame's own cost is its exclusive cost and that of the code without symbols shown under
  it (a V8 function's baseline code and the builtins it calls, which Debian's libnode
  does not name), and its inclusive cost comes from the call arcs where no cycle of calls
  runs through it.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from pytest_webperf.profiling import frames
from pytest_webperf.profiling.callgrind import FunctionKey, Part
from pytest_webperf.profiling.perfmap import PerfMap, jit_function

Function = tuple[str, str]  # (object's or file's label, function name)
DEEPER = "[deeper]"  # the root of a stack cut at the callers' depth
_ADDRESS = re.compile(r"^0x[0-9a-fA-F]+(?: \[\w+\])?$")
_VERSION = re.compile(r"(@@?[A-Za-z][A-Za-z0-9_.]*)+$")


def _plain(piece: str) -> str:
    return _VERSION.sub("", piece).strip() if "@" in piece else piece.strip()


@lru_cache(maxsize=1 << 18)
def function_of(name: str) -> str:
    """The function a callgrind name is (its callers, recursion level and symbol
    version dropped): ``malloc@@GLIBC_2.2.5'serve'2`` -> ``malloc``."""
    return _plain(name.split("'", 1)[0])


@lru_cache(maxsize=1 << 18)
def context_frames(name: str) -> tuple[str, ...]:
    """``f'2'g'h`` (f at recursion level 2, called by g, called by h) -> ``("h", "g", "f")``,
    root first; a name without callers is one frame. A name with a quote of its own is
    split there too: callgrind gives no way to tell. (Cached: a dump with callers kept
    names each context once per part, and reads it again for every call into it.)"""
    found: list[str] = []
    for piece in name.split("'"):
        if found and piece.isdigit():
            continue  # the recursion level of the frame before
        found.append(_plain(piece))
    return tuple(found[::-1])


def object_name(obj: str) -> str:
    """An ELF object's file name: ``/usr/lib/x86_64-linux-gnu/libc.so.6`` -> ``libc.so.6``."""
    return obj.rsplit("/", 1)[-1]


def is_address(name: str) -> bool:
    """Whether callgrind named a function by its address: it found no symbol for it."""
    return _ADDRESS.match(name) is not None


@dataclass(frozen=True)
class Frame:
    """A function as shown: its object's (or source file's) label, its name, whose code
    it is (``frames``), whether it is a source frame, and whether folded stacks show it
    by its label (named from a perf map, or code without symbols under its caller)."""

    obj: str
    name: str
    kind: str
    source: bool = False
    jit: bool = False

    @property
    def function(self) -> Function:
        return (self.obj, self.name)

    @property
    def text(self) -> str:
        """How folded stacks show it: a native function by its name (as callgrind does),
        a JIT one by its label (two files may hold functions of one name)."""
        return frames.label(self.obj, self.name) if self.jit else self.name


@dataclass(frozen=True)
class Names:
    """How one process's functions are named: its perf map, if it wrote one."""

    table: PerfMap | None = None

    def frame(self, obj: str, name: str) -> Frame | None:
        """The frame shown for callgrind's function ``name`` in ``obj`` (its path); None
        when it has no name (an address without a symbol, JIT code the map does not
        hold)."""
        if not is_address(name):
            kind = frames.native_kind(obj)
            return Frame(object_name(obj), name, kind, source=kind == frames.USER)
        if object_name(obj) != "???" or self.table is None:
            return None
        symbol = self.table.lookup(int(name.split(maxsplit=1)[0], 16))
        if symbol is None:
            return None
        found = jit_function(symbol)
        if found is None:  # a runtime's stub: named, not the program's source
            return Frame("jit", symbol, frames.RUNTIME, jit=True)
        return Frame(found[0], found[1], found[2], source=True, jit=True)


def object_label(obj: str) -> str:
    """An object's label for code without symbols: code in no object is JIT code."""
    label = object_name(obj)
    return "jit" if label in ("???", "") else label


def unknown(obj: str, holder: Frame | None = None) -> Frame:
    """Code of ``obj`` without symbols, under its nearest named caller ``holder``
    (``deflate (libz.so.1.2.13) > [unknown] (libz.so.1.2.13)``), or alone when none is
    named (``[unknown] (libz.so.1.2.13)``)."""
    label = object_label(obj)
    name = frames.UNKNOWN if holder is None else frames.label(holder.obj, holder.name) + frames.HELD
    return Frame(label, name, frames.native_kind(obj), jit=True)


def is_held(name: str) -> bool:
    """Whether a function's name is that of code without symbols (held or alone)."""
    return name == frames.UNKNOWN or name.endswith(frames.HELD)


@dataclass
class Named:
    """A window's costs under the names shown, summed over its parts."""

    exclusive: dict[Function, int] = field(default_factory=lambda: defaultdict(int))
    own: dict[Function, int] = field(default_factory=lambda: defaultdict(int))
    # a source frame's own cost by the function that ran it: (source, function) -> cost
    own_by: dict[tuple[Function, Function], int] = field(default_factory=lambda: defaultdict(int))
    stacks: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    frames: dict[str, Function] = field(default_factory=dict)  # a stack's frame -> function
    kinds: dict[Function, str] = field(default_factory=dict)
    unnamed: dict[str, str] = field(default_factory=dict)  # object's label -> its path
    arcs: dict[tuple[Function, Function], int] = field(default_factory=lambda: defaultdict(int))
    called: set[Function] = field(default_factory=set)

    def note(self, frame: Frame) -> Frame:
        self.kinds[frame.function] = frame.kind
        return frame

    def cyclic(self) -> set[Function]:
        """The functions on a cycle of the call arcs (a recursion through other functions,
        real, or a runtime's dispatch between its builtins and compiled code): their
        inclusive cost from the arcs counts a nested call again (Tarjan's strongly
        connected components, iteratively)."""
        graph: dict[Function, list[Function]] = defaultdict(list)
        for source, target in self.arcs:
            graph[source].append(target)
        index: dict[Function, int] = {}
        low: dict[Function, int] = {}
        stack: list[Function] = []
        on_stack: set[Function] = set()
        found: set[Function] = set()
        for root in list(graph):
            if root in index:
                continue
            work = [(root, iter(graph[root]))]
            index[root] = low[root] = len(index)
            stack.append(root)
            on_stack.add(root)
            while work:
                node, edges = work[-1]
                step = next(edges, None)
                if step is None:
                    work.pop()
                    if work:
                        low[work[-1][0]] = min(low[work[-1][0]], low[node])
                    if low[node] == index[node]:
                        at = stack.index(node)
                        part = stack[at:]
                        del stack[at:]
                        on_stack.difference_update(part)
                        if len(part) > 1:
                            found.update(part)
                elif step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(graph[step])))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
        return found

    def held(self, obj: str, holder: Frame | None) -> Frame:
        """The frame of ``obj``'s code without symbols under ``holder``."""
        if object_name(obj) not in ("???", ""):
            self.unnamed[object_label(obj)] = obj
        return self.note(unknown(obj, holder))


class _PartNames:
    """One part's names: each callgrind name (``function_of``) as a frame, its object's
    path, and the holder of each unnamed function (without stacks)."""

    def __init__(self, part: Part, names: Names, into: Named, objects: Mapping[str, str]) -> None:
        self.into, self.names, self.objects = into, names, objects
        self.paths: dict[str, str] = {}
        self.frames: dict[str, Frame | None] = {}
        for key in part.self_cost:
            self._see(key, names)
        for caller, callee in part.calls:
            self._see(caller, names)
            self._see(callee, names)
        self.callers: dict[str, list[tuple[int, str]]] = defaultdict(list)
        index = part.events.index("Ir") if "Ir" in part.events else 0
        for (caller, callee), arc in part.calls.items():
            name, by = function_of(callee.name), function_of(caller.name)
            if name != by:
                self.callers[name].append((arc.inclusive[index], by))
        self.holders: dict[str, Frame | None] = {}

    def _see(self, key: FunctionKey, names: Names) -> None:
        name = function_of(key.name)
        if name not in self.frames:
            self.paths[name] = key.obj
            frame = names.frame(key.obj, name)
            self.frames[name] = None if frame is None else self.into.note(frame)

    def frame(self, name: str) -> Frame | None:
        """A function's frame; a caller only named in contexts by its object elsewhere
        in the window (callgrind names a context's callers by name alone)."""
        if name not in self.frames:
            self._see(FunctionKey(self.objects.get(name, ""), "", name), self.names)
        return self.frames[name]

    def holder(self, name: str) -> Frame | None:
        """The nearest named caller of an unnamed function by its incoming calls (the
        largest first), or None when none is named."""
        if name in self.holders:
            return self.holders[name]
        seen = {name}
        current, found = name, None
        while found is None:
            callers = sorted(self.callers.get(current, ()), reverse=True)
            current = next((by for _, by in callers if by not in seen), "")
            if not current:
                break
            seen.add(current)
            found = self.frame(current)
        self.holders[name] = found
        return found

    def shown(self, name: str) -> Frame:
        """The frame a function's cost is shown under: its own, or, unnamed, its
        object's under its nearest named caller."""
        frame = self.frame(name)
        if frame is not None:
            return frame
        return self.into.held(self.paths.get(name, ""), self.holder(name))


def name_window(
    parts: list[Part], maps: Mapping[int, PerfMap], callers: int, event: str = "Ir"
) -> Named:
    """Every part's costs under the names shown: exclusive (unnamed code in its holder),
    own (source frames), held, and with the callers kept (``callers`` > 0) the folded
    stacks; without, the call arcs between shown functions (inclusive cost)."""
    named = Named()
    objects = objects_of(parts)
    for part in parts:
        if event not in part.events:
            continue
        index = part.events.index(event)
        names = _PartNames(part, Names(maps.get(part.pid or -1)), named, objects)
        if callers:
            _stacks(part, index, names, named, callers)
        else:
            _arcs(part, index, names, named)
    return named


def objects_of(parts: list[Part]) -> dict[str, str]:
    """Each function name's object (its path), the first one seen."""
    found: dict[str, str] = {}
    for part in parts:
        for key in part.self_cost:
            found.setdefault(function_of(key.name), key.obj)
        for _, callee in part.calls:
            found.setdefault(function_of(callee.name), callee.obj)
    return found


def _stacks(part: Part, index: int, names: _PartNames, named: Named, callers: int) -> None:
    for key, cost in part.self_cost.items():
        value = cost[index]
        if not value:
            continue
        raw = context_frames(key.name)
        shown: list[Frame] = []
        holder: Frame | None = None
        for name in raw:
            frame = names.frame(name)
            if frame is not None:
                holder = frame
            else:  # unnamed code one frame per object under its holder, however deep
                frame = named.held(names.paths.get(name, key.obj), holder)
                if shown and shown[-1] == frame:
                    continue
            shown.append(frame)
        named.exclusive[shown[-1].function] += value
        source = next((f for f in reversed(shown) if f.source), None)
        if source is not None:
            named.own[source.function] += value
            named.own_by[(source.function, shown[-1].function)] += value
        texts = [f.text.replace(";", ",") for f in shown]
        for frame, text in zip(shown, texts, strict=True):
            named.frames.setdefault(text, frame.function)
        if len(raw) > callers:
            texts = [DEEPER, *texts]
        named.stacks[";".join(texts)] += value


def _arcs(part: Part, index: int, names: _PartNames, named: Named) -> None:
    for key, cost in part.self_cost.items():
        name = function_of(key.name)
        frame = names.shown(name)
        value = cost[index]
        named.exclusive[frame.function] += value
        # without stacks a source frame's own cost is its code's and that of the code
        # without symbols shown under it (a JavaScript function's builtins)
        owner = frame if frame.source else None
        if owner is None and names.frame(name) is None:
            owner = names.holder(name)
        if value and owner is not None and owner.source:
            named.own[owner.function] += value
            named.own_by[(owner.function, frame.function)] += value
    for (caller, callee), arc in part.calls.items():
        source = names.shown(function_of(caller.name)).function
        target = names.shown(function_of(callee.name)).function
        if source == target:
            continue
        named.arcs[(source, target)] += arc.inclusive[index]
        named.called.add(target)
