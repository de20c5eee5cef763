"""What two sides' counted windows say of a change, per function (pure: no I/O).

``diff`` compares two sides over their repetitions: per function, the change of exclusive
(a source frame's own) instructions per request B - A, and whether it is named as changed
(``named``: every repetition of B beyond every repetition of A, by more than twice either
side's own range; a source frame's own also by ``named_own``: beyond every repetition
of A, with one part of it, one function it ran, changed by that rule while another
wanders); ranked the user's code first, then libraries', then the runtime's (``rank``).
Counts are not samples: a deterministic server's repetitions agree exactly, so a change
of one instruction per request is real; a runtime whose own threads run in the window
(Go's scheduler, V8's compiler) wanders, and its functions are named only when the change
dwarfs the wandering. A t-interval over two pairs (one degree of freedom) would name
nothing at all.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pytest_webperf.profiling import frames
from pytest_webperf.profiling.instructions.window import Window, label
from pytest_webperf.profiling.naming import Function, is_held
from pytest_webperf.stats.ratio import mean

MIN_SHARE = 1e-3  # a function is tested when it has this share of either side's instructions
MIN_CHANGE = 1e-4  # ... and named when its change is at least this share of the base's total
TOP = 25  # functions kept in the profile, ranked by their change
LEAD = 0.05  # a named change this share of the largest one is ranked by whose code it is
STACK_SHARE = 1e-5  # folded stacks below this share of a side's total are merged
OTHER = "[other stacks]"


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
    if not beyond(a, b):
        return False
    change = mean(b) - mean(a)
    spread = max(max(a) - min(a), max(b) - min(b))
    return abs(change) > 2 * spread and abs(change) >= max(MIN_CHANGE * total, 0.5)


def beyond(a: Sequence[float], b: Sequence[float]) -> bool:
    """Whether every repetition of B is beyond every one of A, the way the means moved
    (two repetitions a side at least)."""
    if min(len(a), len(b)) < 2:
        return False
    return min(b) > max(a) if mean(b) > mean(a) else max(b) < min(a)


Sides = tuple[Sequence[float], Sequence[float]]  # A's and B's, one value per repetition


def named_own(own: Sides, within: Sequence[Sides], total: float) -> bool:
    """Whether a source frame's own instructions per request changed: by ``named``'s
    rule, or, where they wander because one part of them does, when every repetition of
    B is beyond every one of A and another part (``within``: each function's cost in
    it) changed the same way by ``named``'s rule. CPython's allocator wanders so: by the
    state a fresh process's heap was left in, its pools are taken and given back more
    often in some processes than in others (a Python function's own cost 1 % apart
    between fresh processes, in ``_PyObject_Malloc`` and ``_PyObject_Free`` alone), while
    the function's bytecode and arithmetic repeat exactly."""
    a, b = own
    if named(a, b, total):
        return True
    if not beyond(a, b):
        return False
    grew = mean(b) > mean(a)
    return any(named(x, y, total) and (mean(y) > mean(x)) == grew for x, y in within)


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
    each), ranked (``rank``): named changes first (``named``, on the exclusive; a source
    frame's own cost by ``named_own``), the user's code before libraries before the runtime
    among those that matter (``LEAD``), then by size."""
    usable = [(a, b) for a, b in pairs if a.requests > 0 and b.requests > 0]
    if not usable:
        return Diff((), 0, 0, 0.0, 0.0)
    base_total = mean([a.instructions_per_req for a, _ in usable])
    change_total = mean([b.instructions_per_req for _, b in usable])
    functions = {f for a, b in usable for f in (*a.exclusive, *b.exclusive, *a.own, *b.own)}
    sources = {f for a, b in usable for f in (*a.own, *b.own)}
    by: dict[Function, set[tuple[Function, Function]]] = defaultdict(set)  # source -> keys
    for key in {key for pair in usable for w in pair for key in w.own_by}:
        by[key[0]].add(key)

    def side(
        key: Function | tuple[Function, Function], index: int, figures: str = "exclusive"
    ) -> list[float]:
        windows = [pair[index] for pair in usable]
        return [w.per_request(getattr(w, figures).get(key, 0)) for w in windows]

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
        within = [(side(key, 0, "own_by"), side(key, 1, "own_by")) for key in by[function]]
        credible = (
            named_own(own, within, base_total) if function in sources else named(a, b, base_total)
        )
        changes.append(
            FunctionChange(
                function,
                mean(a),
                mean(b),
                inclusive(function, 0),
                inclusive(function, 1),
                min(deltas),
                max(deltas),
                credible,
                kind=kind_of(usable, function),
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
