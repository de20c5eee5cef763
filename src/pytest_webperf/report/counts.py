"""A counted measurement (``count=True``) as text for every renderer: its figures per
request over its repetitions (each side's in an A/B run), how they were counted, and what
counting cost (the repetitions' wall time, Valgrind's slowdown); and its differential
profile's functions in instructions.

Reads the report's dict (``repetitions[].counts``, ``profile``); decides nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pytest_webperf.report.table import MISSING, Entry, id_concurrency, number, repetitions

Rep = Mapping[str, Any]

FIGURES = (
    ("instructions_per_req", "instructions", 1),
    ("allocs_per_req", "allocations", 3),
    ("syscalls_per_req", "syscalls", 3),
    ("ctx_switches_per_req", "ctx switches", 3),
)


def reader(key: str) -> Callable[[Rep], float | None]:
    """A repetition's counted figure (``instructions_per_req``, ...), None when it has
    none (a timed repetition)."""

    def read(rep: Rep) -> float | None:
        found = rep.get("counts")
        return number(found.get(key)) if isinstance(found, Mapping) else None

    return read


def counts_of(reps: Sequence[Rep]) -> list[Mapping[str, Any]]:
    found = [r.get("counts") for r in reps]
    return [c for c in found if isinstance(c, Mapping)]


def _span(values: Sequence[float], decimals: int) -> str:
    """``14,312.6`` when the repetitions agree, else ``14,310.7..14,313.7 (0.021 %)``."""
    if not values:
        return MISSING
    low, high = min(values), max(values)
    if high - low < 0.5 * 10**-decimals:
        return f"{low:,.{decimals}f}"
    apart = f" ({(high - low) / low:.3%})" if low else ""
    return f"{low:,.{decimals}f}..{high:,.{decimals}f}{apart}"


WIDE = 0.10  # an unjudged figure spread wider than this over the repetitions: left out


def judged(entry: Entry) -> frozenset[str] | None:
    """The metrics the entry's checks judged; None when it has no checks (nothing to tell
    judged figures from others)."""
    verdict = entry.get("verdict")
    found = verdict.get("checks") if isinstance(verdict, Mapping) else None
    if not isinstance(found, list) or not found:
        return None
    return frozenset(str(c.get("metric")) for c in found if isinstance(c, Mapping))


def _wide(values: Sequence[float]) -> bool:
    low, high = min(values, default=0.0), max(values, default=0.0)
    return low > 0 and (high - low) / low > WIDE


def figures(
    counts: Sequence[Mapping[str, Any]],
    checked: frozenset[str] | None = None,
    verbose: bool = True,
) -> str:
    """``instructions 14,312.6, allocations 0.002, syscalls 3.007 (perf stat ...), ...`` per
    request, over the repetitions given. A figure no check judged (of ``checked``) says
    so; unless ``verbose``, one that is also spread wide over the repetitions (a C
    server's context switches: ``1.121..13.551``) is left out, as it tells nothing."""
    parts = []
    for key, name, decimals in FIGURES:
        values = [v for c in counts if (v := number(c.get(key))) is not None]
        unjudged = checked is not None and key not in checked
        if not values and key == "syscalls_per_req":
            parts.append("syscalls not counted (no check reads them)")
        if not values or (unjudged and not verbose and _wide(values)):
            continue
        text = f"{name}{' (not judged)' if unjudged and values else ''} {_span(values, decimals)}"
        if key == "syscalls_per_req":
            tools = sorted({str(c["syscall_tool"]) for c in counts if c.get("syscall_tool")})
            text += f" ({', '.join(tools)})" if tools else " (not counted)"
        parts.append(text)
    return ", ".join(parts) + " per request"


def cost(counts: Sequence[Mapping[str, Any]], verbose: bool = False) -> str:
    """What counting cost: the repetitions' wall time, Valgrind's slowdown; ``verbose``:
    where the time went, phase by phase over the repetitions (``phases``)."""
    runs = [v for c in counts if (v := number(c.get("run_s"))) is not None]
    slow = [v for c in counts if (v := number(c.get("slowdown"))) is not None]
    wall = [v for c in counts if (v := number(c.get("wall_slowdown"))) is not None]
    longest = max(runs, default=0.0)
    text = f"{len(counts)} repetition(s) took {sum(runs):,.1f} s ({longest:,.1f} s at most)"
    if slow:
        text += f"; Valgrind's slowdown {_range(slow)}x in CPU per request"
    if wall:
        text += f", {_range(wall)}x in wall time"
    spent: dict[str, float] = {}
    for c in counts:
        phases = c.get("phases")
        for phase, seconds in phases.items() if isinstance(phases, Mapping) else ():
            if (n := number(seconds)) is not None:
                spent[str(phase)] = spent.get(str(phase), 0.0) + n
    if verbose and spent:
        text += "; in all: " + ", ".join(f"{p} {n:,.1f} s" for p, n in spent.items())
    return text


def _range(values: Sequence[float]) -> str:
    low, high = min(values), max(values)
    return f"{low:,.0f}" if round(low) == round(high) else f"{low:,.0f}-{high:,.0f}"


def concurrency_line(entry: Entry) -> str | None:
    """Why a counted measurement ran at another concurrency than its test id names."""
    ran, named = number(entry.get("concurrency")), id_concurrency(entry)
    if ran is None or named is None or int(ran) == named:
        return None
    return (
        f"ran {ran:,.0f} connection{'' if ran == 1 else 's'}, not the {named:,} of its id: "
        "a counted window sends one request at a time unless the call says concurrency= "
        "(requests in parallel make counts depend on timing)"
    )


def lines(entries: Sequence[Entry], verbose: bool = False) -> list[str]:
    """Per counted measurement: what it counted, each side's figures, what it cost, and
    the notes of its repetitions (once each)."""
    out = []
    for entry in entries:
        change = counts_of(repetitions(entry))
        if not change:
            continue
        base_reps = entry.get("base_repetitions")
        base = counts_of([r for r in base_reps if isinstance(r, Mapping)]) if base_reps else []
        where = f"{entry.get('nodeid')} [{entry.get('name')}]"
        requests = sorted({int(c.get("requests") or 0) for c in change + base})
        out.append(
            f"{where}: counted, {'/'.join(f'{n:,}' for n in requests)} requests per window, "
            f"{change[0].get('tool') or MISSING}"
        )
        checked = judged(entry)
        if base:
            out.append(f"  A: {figures(base, checked, verbose)}")
            out.append(f"  B: {figures(change, checked, verbose)}")
        else:
            out.append(f"  {figures(change, checked, verbose)}")
        why = concurrency_line(entry)
        if why:
            out.append(f"  {why}")
        out.append(f"  cost: {cost(change + base, verbose)}")
        notes = dict.fromkeys(
            str(n) for c in change + base for n in c.get("notes") or () if "counted by" not in n
        )
        out += [f"  {note}" for note in notes]
    return out


def change_line(change: Mapping[str, Any], fixes: Mapping[str, Any] | None = None) -> str:
    """``+180.9 Ir/req  serve (server) (inclusive +181.5)``; a Python or JavaScript
    function (or the server's own) by its own change, with the library and runtime code
    it calls; code without symbols under its caller, with how to get its names."""
    own, total = number(change.get("own_ir")), number(change.get("change_total_ir"))
    value = own if own is not None else number(change.get("change_ir"))
    figure = MISSING if value is None else f"{value:+,.1f}"
    said = [] if own is None else ["with the library, runtime and unnamed code it calls"]
    said += [] if total is None else [f"inclusive {total:+,.1f}"]
    line = f"{figure} Ir/req  {change.get('function') or MISSING}"
    line += f" ({'; '.join(said)})" if said else ""
    unnamed = change.get("unnamed")
    if isinstance(unnamed, str):
        fix = (fixes or {}).get(unnamed)
        line += f": {unnamed} has no symbols" + (f"; {fix}" if fix else "")
    return line


def profile_lines(profile: Mapping[str, Any], top: int) -> list[str]:
    """The named functions of a counted profile (B - A), or the largest changes when none
    is named, said so; then its notes (why functions went unnamed, ...)."""
    found = profile.get("changes")
    changes = [c for c in found if isinstance(c, Mapping)] if isinstance(found, list) else []
    fixes = profile.get("unnamed") if isinstance(profile.get("unnamed"), Mapping) else {}
    notes = [f"  note: {n}" for n in profile.get("notes") or () if isinstance(n, str)]
    named = [c for c in changes if c.get("credible")]
    if named:
        head = "profile (B - A, instructions per request, counted):"
        return [head] + ["  " + change_line(c, fixes) for c in named[:top]] + notes
    if not changes:
        return ["profile (B - A, instructions per request): no function to compare", *notes]
    head = (
        "profile (B - A, instructions per request): no function named (its repetitions "
        "overlap, or one pair); the largest changes:"
    )
    return [head] + ["  " + change_line(c, fixes) for c in changes[:top]] + notes
