"""Callgrind output files (Valgrind's "Callgrind Format Specification", version 1), read in
pure Python: every part of a dump, each function's exclusive cost and every call arc's
count and inclusive cost.

What this reader relies on, and why, where the specification leaves room:

* A file holds one or more *parts*. A header line (``part:``, ``pid:``, ``thread:``,
  ``events:``, ``positions:``) that comes after body lines starts a new part, and the name
  compression tables are cleared with it (KCachegrind does the same, so no producer can
  rely on names carrying over). ``totals:`` looks like a header line but closes a part.
* Name compression ``(id) name`` / ``(id)`` has one table per *kind*: ``ob``/``cob`` share
  the object table, ``fl``/``fi``/``fe``/``cfi``/``cfl``/``jfi`` the file table,
  ``fn``/``cfn``/``jfn`` the function table (callgrind writes ``cfi=(164)`` for a file it
  named with ``fl=(164) ...``).
* A function is (object, file, name): the ``fl=`` file in force at ``fn=``. ``fi=``/``fe=``
  only change the file that *cost lines* belong to (inlined code); ``fn=`` resets it.
* A call's target object and file default to the caller's current object and current file
  (``cob=``/``cfi=`` are written only when they differ) and are reset after the call's
  cost line.
* Subpositions: ``+N``/``-N``/``*`` are relative to the previous cost line's position.
  Every cost line, a call's cost line included, moves that base; the target position on a
  ``calls=``/``jump=``/``jcnd=`` line is read relative to it but does not move it.
* Cost lines give exclusive cost; a call's cost line gives the call's inclusive cost.
  Callgrind writes calls still on the stack at dump time with ``calls=0`` and the cost they
  have so far, which is what makes inclusive cost from incoming arcs work for frames
  (``main``, an event loop) entered before the counters were zeroed.

Names are kept as callgrind writes them (``operator new(unsigned long)``, ``fib'2``,
``malloc@@GLIBC_2.2.5``, ``f'caller`` with ``--separate-callers``): what a name means is
``instructions.py``'s. The writer the tests read back lives with the tests.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

__all__ = [
    "CallArc",
    "CallgrindFormatError",
    "FunctionKey",
    "Part",
    "Profile",
    "parse",
    "parse_file",
]


class CallgrindFormatError(ValueError):
    """A line the format does not allow, with its number."""

    def __init__(self, line_number: int, message: str, line: str) -> None:
        super().__init__(f"line {line_number}: {message}: {line!r}")
        self.line_number = line_number


@dataclass(frozen=True, order=True)
class FunctionKey:
    """A function as callgrind identifies it: its ELF object, its source file, its name."""

    obj: str
    file: str
    name: str


@dataclass
class CallArc:
    """All calls from one function to another in one part: how many, and their inclusive
    cost. ``count`` is 0 for a call that was still running when the part was dumped."""

    count: int
    inclusive: list[int]


@dataclass
class Part:
    """One dump (one process, or one thread with ``--separate-threads=yes``)."""

    events: tuple[str, ...] = ()
    positions: tuple[str, ...] = ("line",)
    header: dict[str, str] = field(default_factory=dict)
    descriptions: list[str] = field(default_factory=list)
    summary: list[int] | None = None
    declared_totals: list[int] | None = None
    self_cost: dict[FunctionKey, list[int]] = field(default_factory=dict)
    calls: dict[tuple[FunctionKey, FunctionKey], CallArc] = field(default_factory=dict)
    # (function, file of the cost line, positions) -> exclusive cost; only with keep_lines
    lines: dict[tuple[FunctionKey, str, tuple[int, ...]], list[int]] = field(default_factory=dict)

    @property
    def pid(self) -> int | None:
        return int(self.header["pid"]) if "pid" in self.header else None

    @property
    def thread(self) -> int | None:
        return int(self.header["thread"]) if "thread" in self.header else None

    def totals(self) -> dict[str, int]:
        """The sum of every exclusive cost line, per event: what ``totals:`` should say."""
        sums = [0] * len(self.events)
        for cost in self.self_cost.values():
            for i, value in enumerate(cost):
                sums[i] += value
        return dict(zip(self.events, sums, strict=True))


@dataclass
class Profile:
    """Every part read from one or more files (of one or more processes)."""

    parts: list[Part] = field(default_factory=list)

    @property
    def events(self) -> tuple[str, ...]:
        names: dict[str, None] = {}
        for part in self.parts:
            names.update(dict.fromkeys(part.events))
        return tuple(names)

    def totals(self) -> dict[str, int]:
        sums: dict[str, int] = dict.fromkeys(self.events, 0)
        for part in self.parts:
            for name, value in part.totals().items():
                sums[name] += value
        return sums

    def extend(self, other: Profile) -> Profile:
        self.parts.extend(other.parts)
        return self


_HEADER_KEYS = (
    "version",
    "creator",
    "pid",
    "thread",
    "part",
    "cmd",
    "desc",
    "event",
    "events",
    "positions",
    "summary",
    "totals",
)
_STARTS_PART = frozenset({"pid", "thread", "part", "events", "positions"})
_TABLE_OF = {
    "ob": "ob",
    "cob": "ob",
    "fl": "fl",
    "fi": "fl",
    "fe": "fl",
    "cfi": "fl",
    "cfl": "fl",
    "jfi": "fl",
    "fn": "fn",
    "cfn": "fn",
    "jfn": "fn",
}
_SPEC = re.compile(r"^(ob|fl|fi|fe|fn|cob|cfi|cfl|cfn|jfi|jfn)=(.*)$")
_COMPRESSED = re.compile(r"^\((\d+)\)(?:\s(.*))?$")
_K = TypeVar("_K")


def _number(text: str) -> int:
    return int(text, 16) if text.startswith(("0x", "0X")) else int(text)


class _Reader:
    """The state machine of one file: current names, positions, the part being built."""

    def __init__(self, keep_lines: bool) -> None:
        self.keep_lines = keep_lines
        self.parts: list[Part] = []
        self.part = Part()
        self.in_body = False
        self.closed = False  # a totals: line was read: the next part header starts a part
        self.own_layout: set[str] = set()  # events:/positions: read in this part
        self.tables: dict[str, dict[int, str]] = {"ob": {}, "fl": {}, "fn": {}}
        self._reset_position()

    def _reset_position(self) -> None:
        self.obj = self.fn_file = self.file = ""
        self.fn: FunctionKey | None = None
        self.called_obj: str | None = None
        self.called_file: str | None = None
        self.called_fn: str | None = None
        self.pending_calls: int | None = None
        self.last: list[int] = [0] * len(self.part.positions)

    def _started(self) -> bool:
        return (
            self.in_body
            or bool(self.own_layout)
            or bool(self.part.header)
            or self.part.declared_totals is not None
        )

    def _new_part(self) -> None:
        if self._started():
            self.parts.append(self.part)
        # a new part inherits the event and position layout until it says otherwise
        self.part = Part(events=self.part.events, positions=self.part.positions)
        self.tables = {"ob": {}, "fl": {}, "fn": {}}
        self._reset_position()
        self.in_body = self.closed = False
        self.own_layout = set()

    def finish(self) -> list[Part]:
        if self.part.events and self._started():
            self.parts.append(self.part)
        return self.parts

    def name(self, spec: str, value: str, number: int, line: str) -> str:
        match = _COMPRESSED.match(value)
        if match is None:
            return value
        table = self.tables[_TABLE_OF[spec]]
        ident = int(match.group(1))
        if match.group(2) is not None:
            table[ident] = match.group(2)
            return match.group(2)
        if ident not in table:
            raise CallgrindFormatError(number, f"{spec} id ({ident}) used before defined", line)
        return table[ident]

    def positions(self, tokens: Sequence[str], number: int, line: str) -> list[int]:
        if len(tokens) < len(self.last):
            raise CallgrindFormatError(number, "fewer subpositions than 'positions:'", line)
        resolved = []
        for token, base in zip(tokens, self.last, strict=False):
            if token == "*":
                resolved.append(base)
            elif token[0] in "+-":
                resolved.append(base + int(token))
            else:
                resolved.append(_number(token))
        return resolved

    def header(self, key: str, value: str, number: int, line: str) -> None:
        if key in _STARTS_PART and (
            self.in_body or self.closed or key in self.part.header or key in self.own_layout
        ):
            self._new_part()
        if key in ("events", "positions"):
            self.own_layout.add(key)
        if key == "events":
            self.part.events = tuple(value.split())
        elif key == "positions":
            self.part.positions = tuple(value.split()) or ("line",)
            self.last = [0] * len(self.part.positions)
        elif key in ("summary", "totals"):
            costs = [_number(t) for t in value.split()]
            if key == "summary":
                self.part.summary = costs
            else:
                self.part.declared_totals = costs
                self.closed = True
        elif key == "desc":
            self.part.descriptions.append(value)
        elif key != "event":
            self.part.header[key] = value

    def spec(self, spec: str, value: str, number: int, line: str) -> None:
        name = self.name(spec, value, number, line)
        self.in_body = True
        if spec == "ob":
            self.obj = name
        elif spec == "fl":
            self.fn_file = self.file = name
        elif spec in ("fi", "fe"):
            self.file = name
        elif spec == "fn":
            self.file = self.fn_file
            self.fn = FunctionKey(self.obj, self.fn_file, name)
        elif spec == "cob":
            self.called_obj = name
        elif spec in ("cfi", "cfl"):
            self.called_file = name
        elif spec == "cfn":
            self.called_fn = name
        # jfi/jfn only name jump targets: read for their compression side effect

    def cost_line(self, tokens: list[str], number: int, line: str) -> None:
        if self.fn is None:
            raise CallgrindFormatError(number, "cost line before any fn=", line)
        if not self.part.events:
            raise CallgrindFormatError(number, "cost line before 'events:'", line)
        self.in_body = True
        npos = len(self.part.positions)
        where = self.positions(tokens[:npos], number, line)
        self.last = where
        try:
            values = [_number(t) for t in tokens[npos:]]
        except ValueError:
            raise CallgrindFormatError(number, "a cost is not a number", line) from None
        if len(values) > len(self.part.events):
            raise CallgrindFormatError(number, "more costs than events", line)
        values += [0] * (len(self.part.events) - len(values))
        if self.pending_calls is not None:
            self._add_call(values, number, line)
            return
        _add(self.part.self_cost, self.fn, values)
        if self.keep_lines:
            _add(self.part.lines, (self.fn, self.file, tuple(where)), values)

    def _add_call(self, inclusive: list[int], number: int, line: str) -> None:
        assert self.fn is not None and self.pending_calls is not None
        if self.called_fn is None:
            raise CallgrindFormatError(number, "calls= without cfn=", line)
        callee = FunctionKey(
            self.obj if self.called_obj is None else self.called_obj,
            self.file if self.called_file is None else self.called_file,
            self.called_fn,
        )
        arc = self.part.calls.get((self.fn, callee))
        if arc is None:
            self.part.calls[(self.fn, callee)] = CallArc(self.pending_calls, inclusive)
        else:
            arc.count += self.pending_calls
            arc.inclusive = [a + b for a, b in zip(arc.inclusive, inclusive, strict=True)]
        self.pending_calls = None
        self.called_obj = self.called_file = None

    def line(self, raw: str, number: int) -> None:
        line = raw.rstrip("\r\n")
        if not line.strip() or line.startswith("#"):
            return
        if self.pending_calls is not None and not _is_cost_line(line):
            raise CallgrindFormatError(number, "calls= must be followed by a cost line", line)
        if _is_cost_line(line):
            self.cost_line(line.split(), number, line)
            return
        spec = _SPEC.match(line)
        if spec is not None:
            self.spec(spec.group(1), spec.group(2).strip(), number, line)
            return
        if line.startswith("calls="):
            tokens = line[6:].split()
            if not tokens:
                raise CallgrindFormatError(number, "calls= without a count", line)
            self.pending_calls = _number(tokens[0])
            self.positions(tokens[1:], number, line)  # target: checked, not kept
            return
        if line.startswith(("jump=", "jcnd=")):
            return  # jumps (--collect-jumps=yes) carry no cost
        key, sep, value = line.partition(":")
        if sep and key in _HEADER_KEYS:
            self.header(key, value.strip(), number, line)
            return
        raise CallgrindFormatError(number, "not a callgrind line", line)


def _is_cost_line(line: str) -> bool:
    first = line[0]
    return first.isdigit() or first in "+-*"


def _add(table: dict[_K, list[int]], key: _K, values: list[int]) -> None:
    have = table.get(key)
    if have is None:
        table[key] = list(values)
    else:
        for i, value in enumerate(values):
            have[i] += value


def parse(lines: Iterable[str], *, keep_lines: bool = False) -> Profile:
    """Every part of one callgrind file, given as lines (a file object works)."""
    reader = _Reader(keep_lines)
    for number, raw in enumerate(lines, start=1):
        reader.line(raw, number)
    return Profile(reader.finish())


def parse_file(path: str | Path, *, keep_lines: bool = False) -> Profile:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return parse(handle, keep_lines=keep_lines)
