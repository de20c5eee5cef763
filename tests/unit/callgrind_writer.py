"""A callgrind file writer for the tests: the oracle the parser's hypothesis tests read
back (the product reads dumps, it writes none). Writes every part of a ``Profile`` with or
without name compression (``(id) name``, per kind of name) and subposition compression
(``+N``, ``-N``, ``*``), as the format specification allows."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import TextIO

from pytest_webperf.profiling.callgrind import CallArc, FunctionKey, Part, Profile

_TABLE_OF = {
    "ob": "ob",
    "cob": "ob",
    "fl": "fl",
    "fi": "fl",
    "fe": "fl",
    "cfi": "fl",
    "cfn": "fn",
    "fn": "fn",
}


def dump(
    profile: Profile, out: TextIO, *, compress_names: bool = True, compress_positions: bool = True
) -> None:
    """Write ``profile`` in the callgrind format (KCachegrind and callgrind_annotate read
    it): for a per-request or differential profile to browse. Positions need
    ``keep_lines``; without them every cost is written at position 0."""
    out.write("# callgrind format\nversion: 1\ncreator: pytest-webperf\n")
    for part in profile.parts:
        _dump_part(part, out, compress_names, compress_positions)


def _header(part: Part, out: TextIO) -> None:
    for key, value in part.header.items():
        if key not in ("version", "creator"):
            out.write(f"{key}: {value}\n")
    for value in part.descriptions:
        out.write(f"desc: {value}\n")
    out.write(f"positions: {' '.join(part.positions)}\nevents: {' '.join(part.events)}\n")
    if part.summary is not None:
        out.write(f"summary: {' '.join(map(str, part.summary))}\n")


def _dump_part(part: Part, out: TextIO, compress_names: bool, compress_positions: bool) -> None:
    _header(part, out)
    ids: dict[str, dict[str, int]] = {"ob": {}, "fl": {}, "fn": {}}

    def name(spec: str, value: str) -> str:
        if not compress_names:
            return value
        table = ids[_TABLE_OF[spec]]
        if value in table:
            return f"({table[value]})"
        table[value] = len(table) + 1
        return f"({table[value]}) {value}"

    last = [0] * len(part.positions)

    def position(where: Sequence[int], move: bool) -> str:
        tokens = []
        for value, base in zip(where, last, strict=True):
            if not compress_positions:
                tokens.append(str(value))
            elif value == base:
                tokens.append("*")
            else:
                tokens.append(f"{value - base:+d}")
        if move:
            last[:] = where
        return " ".join(tokens)

    lines_of: dict[FunctionKey, list[tuple[str, tuple[int, ...], list[int]]]] = defaultdict(list)
    if part.lines:
        for (fn, file, where), cost in part.lines.items():
            lines_of[fn].append((file, where, cost))
    else:
        for fn, cost in part.self_cost.items():
            lines_of[fn].append((fn.file, (0,) * len(part.positions), cost))
    calls_of: dict[FunctionKey, list[tuple[FunctionKey, CallArc]]] = defaultdict(list)
    for (caller, callee), arc in part.calls.items():
        calls_of[caller].append((callee, arc))
    for fn in sorted(set(lines_of) | set(calls_of)):
        out.write(f"ob={name('ob', fn.obj)}\nfl={name('fl', fn.file)}\nfn={name('fn', fn.name)}\n")
        current = fn.file
        for file, where, cost in lines_of[fn]:
            if file != current:
                out.write(f"{'fe' if file == fn.file else 'fi'}={name('fi', file)}\n")
                current = file
            out.write(f"{position(where, True)} {' '.join(map(str, cost))}\n")
        if current != fn.file:
            out.write(f"fe={name('fe', fn.file)}\n")
        for callee, arc in calls_of[fn]:
            if callee.obj != fn.obj:
                out.write(f"cob={name('cob', callee.obj)}\n")
            if callee.file != fn.file:
                out.write(f"cfi={name('cfi', callee.file)}\n")
            out.write(f"cfn={name('cfn', callee.name)}\n")
            out.write(f"calls={arc.count} {position(last, False)}\n")
            out.write(f"{position(last, True)} {' '.join(map(str, arc.inclusive))}\n")
    totals = part.totals()
    out.write(f"totals: {' '.join(str(totals[e]) for e in part.events)}\n")
