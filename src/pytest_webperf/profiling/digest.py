"""A profile small enough to keep: each repetition's largest functions, and folded
stacks cut to a size cap with every sample still counted (pure).

What the diff needs of a side is each repetition's self samples per function (it pools
them and measures how much repetitions differ) and its CPU per request; the flame graph
needs stacks. So a digest is:

* per repetition, ``leaves``: the self samples of its ``MAX_LEAVES`` largest functions
  and ``(rest)`` for the others (a function with 1.6 % of the samples or more is always
  among 64), with its samples, requests, CPU per request and the sampling rates;
* for the whole side, ``folded``: the largest stacks while they fit three quarters of
  the cap; the stacks cut are kept as ``(truncated);LEAF`` (each function's self samples
  exact) while those fit, the last as ``(truncated);(other functions)``. The total never
  changes, so shares stay right.

A stored baseline keeps one digest per measurement in its ``latest`` entry, never in its
history, so a test's file grows by at most ``MAX_BYTES`` per measurement however often
it is saved.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

SCHEMA = 1
MAX_BYTES = 64 * 1024
MAX_LEAVES = 64
MAX_FRAME = 200  # characters: a C++ template's or a lambda's name can be kilobytes
TRUNCATED = "(truncated)"
OTHER = "(other functions)"
REST = "(rest)"


def _line(stack: str, count: int) -> int:
    return len(stack.encode()) + len(str(count)) + 2


def _short(stack: str) -> str:
    return ";".join(
        f if len(f) <= MAX_FRAME else f[: MAX_FRAME - 1] + "…" for f in stack.split(";")
    )


def bound(stacks: Mapping[str, int], max_bytes: int = MAX_BYTES) -> dict[str, int]:
    """``stacks`` cut to ``max_bytes`` of folded text, as the module says."""
    merged: dict[str, int] = {}
    for stack, count in stacks.items():
        if count > 0:
            key = _short(stack)
            merged[key] = merged.get(key, 0) + count
    ranked = sorted(merged.items(), key=lambda kv: (-kv[1], kv[0]))
    kept: dict[str, int] = {}
    used = 0
    cut: dict[str, int] = {}  # leaf -> self samples of the stacks not kept
    for stack, count in ranked:
        size = _line(stack, count)
        if not cut and used + size <= max_bytes * 3 // 4:
            kept[stack] = count
            used += size
        else:
            leaf = stack.rsplit(";", 1)[-1]
            cut[leaf] = cut.get(leaf, 0) + count
    reserve = _line(f"{TRUNCATED};{OTHER}", sum(cut.values()) or 1)
    other = 0
    for leaf, count in sorted(cut.items(), key=lambda kv: (-kv[1], kv[0])):
        key = f"{TRUNCATED};{leaf}"
        size = _line(key, count)
        if used + size + reserve <= max_bytes:
            kept[key] = kept.get(key, 0) + count
            used += size
        else:
            other += count
    if other:
        key = f"{TRUNCATED};{OTHER}"
        kept[key] = kept.get(key, 0) + other
    return kept


def leaves(stacks: Mapping[str, int], limit: int = MAX_LEAVES) -> dict[str, int]:
    """Self samples of the ``limit`` largest functions, the rest as one ``(rest)``."""
    own: dict[str, int] = {}
    for stack, count in stacks.items():
        leaf = stack.rsplit(";", 1)[-1]
        own[leaf] = own.get(leaf, 0) + count
    ranked = sorted(own.items(), key=lambda kv: (-kv[1], kv[0]))
    top = dict(ranked[:limit])
    rest = sum(count for _, count in ranked[limit:])
    if rest:
        top[REST] = top.get(REST, 0) + rest
    return top


def repetition(
    stacks: Mapping[str, int],
    requests: int,
    cpu_per_request_us: float | None,
    rates: Mapping[str, int],
) -> dict[str, Any]:
    """One repetition as a digest keeps it (JSON)."""
    return {
        "leaves": leaves(stacks),
        "samples": sum(stacks.values()),
        "requests": requests,
        "cpu_per_request_us": cpu_per_request_us,
        "rate_hz": dict(rates),
    }


def digest(
    tools: Sequence[str],
    repetitions: Sequence[Mapping[str, Any]],
    folded: Mapping[str, int],
    max_bytes: int = MAX_BYTES,
) -> dict[str, Any]:
    """A side's digest (JSON): its repetitions (``repetition``) and its folded stacks,
    which get what the leaves leave of ``max_bytes`` (4 KiB at least)."""
    used = sum(_line(f, c) for r in repetitions for f, c in dict(r.get("leaves") or {}).items())
    kept = bound(folded, max(4096, max_bytes - used))
    return {
        "schema": SCHEMA,
        "tools": list(tools),
        "repetitions": [dict(r) for r in repetitions],
        "folded": "".join(f"{s} {c}\n" for s, c in sorted(kept.items())),
    }


def check(data: object) -> str | None:
    """Why ``data`` is not a digest this version reads, or None."""
    if not isinstance(data, Mapping):
        return "not an object"
    if data.get("schema") != SCHEMA:
        return f"schema {data.get('schema')!r}, this version reads {SCHEMA}"
    reps = data.get("repetitions")
    if not isinstance(reps, list) or not all(
        isinstance(r, Mapping) and isinstance(r.get("leaves"), Mapping) for r in reps
    ):
        return "its repetitions have no leaves"
    if not isinstance(data.get("folded"), str):
        return "no folded stacks"
    return None
